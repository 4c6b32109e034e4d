"""Walking a folder: sorted, hidden files ignored, each bad file a Skipped, good files read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import loader.ingest.readers as readers
import loader.ingest.readers.opening as opening
from loader.documents import Document
from loader.errors import ConfigError, InputError
from loader.ingest.readers import (
    OUTSIDE_REASON,
    Skipped,
    file_type,
    iter_documents,
    read_document,
)


def write(root: Path, name: str, content: str | bytes) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def outcome(root: Path, max_bytes: int = 1000, **options: bool) -> dict[str, str]:
    """source -> "ok" or the skip reason."""
    return {
        item.source: "ok" if isinstance(item, Document) else item.reason
        for item in iter_documents(root, max_bytes, **options)
    }


def test_bad_files_are_skipped_with_reasons_and_good_files_come_through(tmp_path: Path) -> None:
    write(tmp_path, "a-good.md", "# Good\n\nText.\n")
    write(tmp_path, "binary.md", b"PK\x03\x04\x00\x00binary")
    write(tmp_path, "latin1.txt", "caf\u00e9 ok".encode("latin-1"))
    write(tmp_path, "empty.md", "")
    write(tmp_path, "blank.txt", "  \n\t\n")
    write(tmp_path, "big.md", "x" * 2500)
    write(tmp_path, "image.png", b"\x89PNG")
    write(tmp_path, "README", "no suffix")
    write(tmp_path, "bad-front-matter.md", "---\nnot: [ok\njunk line\n---\nText.\n")
    write(tmp_path, "sub/z-good.txt", "Plain text.")
    write(tmp_path, ".hidden.md", "# Hidden\n")
    write(tmp_path, ".git/config.md", "# Hidden folder\n")
    os.mkfifo(tmp_path / "pipe.md")

    assert outcome(tmp_path) == {
        "README": "unsupported file type (no suffix)",
        "a-good.md": "ok",
        "bad-front-matter.md": "malformed front matter on line 2: not valid YAML (expected ',' "
        "or ']', but got '<stream end>')",
        "big.md": "larger than max_file_bytes (2.5 kB > 1 kB)",
        "binary.md": "binary file",
        "blank.txt": "empty file",
        "empty.md": "empty file",
        "image.png": "unsupported file type .png",
        "latin1.txt": "not valid UTF-8 (byte 0xe9 at offset 3)",
        "pipe.md": "not a regular file (a FIFO)",
        "sub/z-good.txt": "ok",
    }


def test_only_files_of_types_no_reader_handles_are_ignored(tmp_path: Path) -> None:
    """``ignored`` is decided where the reader refuses the type, and only there: a binary or
    empty file with a supported suffix, a broken PDF, a broken link stay failures."""
    write(tmp_path, "img/logo.PNG", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    write(tmp_path, "Makefile", "all:\n\ttrue\n")
    write(tmp_path, "data.csv", "a,b\n1,2\n")
    write(tmp_path, "backup.tar.gz", b"\x1f\x8b\x08\x00")
    write(tmp_path, "guide.md", "# Guide\n\nText.\n")
    write(tmp_path, "binary.md", b"\x00\x01")
    write(tmp_path, "empty.txt", "")
    write(tmp_path, "broken.pdf", b"not a PDF at all")
    (tmp_path / "logo.png").symlink_to(Path("img") / "logo.PNG")  # read under the link: its type
    (tmp_path / "gone.png").symlink_to("nowhere.png")  # a broken link is a failure, whatever type

    items = {item.source: item for item in iter_documents(tmp_path, 1000)}
    skips = {source: item for source, item in items.items() if isinstance(item, Skipped)}
    assert {source: item.reason for source, item in skips.items() if item.ignored} == {
        "Makefile": "unsupported file type (no suffix)",
        "backup.tar.gz": "unsupported file type .gz",
        "data.csv": "unsupported file type .csv",
        "img/logo.PNG": "unsupported file type .png",
        "logo.png": "unsupported file type .png",
    }
    assert sorted(source for source, item in skips.items() if not item.ignored) == [
        "binary.md", "broken.pdf", "empty.txt", "gone.png"
    ]  # fmt: skip
    assert isinstance(items["guide.md"], Document)


def test_file_type_is_the_lower_cased_suffix() -> None:
    assert file_type("img/Logo.PNG") == ".png"
    assert file_type("backup.tar.gz") == ".gz"
    assert file_type("Makefile") == ""
    assert file_type("docs.v2/README") == ""


def test_order_is_sorted_and_sources_use_forward_slashes(tmp_path: Path) -> None:
    for name in ("b.md", "a/c.md", "a/b/d.txt", "c.html"):
        write(tmp_path, name, "<p>Text.</p>" if name.endswith("html") else "Text.")
    sources = [item.source for item in iter_documents(tmp_path, 1000)]
    assert sources == ["a/b/d.txt", "a/c.md", "b.md", "c.html"]


def test_sizes_are_human(tmp_path: Path) -> None:
    write(tmp_path, "big.md", "x" * 12_000_000)
    assert outcome(tmp_path, 10_000_000) == {"big.md": "larger than max_file_bytes (12 MB > 10 MB)"}


def test_symlink_loops_are_reported_not_followed(tmp_path: Path) -> None:
    write(tmp_path, "docs/guide.md", "Guide.")
    (tmp_path / "docs" / "loop").symlink_to(tmp_path / "docs", target_is_directory=True)
    (tmp_path / "self.md").symlink_to(tmp_path / "self.md")
    (tmp_path / "alias.md").symlink_to(tmp_path / "docs" / "guide.md")
    (tmp_path / "dangling.md").symlink_to(tmp_path / "missing.md")
    assert outcome(tmp_path) == {
        "alias.md": "symlink to docs/guide.md, which is read under its own path",
        "dangling.md": "broken symlink",
        "docs/guide.md": "ok",
        "docs/loop": "symlink loop",
        "self.md": "symlink loop",
    }


def test_unreadable_file_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Root reads anything, so chmod 000 proves nothing here: make the read itself fail.
    locked = write(tmp_path, "locked.md", "Secret.")
    write(tmp_path, "open.md", "Open.")
    real_read = opening.read_bytes

    def read_bytes(fd: int, limit: int) -> bytes:
        if os.fstat(fd).st_ino == locked.stat().st_ino:
            raise PermissionError(13, "Permission denied", str(locked))
        return real_read(fd, limit)

    monkeypatch.setattr(opening, "read_bytes", read_bytes)
    assert outcome(tmp_path) == {"locked.md": "permission denied", "open.md": "ok"}


def test_unreadable_folder_is_skipped_by_its_own_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What the push plan keeps the files of (chunks under a skipped folder are not deleted).
    write(tmp_path, "locked/inner.md", "Secret.")
    write(tmp_path, "open.md", "Open.")
    real_children = readers._children

    def children(folder: Path) -> list[Path]:
        if folder.name == "locked":
            raise PermissionError(13, "Permission denied", str(folder))
        return real_children(folder)

    monkeypatch.setattr(readers, "_children", children)
    assert outcome(tmp_path) == {"locked": "permission denied", "open.md": "ok"}


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read files without permission")
def test_chmod_000_file_is_skipped(tmp_path: Path) -> None:
    locked = write(tmp_path, "locked.md", "Secret.")
    locked.chmod(0)
    try:
        assert outcome(tmp_path) == {"locked.md": "permission denied"}
    finally:
        locked.chmod(0o644)


def test_read_document_raises_input_error_naming_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "sub/binary.txt", b"\x00\x01")
    with pytest.raises(InputError, match=r"^sub/binary\.txt: binary file$"):
        read_document(path, tmp_path, 1000)
    (tmp_path / "folder.md").mkdir()
    with pytest.raises(InputError, match=r"folder\.md: not a regular file \(a directory\)"):
        read_document(tmp_path / "folder.md", tmp_path, 1000)
    # Asked for by name, a file of a type no reader handles is an error, not ignored.
    with pytest.raises(InputError, match=r"^logo\.png: unsupported file type \.png$"):
        read_document(write(tmp_path, "logo.png", b"\x89PNG"), tmp_path, 1000)


def test_root_must_be_a_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a folder"):
        list(iter_documents(write(tmp_path, "a.md", "A."), 1000))


def test_skipped_is_a_value() -> None:
    assert Skipped("a.md", "binary file") == Skipped("a.md", "binary file")
    assert not Skipped("a.md", "binary file").ignored
    assert Skipped("a.png", "unsupported file type .png", ignored=True).ignored


# --- symbolic links ---------------------------------------------------------------------------


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the pushed one, holding a file and a subfolder nobody asked to push."""
    folder = tmp_path / "outside"
    write(folder, "secret.md", "# Secret\n\nThe vault code is 1234.\n")
    write(folder, "more/notes.txt", "Private notes.")
    return folder


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    folder = tmp_path / "kb"
    write(folder, "guide.md", "# Guide\n\nText.\n")
    return folder


