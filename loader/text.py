"""Text no UTF-8 can carry: lone surrogates.

A surrogate code point in a Python string is always unpaired (a valid pair decodes to one code
point), so no UTF-8 encoding can carry it: not an id's hash, a JSON request, an index or a
terminal. It reaches the program through names and values the operating system decodes with
``surrogateescape`` (a Latin-1 file or folder name, a command-line argument, an environment
variable) and through escapes formats decode (a notebook's JSON ``"\\udc9f"``, a reStructuredText
``unicode::`` substitution, a request body). Each is refused where it enters, naming it.

Example::

    first_surrogate("caf\\udce9")       # '\\udce9'
    require_unicode("tenant", "acme")   # 'acme'
    check_document(document)            # InputError naming where a surrogate is, if any
"""

from __future__ import annotations

import re
from typing import Any

from loader.documents import Document
from loader.errors import ConfigError, InputError

_SURROGATE = re.compile("[\ud800-\udfff]")


def first_surrogate(value: Any) -> str | None:
    """The first surrogate in a string, or in the strings of a list, tuple or mapping (keys
    included), or None."""
    if isinstance(value, str):
        match = _SURROGATE.search(value)
        return match.group() if match else None
    if isinstance(value, dict):
        value = list(value.items())
    if isinstance(value, list | tuple):
        return next((found for item in value if (found := first_surrogate(item))), None)
    return None


def replace_surrogates(value: str) -> str:
    """``value`` with each lone surrogate replaced by U+FFFD: for text read back from the
    cluster that was stored before it was refused where it enters (an information need or a
    note an older version kept), which would otherwise fail every page and export it is on."""
    return _SURROGATE.sub("\ufffd", value)


def require_unicode(name: str, value: str, fix: str = "") -> str:
    """``value``, refused when it holds a lone surrogate.

    Raises:
        ConfigError: naming ``name``, showing the value escaped (``t\\udce9``), then ``fix``.
    """
    char = first_surrogate(value)
    if char is not None:
        shown = value.encode("utf-8", "backslashreplace").decode("utf-8")
        raise ConfigError(
            f"{name} '{shown}' is not valid UTF-8 text (it holds the lone surrogate "
            f"U+{ord(char):04X}, an undecodable byte or a broken escape)"
            + (f"; {fix}" if fix else "")
        )
    return value


def check_document(document: Document) -> None:
    """Refuse a document holding a lone surrogate: a file decoded as UTF-8 cannot, but text a
    format escapes can (a notebook's JSON ``"\\udc9f"``, a reStructuredText ``unicode::``
    substitution, a PDF's broken character map, a BEIR corpus line).

    Raises:
        InputError: naming the code point and where it is (source, title, heading, text or a
            metadata key).
    """
    places = [("its source", document.source), ("title", document.title)]
    for section in document.sections:
        places += [("a heading", heading) for heading in section.heading_path]
        places += [("the text", block.text) for block in section.blocks]
    places += [(f"metadata {key!r}", [key, value]) for key, value in document.metadata.items()]
    for place, value in places:
        char = first_surrogate(value)
        if char is not None:
            code = ord(char)
            raise InputError(
                f"not valid Unicode: {place} holds the lone surrogate U+{code:04X} (half of a "
                f"UTF-16 pair, written as an escape like \\u{code:04x}); remove it"
            )
