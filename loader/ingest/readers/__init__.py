"""Readers: turn the files of a folder into ``Document`` objects.

``iter_documents`` walks a folder and yields a ``Document`` for every file it can read and a
``Skipped`` (with a one-line reason) for every file it cannot — one bad file never stops a push.
A file of a type no reader handles (an image, a CSV, a Makefile) is a ``Skipped`` marked
``ignored``: a push passes it over and counts it apart, it is no failure.
Symbolic links to anything outside the folder are reported, not followed, unless asked for
(``follow_symlinks``): pushing a folder must not index whatever a link in it points at.
``read_document`` reads one file and raises ``InputError`` instead.

Example::

    for item in iter_documents(Path("docs"), max_bytes=10_000_000, follow_symlinks=False):
        if isinstance(item, Skipped) and item.ignored:
            log.debug("ignored %s: %s", item.source, item.reason)
        elif isinstance(item, Skipped):
            log.warning("skipped %s: %s", item.source, item.reason)
        else:
            chunks = chunk_document(item, config, embedder.count_tokens)
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePath

from loader.documents import Document
from loader.errors import ConfigError, InputError
from loader.ingest.readers.code import CODE_LANGUAGES, read_code
from loader.ingest.readers.common import Rejected, Unsupported, decode_text
from loader.ingest.readers.docx import read_docx
from loader.ingest.readers.html import read_html
from loader.ingest.readers.markdown import read_markdown
from loader.ingest.readers.notebook import read_notebook
from loader.ingest.readers.opening import (
    check_size,
    open_walked,
    os_reason,
    walk_entry,
)
from loader.ingest.readers.pdf import read_pdf
from loader.ingest.readers.rst import read_rst
from loader.ingest.readers.text import read_text
from loader.text import first_surrogate

__all__ = ["SUPPORTED_SUFFIXES", "Skipped", "file_type", "iter_documents", "read_document"]

log = logging.getLogger(__name__)

SUPPORTED_SUFFIXES = (".md", ".markdown", ".html", ".htm", ".txt", ".pdf", ".docx")
SUPPORTED_SUFFIXES += (".rst", ".ipynb", *CODE_LANGUAGES)
# The readers of decoded text, by suffix (code files: CODE_LANGUAGES; others: plain text).
_TEXT_READERS = {
    ".md": read_markdown,
    ".markdown": read_markdown,
    ".html": read_html,
    ".htm": read_html,
    ".rst": read_rst,
    ".ipynb": read_notebook,
}

OUTSIDE_REASON = (
    "symbolic link to a target outside the pushed folder; set follow_symlinks = true to index it"
)


@dataclass(frozen=True)
class Skipped:
    """A file that was not read, and why.

    ``ignored``: its type is one no reader handles (``unsupported file type .png``), so a push
    passes it over and does not count it as failed; every other skip (a binary ``.md``, an
    unreadable PDF, a broken link, ...) is a failure.
    """

    source: str  # path relative to the root, forward slashes
    reason: str  # one human line, e.g. "binary file"
    ignored: bool = field(default=False, kw_only=True)


def file_type(name: str) -> str:
    """What picks a file's reader: its suffix, lower-cased; ``""`` for a name without one.

    Example::

        file_type("img/Logo.PNG")  # ".png"
        file_type("Makefile")      # ""
    """
    return PurePath(name).suffix.lower()


def _source(path: Path, root: Path) -> str:
    try:
        return PurePath(os.path.relpath(path, root)).as_posix()
    except ValueError:  # another drive on Windows
        return path.as_posix()


def is_within(source: str, skipped: str) -> bool:
    """Whether ``source`` is the ``Skipped`` path ``skipped`` itself or a file under it (a
    folder the walk could not enter): either way unreadable now, not removed."""
    return source == skipped or source.startswith(skipped + "/")


def printable_name(source: str) -> str:
    """``source`` with the bytes of a name that is not UTF-8 written as ``\\xNN`` escapes
    (``caf\\xe9.md``): what a skipped file is reported under."""
    try:
        return os.fsencode(source).decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate no file system decoding makes
        return source.encode("utf-8", "backslashreplace").decode("utf-8")


def _read(
    path: Path,
    source: str,
    max_bytes: int,
    walked: os.stat_result,
    linked: bool,
    inside: Path | None = None,
) -> Document:
    """Read one file, raising ``Rejected`` with a one-line reason when it cannot be used.

    ``walked`` is what the walk took the file for (``_entry``); ``linked``: it was reached
    through a symbolic link the walk allowed. The file is opened once and its bytes read from
    that descriptor (``open_walked``), so a file swapped for a link, a folder or a FIFO after
    the walk looked at it is refused, never read through the swapped-in path. ``inside``: the
    pushed folder (resolved) the opened file must lie in, when links out of it are refused.
    """
    if first_surrogate(source) is not None:
        # Bytes of another encoding in a name (a Latin-1 archive, say) reach Python as lone
        # surrogates: no id, hash or JSON can hold them.
        raise Rejected("file name is not valid UTF-8; rename the file")
    suffix = file_type(path.name)
    if suffix not in SUPPORTED_SUFFIXES:
        raise Unsupported(
            f"unsupported file type {suffix}" if suffix else "unsupported file type (no suffix)"
        )
    check_size(walked, max_bytes)
    data = open_walked(path, walked, linked, inside, max_bytes)
    stem = PurePath(source).stem
    if suffix == ".pdf":
        return read_pdf(data, source, stem)
    if suffix == ".docx":
        return read_docx(data, source, stem)
    text = decode_text(data)
    if suffix in CODE_LANGUAGES:
        return read_code(text, source, suffix)
    return _TEXT_READERS.get(suffix, read_text)(text, source, stem)


def read_document(path: Path, root: Path, max_bytes: int) -> Document:
    """Read one file into a ``Document``.

    Args:
        path: the file.
        root: the folder being pushed; ``Document.source`` is ``path`` relative to it.
        max_bytes: files larger than this are refused (``max_file_bytes``).

    Returns:
        The document.

    Raises:
        InputError: ``"<source>: <reason>"`` for a file that is binary, not UTF-8, empty, too
            large, of an unsupported type, unreadable or malformed.
    """
    path, root = Path(path), Path(root)
    source = _source(path, root)
    try:
        try:
            info, target = walk_entry(path)
        except OSError as exc:
            raise Rejected(os_reason(exc, path)) from None
        return _read(path, source, max_bytes, info, linked=target is not None)
    except Rejected as exc:
        raise InputError(f"{printable_name(source)}: {exc.reason}") from None


def iter_documents(
    root: Path, max_bytes: int, *, follow_symlinks: bool = False
) -> Iterator[Document | Skipped]:
    """Read every file under ``root`` in sorted path order.

    Hidden files and folders (names starting with ``.``) are passed over silently; every other
    file yields either a ``Document`` or a ``Skipped`` — unsupported types (``ignored``: no
    failure), unreadable, oversized and malformed files included.

    Symbolic links (to files or folders) whose target lies outside ``root`` are skipped with
    ``OUTSIDE_REASON`` unless ``follow_symlinks``; broken links and links that loop are skipped
    too. Links that stay inside ``root`` never make a file count twice: a link to a file or
    folder the walk reads anyway (under its own, visible path; for a file, one with a supported
    suffix) is skipped, naming that path, and a file reached through several links is read
    once, under the first link in path order. A link to a hidden file or folder inside ``root``
    is read under the link's name.

    Args:
        root: the folder to read.
        max_bytes: files larger than this are skipped.
        follow_symlinks: follow links to targets outside ``root`` too (setting
            ``follow_symlinks``).

    Yields:
        ``Document`` or ``Skipped``, one per file (or per unreadable or skipped folder).

    Raises:
        InputError: only when ``root`` itself is not a readable folder.

    Example::

        # kb/shared.md -> /etc/passwd.md
        list(iter_documents(Path("kb"), 10_000_000))
        # [Skipped("shared.md", OUTSIDE_REASON)]
        list(iter_documents(Path("kb"), 10_000_000, follow_symlinks=True))
        # [Document(source="shared.md", ...)]
    """
    root = Path(root)
    walk = _Walk(root, require_folder(root), follow_symlinks)
    inside = None if follow_symlinks else walk.real_root
    for path in walk.paths():
        source = _source(path, root)
        try:
            info, target = walk_entry(path)
        except OSError as exc:
            yield Skipped(printable_name(source), os_reason(exc, path))
            continue
        reason = walk.refusal(path, source, info, target)
        if reason is not None:
            yield Skipped(printable_name(source), reason)
        elif not stat.S_ISDIR(info.st_mode):  # a folder the walk reads is entered by refusal()
            yield _read_or_skip(path, source, max_bytes, info, target is not None, inside)


def require_folder(root: Path) -> os.stat_result:
    """The pushed folder's ``stat``: the one check of a documents folder (push, eval --docs).

    Raises:
        ConfigError: ``root`` is not a readable folder (a bad argument, exit code 2).
    """
    try:
        root_info = root.stat()
    except FileNotFoundError:
        root_info = None
    except OSError as exc:
        raise ConfigError(f"cannot read folder {root}: {exc.strerror or exc}") from None
    if root_info is None or not stat.S_ISDIR(root_info.st_mode):
        raise ConfigError(f"{root} is not a folder; `loader push` takes a folder of documents")
    return root_info


def _read_or_skip(
    path: Path,
    source: str,
    max_bytes: int,
    walked: os.stat_result,
    linked: bool,
    inside: Path | None,
) -> Document | Skipped:
    """Read one file (as ``_read``); any failure becomes a ``Skipped`` with its reason."""
    try:
        return _read(path, source, max_bytes, walked, linked, inside)
    except Rejected as exc:
        ignored = isinstance(exc, Unsupported)
        log.debug(
            "%s %s: %s", "ignored" if ignored else "skipped", printable_name(source), exc.reason
        )
        return Skipped(printable_name(source), exc.reason, ignored=ignored)
    except Exception as exc:  # one odd file must not stop the other thousand
        # The push names the file and the reason in one line; the traceback is for --debug.
        log.debug("unexpected error reading %s", printable_name(source), exc_info=True)
        return Skipped(printable_name(source), f"unexpected error: {type(exc).__name__}: {exc}")


class _Walk:
    """A depth-first walk of the pushed folder, and its decisions about symbolic links: what it
    has read so far, so that nothing is read twice and loops end."""

    def __init__(self, root: Path, root_info: os.stat_result, follow_symlinks: bool) -> None:
        root_id = (root_info.st_dev, root_info.st_ino)
        self.real_root = root.resolve()
        self.follow_symlinks = follow_symlinks
        self.seen = {root_id}  # every folder read so far
        self.ancestors = [root_id]  # folders on the current path, to tell loops from revisits
        self.linked_files: dict[tuple[int, int], str] = {}  # files read through a link -> link
        self.stack = [iter(_children(root))]

    def paths(self) -> Iterator[Path]:
        """Every visible entry of the folders entered so far, in sorted path order."""
        while self.stack:
            path = next(self.stack[-1], None)
            if path is None:
                self.stack.pop()
                self.ancestors.pop()
                continue
            yield path

    def refusal(
        self, path: Path, source: str, info: os.stat_result, target: Path | None
    ) -> str | None:
        """Why the entry is not read, or None. A folder to read is entered. ``info`` and
        ``target`` are ``_entry``'s: the link's resolved target, or None for no link."""
        if (
            target is not None
            and not self.follow_symlinks
            and not target.is_relative_to(self.real_root)
        ):
            log.debug("skipped %s: link to %s", source, target)
            return OUTSIDE_REASON
        if stat.S_ISDIR(info.st_mode):
            return self.enter(path, info, target)
        if target is not None:
            return self.file_link_refusal(source, info, target)
        return None

    def enter(self, path: Path, info: os.stat_result, target: Path | None) -> str | None:
        """Enter a folder, unless it loops or is (or will be) read under another path."""
        folder_id = (info.st_dev, info.st_ino)
        if folder_id in self.ancestors:
            return "symlink loop"
        if target is not None and (folder_id in self.seen or _walked(target, self.real_root)):
            # Read once, under its real path: the same documents twice would be duplicates.
            return "symlink to a folder that is read under another path"
        try:
            children = _children(path)
        except OSError as exc:
            return os_reason(exc, path)
        self.seen.add(folder_id)
        self.ancestors.append(folder_id)
        self.stack.append(iter(children))
        return None

    def file_link_refusal(self, source: str, info: os.stat_result, target: Path) -> str | None:
        """Why a link to a file is not read: its target is read under its own path, or through
        an earlier link. None: read it (and remember it)."""
        if _walked(target, self.real_root) and file_type(target.name) in SUPPORTED_SUFFIXES:
            real = _source(target, self.real_root)
            return f"symlink to {real}, which is read under its own path"
        file_id = (info.st_dev, info.st_ino)
        if file_id in self.linked_files:
            first = self.linked_files[file_id]
            return f"symlink to the same file as {first}, which is read"
        self.linked_files[file_id] = source
        return None


def _walked(target: Path, real_root: Path) -> bool:
    """Whether the walk of ``real_root`` reaches ``target`` (resolved) under its own path: inside
    the root, and no part of the path hidden."""
    if not target.is_relative_to(real_root):
        return False
    return not any(part.startswith(".") for part in target.relative_to(real_root).parts)


def _children(folder: Path) -> list[Path]:
    """The visible entries of a folder, sorted by name."""
    with os.scandir(folder) as entries:
        names = sorted(entry.name for entry in entries if not entry.name.startswith("."))
    return [folder / name for name in names]