def test_links_outside_the_folder_are_skipped_by_default(kb: Path, outside: Path) -> None:
    (kb / "secret.md").symlink_to(outside / "secret.md")
    (kb / "relative.md").symlink_to(Path("..") / "outside" / "secret.md")
    (kb / "shared").symlink_to(outside, target_is_directory=True)
    (kb / "etc.txt").symlink_to("/etc/hostname")
    assert outcome(kb) == {
        "etc.txt": OUTSIDE_REASON,
        "guide.md": "ok",
        "relative.md": OUTSIDE_REASON,
        "secret.md": OUTSIDE_REASON,
        "shared": OUTSIDE_REASON,
    }
    assert OUTSIDE_REASON == (
        "symbolic link to a target outside the pushed folder; set follow_symlinks = true to "
        "index it"
    )
    assert outcome(kb) == outcome(kb, follow_symlinks=False)


def test_follow_symlinks_reads_the_targets_under_the_links_names(kb: Path, outside: Path) -> None:
    (kb / "secret.md").symlink_to(outside / "secret.md")
    (kb / "shared").symlink_to(outside, target_is_directory=True)
    documents = {
        item.source: item
        for item in iter_documents(kb, 1000, follow_symlinks=True)
        if isinstance(item, Document)
    }
    assert sorted(documents) == [
        "guide.md",
        "secret.md",
        "shared/more/notes.txt",
        "shared/secret.md",
    ]
    assert "vault code" in documents["secret.md"].sections[0].text


