"""Text made safe to print on one terminal line.

File names, headings and settings come from users (or from whoever wrote the files): a file named
``forged\\nfailed ok.md: everything lost.exe`` must not print as two report lines, and a
right-to-left override must not make ``exe.md`` look like ``dm.exe``. The CLI passes every line it
prints through ``printable``; JSON output needs nothing (``json.dumps`` escapes on its own).

Example::

    >>> printable("forged\\nfailed ok.md")
    'forged\\\\nfailed ok.md'
    >>> printable("r\\u202egnp.exe")
    'r\\\\u202egnp.exe'
"""

from __future__ import annotations

import re
import sys
from typing import TextIO

__all__ = ["printable", "printable_lines", "show_progress"]

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

# C0 controls (tab included: it can hide text), DEL, C1 controls, the Unicode line and paragraph
# separators, every bidirectional control (the embeddings and overrides U+202A-U+202E, the isolates
# U+2066-U+2069, and the marks U+200E, U+200F, U+061C, which reorder the text around them on a
# terminal that applies the bidi algorithm), and lone surrogates (a file name's undecodable bytes,
# a JSON escape), which no terminal encoding can print.
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control character escaped, so it prints as exactly one line.

    ``\\n``, ``\\r`` and ``\\t`` become those two-character escapes; other C0 and C1 controls
    and DEL become ``\\xNN``; U+2028, U+2029, the bidi controls (U+202A–U+202E,
    U+2066–U+2069, U+200E, U+200F, U+061C) and lone surrogates become ``\\uNNNN``.
    Everything else, backslashes and non-ASCII letters included, is left as it is.

    Args:
        text: anything that is about to be printed.

    Returns:
        The text, safe for one terminal line.
    """
    return _UNSAFE.sub(_escape, text)


def printable_lines(text: str) -> str:
    """A multi-line block (a table, a report) with each of its ``\\n``-separated lines made
    ``printable``: the line breaks the program meant stay, any others are escaped."""
    return "\n".join(printable(line) for line in text.split("\n"))


def show_progress(quiet: bool, as_json: bool, stream: TextIO | None = None) -> bool:
    """Whether a long command prints its progress lines on ``stream`` (stderr by default).

    ``--json`` keeps stdout for the document, not stderr: on a terminal someone is watching, so
    progress shows whatever ``--json`` says (`loader adapt --json` once printed nothing for 37
    minutes). Without a terminal, ``--json`` means a script reads the output, and progress
    would only fill its logs. ``--quiet`` always silences it.

    >>> import io
    >>> show_progress(False, True, io.StringIO()), show_progress(False, False, io.StringIO())
    (False, True)
    """
    if quiet:
        return False
    if not as_json:
        return True
    stream = sys.stderr if stream is None else stream
    return stream is not None and stream.isatty()
