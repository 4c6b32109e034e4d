"""A thread that keeps swapping one path for other kinds of file while a test reads the folder:
the race of a file replaced during a push, made to happen often."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

SECRET = "The vault code is 1234."


def file_swaps(path: Path, outside: Path) -> list[Callable[[], None]]:
    """Ways to put something at ``path``, in turn: a regular file, a link to the file
    ``outside``, a folder, a FIFO."""
    return [
        lambda: path.write_text("# Swapped\n\nInside text.\n", encoding="utf-8"),
        lambda: path.symlink_to(outside),
        lambda: path.mkdir(),
        lambda: os.mkfifo(path),
    ]


def folder_swaps(folder: Path, outside: Path) -> list[Callable[[], None]]:
    """Ways to put something at ``folder``, in turn: a folder holding note.md, a link to the
    folder ``outside``."""

    def real_folder() -> None:
        folder.mkdir()
        (folder / "note.md").write_text("# Note\n\nInside note.\n", encoding="utf-8")

    return [real_folder, lambda: folder.symlink_to(outside, target_is_directory=True)]


def remove(path: Path) -> None:
    """Remove whatever is at ``path`` (a folder with its files)."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink()
    elif path.is_dir():
        for child in path.iterdir():
            child.unlink()
        path.rmdir()


@contextmanager
def swapping(swaps: dict[Path, list[Callable[[], None]]]) -> Iterator[list[int]]:
    """A thread replacing each path of ``swaps`` by each of its makers in turn until the block
    ends, with threads switching every microsecond (not every 5 ms), so that swaps land between
    a walk's steps. Yields a one-item list counting the swaps made."""
    done, made = threading.Event(), [0]
    rounds = max(len(makers) for makers in swaps.values())

    def run() -> None:
        while not done.is_set():
            for turn in range(rounds):
                for path, makers in swaps.items():
                    remove(path)
                    makers[turn % len(makers)]()
                    made[0] += 1

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield made
    finally:
        done.set()
        thread.join(timeout=10)
        sys.setswitchinterval(interval)
