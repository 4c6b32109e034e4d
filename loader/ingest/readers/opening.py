"""Opening a walked file safely: what the walk takes a path for (``walk_entry``), the checks
before a file is opened (``check_size``: a FIFO would block forever) and the one read from one
descriptor that refuses a file swapped for a link, a folder or a FIFO after the walk looked at it
(``open_walked``). Each refusal is a ``Rejected`` with the one-line reason a push prints.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from loader.ingest.readers.common import Rejected
from loader.userfile import read_at_most


def human_size(size: int) -> str:
    """``12 MB``, ``340 kB``, ``900 bytes`` (decimal units, like max_file_bytes' default)."""
    for unit, scale in (("MB", 1_000_000), ("kB", 1_000)):
        if size >= scale:
            value = size / scale
            return (
                f"{value:.0f} {unit}" if value >= 10 else f"{value:.1f} {unit}".replace(".0 ", " ")
            )
    return f"{size} bytes"


CHANGED_REASON = "changed while the push read it (replaced or moved); push again"


def os_reason(exc: OSError, path: Path) -> str:
    if exc.errno == errno.ELOOP:
        return "symlink loop"
    if exc.errno == errno.ENOENT and path.is_symlink():
        return "broken symlink"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if exc.errno == errno.EINVAL:  # readlink of a link that stopped being one
        return CHANGED_REASON
    return f"cannot read: {exc.strerror or exc}"


def file_kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def walk_entry(path: Path) -> tuple[os.stat_result, Path | None]:
    """What the walk takes ``path`` for: its ``lstat`` and ``None``, or for a symbolic link the
    ``stat`` of its resolved target and that target. Stat-ing the resolved path (not the link
    again) means a link re-pointed meanwhile cannot lend its new target's identity.

    Raises:
        OSError: a broken link (ENOENT), a loop (ELOOP), a link that stopped being one while it
            was resolved (EINVAL), ...
    """
    info = os.lstat(path)
    if not stat.S_ISLNK(info.st_mode):
        return info, None
    target = Path(os.path.realpath(path, strict=True))
    return target.stat(), target


def check_size(info: os.stat_result, max_bytes: int) -> None:
    if not stat.S_ISREG(info.st_mode):
        # Checked before opening: reading a FIFO would block forever.
        raise Rejected(f"not a regular file ({file_kind(info.st_mode)})")
    if info.st_size == 0:
        raise Rejected("empty file")
    if info.st_size > max_bytes:
        raise Rejected(
            f"larger than max_file_bytes ({human_size(info.st_size)} > {human_size(max_bytes)})"
        )


def open_walked(
    path: Path, walked: os.stat_result, linked: bool, inside: Path | None, max_bytes: int
) -> bytes:
    """The bytes of the file the walk saw at ``path``, read from one descriptor.

    Opened without following a link (unless the walk reached it through one), without blocking
    (a FIFO swapped in must not hang the push), then checked: a regular file, the same device
    and inode as ``walked``, and (where the system says) inside ``inside``, so that a folder
    above it swapped for a link out of the pushed folder is caught too.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    if not linked:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not linked:  # it became a symbolic link
            raise Rejected(CHANGED_REASON) from None
        raise Rejected(os_reason(exc, path)) from None
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            raise Rejected(f"not a regular file ({file_kind(opened.st_mode)})")
        if (opened.st_dev, opened.st_ino) != (walked.st_dev, walked.st_ino):
            raise Rejected(CHANGED_REASON)
        real = opened_path(fd)
        if inside is not None and real is not None and not real.is_relative_to(inside):
            raise Rejected(CHANGED_REASON)
        data = read_bytes(fd, max_bytes + 1)
    except OSError as exc:
        raise Rejected(os_reason(exc, path)) from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # it grew since the walk looked
        raise Rejected(f"larger than max_file_bytes (> {human_size(max_bytes)})")
    if not data:
        raise Rejected("empty file")
    return data


def opened_path(fd: int) -> Path | None:
    """Where the open file ``fd`` really is (Linux's /proc), or None where the system does not
    say."""
    try:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return None


def read_bytes(fd: int, limit: int) -> bytes:
    """Up to ``limit`` bytes of the open file ``fd`` (one seam for tests that simulate
    unreadable files)."""
    return read_at_most(fd, limit)
