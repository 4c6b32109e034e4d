"""A file swapped for a link, a folder or a FIFO while the folder is read: the swapped-in thing
is never read through the old path, and the walk goes on."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import loader.ingest.readers as readers
import loader.ingest.readers.opening as opening
from loader.documents import Document
from loader.ingest.readers import Skipped, iter_documents
from tests.swapping import SECRET, file_swaps, folder_swaps, remove, swapping


def _replace_with(kind: str, path: Path, outside: Path) -> None:
    """Put a ``kind`` where the file ``path`` is: a link to ``outside``, a folder or a FIFO."""
    path.unlink()
    if kind == "link":
        path.symlink_to(outside)
    elif kind == "folder":
        path.mkdir()
    else:
        os.mkfifo(path)


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("link", opening.CHANGED_REASON),
        ("folder", "not a regular file (a directory)"),
        ("fifo", "not a regular file (a FIFO)"),
    ],
)
def test_a_file_swapped_after_the_walk_looked_at_it_is_refused_not_read(
    folders: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, kind: str, reason: str
) -> None:
    """The walk has looked at swap.md (a regular file) when it is swapped: the read must not go
    through the path again to whatever is there now (a link out of the folder, a folder, a FIFO
    that would block), and the walk goes on."""
    kb, outside = folders
    swapped = kb / "swap.md"
    swapped.write_text("# Swap\n\nInside text.\n", encoding="utf-8")
    looked_at = readers.walk_entry

    def entry_then_swap(path: Path) -> tuple[os.stat_result, Path | None]:
        found = looked_at(path)
        if path == swapped:
            _replace_with(kind, swapped, outside / "secret.md")
        return found

    monkeypatch.setattr(readers, "walk_entry", entry_then_swap)
    items = {item.source: item for item in iter_documents(kb, 1_000_000)}
    assert items["swap.md"] == Skipped("swap.md", reason)
    assert isinstance(items["guide.md"], Document)


def test_a_folder_swapped_for_a_link_after_the_walk_entered_it_is_not_read_through(
    folders: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """kb/sub was a folder when the walk entered it and is a link out of kb when its file is
    opened: the file opened is outside the pushed folder, and refused."""
    kb, outside = folders
    sub = kb / "sub"
    (sub / "note.md").write_text("# Note\n\nInside note.\n", encoding="utf-8")
    (outside / "note.md").unlink()
    looked_at = readers.walk_entry

    def entry_then_swap(path: Path) -> tuple[os.stat_result, Path | None]:
        found = looked_at(path)
        if path == sub / "note.md":
            # The same inode, moved out: only where the opened file lies tells them apart.
            (sub / "note.md").rename(outside / "note.md")
            sub.rmdir()
            sub.symlink_to(outside, target_is_directory=True)
        return found

    monkeypatch.setattr(readers, "walk_entry", entry_then_swap)
    items = {item.source: item for item in iter_documents(kb, 1_000_000)}
    assert items["sub/note.md"] == Skipped("sub/note.md", opening.CHANGED_REASON)


def read_while_swapping(kb: Path, swaps: dict[Path, list[Callable[[], None]]]) -> list[object]:
    """Walk ``kb`` again and again for 3 seconds (at most 2,000 walks) while the paths of
    ``swaps`` are swapped; every item every walk yielded."""
    items: list[object] = []
    deadline = time.monotonic() + 3
    with swapping(swaps) as swaps_made:
        for _ in range(2000):
            items += list(iter_documents(kb, 1_000_000))
            if time.monotonic() > deadline:
                break
    assert swaps_made[0] > 100, "the swapping thread hardly ran: the test proves nothing"
    return items


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    kb, outside = tmp_path / "kb", tmp_path / "outside"
    (kb / "sub").mkdir(parents=True)
    outside.mkdir()
    (kb / "guide.md").write_text("# Guide\n\nText.\n", encoding="utf-8")
    (outside / "secret.md").write_text(f"# Secret\n\n{SECRET}\n", encoding="utf-8")
    (outside / "note.md").write_text(f"# Note\n\n{SECRET}\n", encoding="utf-8")
    return kb, outside


def _texts(items: list[object]) -> list[str]:
    return [
        block.text
        for item in items
        if isinstance(item, Document)
        for section in item.sections
        for block in section.blocks
    ]


def test_a_file_swapped_again_and_again_is_never_read_through_the_swap(
    folders: tuple[Path, Path],
) -> None:
    kb, outside = folders
    # Twenty files swapped: twenty races per walk.
    swapped = [kb / f"swap{number:02}.md" for number in range(20)]
    swaps = {path: file_swaps(path, outside / "secret.md") for path in swapped}
    items = read_while_swapping(kb, swaps)
    assert SECRET not in _texts(items)
    # Every walk got to the end: it read the file nobody touched.
    assert len([item for item in items if getattr(item, "source", "") == "guide.md"]) > 10
    reasons = {item.reason for item in items if isinstance(item, Skipped)}
    assert not any(reason.startswith("unexpected") for reason in reasons), reasons


def test_a_folder_swapped_again_and_again_for_a_link_out_is_never_read_through(
    folders: tuple[Path, Path],
) -> None:
    kb, outside = folders
    remove(kb / "sub")
    swapped = [kb / f"sub{number:02}" for number in range(20)]
    items = read_while_swapping(kb, {path: folder_swaps(path, outside) for path in swapped})
    assert SECRET not in _texts(items)
    assert len([item for item in items if getattr(item, "source", "") == "guide.md"]) > 10
