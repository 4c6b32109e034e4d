"""Reading a file the user named (loader.toml, api_keys_file, a chat history, an eval results
file, rewrite_api_key_file): one way, with limits.

A path on a command line or in a setting may name anything: a FIFO (reading it waits forever for
a writer), ``/dev/zero`` (reading it fills the memory), a folder, a file of gigabytes. Such files
are refused before they are read, naming the file: regular files only, at most
``MAX_USER_FILE_BYTES``. The file is opened once, without blocking, and checked on the
descriptor it is read from, so a path swapped for a FIFO after the check cannot hang either.

Parsing is the caller's, but numbers past Python's int-string conversion limit (a
100,000-digit number) raise ``ValueError`` from ``tomllib`` and ``json``: ``parse_failure`` says
so in words, so that the caller's error names the file instead of the push ending with
"unexpected ValueError".

Example::

    text = read_user_text("history.json", "history file")
    # ConfigError: "history file history.json is a named pipe, not a regular file"
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from pathlib import Path

from loader.errors import ConfigError, LoaderError

__all__ = [
    "MAX_USER_FILE_BYTES",
    "parse_failure",
    "read_user_bytes",
    "read_user_text",
    "user_text",
]

# Far above any configuration, key list, history or results file anyone writes by hand or by a
# `loader eval` run; far below what would hurt the machine.
MAX_USER_FILE_BYTES = 20_000_000

_FILE_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
)


def file_kind(mode: int) -> str:
    """``"a named pipe"``, ``"a directory"``, ... for a mode that is no regular file's."""
    return next((name for is_kind, name in _FILE_KINDS if is_kind(mode)), "a special file")


def read_user_bytes(
    path: str | Path,
    what: str,
    *,
    max_bytes: int = MAX_USER_FILE_BYTES,
    error: type[LoaderError] = ConfigError,
) -> bytes:
    """The bytes of the regular file ``path``, named ``what`` in messages ("history file").

    Raises:
        error (ConfigError unless given): ``"<what> <path> does not exist"``, ``"... is a named
            pipe, not a regular file"``, ``"... is larger than 20 MB"``, ``"... cannot be read
            (Permission denied)"``.
    """
    name = f"{what} {path}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise error(f"{name} does not exist") from None
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket, or a FIFO opened for writing only
            raise error(
                f"{name} is {file_kind(os.stat(path).st_mode)}, not a regular file"
            ) from None
        raise error(f"{name} cannot be read ({exc.strerror or exc})") from None
    try:
        mode, size = (info := os.fstat(fd)).st_mode, info.st_size
        if not stat.S_ISREG(mode):
            raise error(f"{name} is {file_kind(mode)}, not a regular file")
        if size > max_bytes:
            raise error(f"{name} is larger than {max_bytes:,} bytes ({size:,})")
        data = read_at_most(fd, max_bytes + 1)
    except OSError as exc:
        raise error(f"{name} cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # it grew while it was read
        raise error(f"{name} is larger than {max_bytes:,} bytes")
    return data


def read_user_text(
    path: str | Path,
    what: str,
    *,
    max_bytes: int = MAX_USER_FILE_BYTES,
    error: type[LoaderError] = ConfigError,
) -> str:
    """``read_user_bytes`` decoded as UTF-8 (a byte order mark dropped).

    Raises:
        error: as ``read_user_bytes``, or ``"<what> <path> is not UTF-8 text (byte 0xff on line
            3)"``.
    """
    data = read_user_bytes(path, what, max_bytes=max_bytes, error=error)
    return user_text(data, f"{what} {path}", error=error)


def user_text(data: bytes, name: str, *, error: type[LoaderError] = ConfigError) -> str:
    """The bytes of a file the user gave (read here, or uploaded to the judging page) decoded
    as UTF-8, a byte order mark dropped; ``name`` names it (``"history file h.json"``).

    Raises:
        error: ``"<name> is not UTF-8 text (byte 0xff on line 3); save it as UTF-8"``.
    """
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise error(
            f"{name} is not UTF-8 text (byte {data[exc.start]:#04x} on line {line}); "
            "save it as UTF-8"
        ) from None


def parse_failure(exc: ValueError) -> str:
    """Why ``tomllib.loads`` or ``json.loads`` failed, in words: their own message, or for a
    number past Python's int-string conversion limit (a plain ``ValueError``), that."""
    if "integer string conversion" in str(exc):
        return f"a number has more than {sys.get_int_max_str_digits()} digits"
    return getattr(exc, "msg", None) or str(exc)


def read_at_most(fd: int, limit: int) -> bytes:
    """Up to ``limit`` bytes of the open file ``fd``: a device or a file that grows cannot make
    a read take more (``/dev/zero`` once ate 3.8 GB)."""
    chunks, size = [], 0
    while size < limit:
        chunk = os.read(fd, min(limit - size, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)
