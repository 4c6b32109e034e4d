"""Setting values written into ``loader.toml`` line by line, so its comments and layout stay.

``tomllib`` only reads TOML; rather than add a style-preserving TOML library for a flat file of
scalar settings, a setting's line (``name = value  # comment``) gets its value replaced in place,
and a setting the file lacks is added before the first table (the file's top-level keys end
there).

Example::

    edit_toml('candidates = 50  # deep\\n', {"candidates": 100})   # 'candidates = 100  # deep\\n'
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from typing import Any

from loader.errors import ConfigError

_KEY_LINE = re.compile(r"^(?P<lead>\s*(?P<key>[A-Za-z0-9_-]+)\s*=\s*)(?P<rest>.*)$")
_TABLE_LINE = re.compile(r"^\s*\[")


def toml_value(value: Any) -> str:
    """A scalar as TOML: ``true``, ``100``, ``0.3``, ``"hybrid-rrf"``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a TOML basic string
    raise ConfigError(f"cannot write {value!r} into loader.toml: only strings, numbers, booleans")


def _split_value(rest: str) -> tuple[str, str]:
    """``'100  # deep'`` -> ``('100', '  # deep')``: the value and what follows it."""
    if rest.startswith(('"""', "'''")):
        raise ConfigError("a multi-line string cannot be rewritten; edit loader.toml by hand")
    if rest[:1] in ('"', "'"):
        quote, index = rest[0], 1
        while index < len(rest) and rest[index] != quote:
            index += 2 if quote == '"' and rest[index] == "\\" else 1
        end = index + 1
    else:
        end = rest.find("#") if "#" in rest else len(rest)
        while end > 0 and rest[end - 1].isspace():
            end -= 1
    return rest[:end], rest[end:]


def edit_toml(text: str, changes: Mapping[str, Any]) -> str:
    """``text`` with each setting of ``changes`` set: its top-level line rewritten in place
    (comments kept), else a new line before the first table.

    Raises:
        ConfigError: a value that is not a scalar, or a multi-line string in the way.
    """
    lines = text.splitlines(keepends=True)
    pending = dict(changes)
    first_table = len(lines)
    for number, line in enumerate(lines):
        if _TABLE_LINE.match(line):
            first_table = number
            break
        match = _KEY_LINE.match(line.rstrip("\r\n"))
        if match and match["key"] in pending:
            _value, tail = _split_value(match["rest"])
            ending = line[len(line.rstrip("\r\n")) :]
            new = toml_value(pending.pop(match["key"]))
            lines[number] = f"{match['lead']}{new}{tail}{ending}"
    added = [f"{name} = {toml_value(value)}\n" for name, value in pending.items()]
    if added and first_table and not lines[first_table - 1].endswith("\n"):
        lines[first_table - 1] += "\n"
    lines[first_table:first_table] = added
    return "".join(lines)


def toml_diff(before: str, after: str, name: str) -> list[str]:
    """The change as unified-diff lines (what ``--write`` shows before writing)."""
    return [
        line.rstrip("\n")
        for line in difflib.unified_diff(
            before.splitlines(keepends=True), after.splitlines(keepends=True), name, name
        )
    ]