def test_a_file_reached_through_links_inside_the_folder_is_read_once(kb: Path) -> None:
    write(kb, "docs/faq.md", "# FAQ\n\nAnswers.\n")
    write(kb, ".drafts/plan.md", "# Plan\n\nDraft.\n")
    write(kb, "notes", "A file without a suffix.")
    (kb / "a-faq.md").symlink_to(kb / "docs" / "faq.md")  # sorts before its target
    (kb / "docs" / "again.md").symlink_to("faq.md")
    (kb / "plan.md").symlink_to(Path(".drafts") / "plan.md")  # hidden target: read via the link
    (kb / "plan-copy.md").symlink_to(Path(".drafts") / "plan.md")
    (kb / "notes.md").symlink_to("notes")  # the target itself is not read (no suffix)
    assert outcome(kb) == {
        "a-faq.md": "symlink to docs/faq.md, which is read under its own path",
        "docs/again.md": "symlink to docs/faq.md, which is read under its own path",
        "docs/faq.md": "ok",
        "guide.md": "ok",
        "notes": "unsupported file type (no suffix)",
        "notes.md": "ok",
        "plan-copy.md": "ok",
        "plan.md": "symlink to the same file as plan-copy.md, which is read",
    }


def test_a_folder_linked_inside_the_folder_is_read_once(kb: Path) -> None:
    write(kb, "docs/faq.md", "# FAQ\n\nAnswers.\n")
    (kb / "also-docs").symlink_to("docs", target_is_directory=True)
    assert outcome(kb) == {
        "also-docs": "symlink to a folder that is read under another path",
        "docs/faq.md": "ok",
        "guide.md": "ok",
    }


@pytest.mark.parametrize("follow_symlinks", [False, True])
def test_folder_link_cycles_terminate(kb: Path, tmp_path: Path, follow_symlinks: bool) -> None:
    (kb / "a").mkdir()
    (kb / "a" / "up").symlink_to("..", target_is_directory=True)
    (kb / "a" / "self").symlink_to(".", target_is_directory=True)
    (kb / "root").symlink_to(kb, target_is_directory=True)
    # A cycle through the outside: kb/out -> outer, outer/back -> kb.
    outer = tmp_path / "outer"
    outer.mkdir()
    (outer / "back").symlink_to(kb, target_is_directory=True)
    (outer / "round").symlink_to(outer, target_is_directory=True)
    (kb / "out").symlink_to(outer, target_is_directory=True)
    expected = {
        "a/self": "symlink loop",
        "a/up": "symlink loop",
        "guide.md": "ok",
        "out": OUTSIDE_REASON,
        "root": "symlink loop",
    }
    if follow_symlinks:
        del expected["out"]
        expected["out/back"] = "symlink loop"
        expected["out/round"] = "symlink loop"
    assert outcome(kb, follow_symlinks=follow_symlinks) == expected


def test_broken_links_are_skipped(kb: Path, tmp_path: Path) -> None:
    (kb / "gone.md").symlink_to("nowhere.md")
    (kb / "gone-outside.md").symlink_to(tmp_path / "nowhere" / "x.md")
    (kb / "gone-folder").symlink_to(kb / "no-such-folder", target_is_directory=True)
    for follow_symlinks in (False, True):
        assert outcome(kb, follow_symlinks=follow_symlinks) == {
            "gone-folder": "broken symlink",
            "gone-outside.md": "broken symlink",
            "gone.md": "broken symlink",
            "guide.md": "ok",
        }
