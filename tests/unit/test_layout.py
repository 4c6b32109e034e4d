"""guide/layout.md stays true (issue #45): it names every module of loader/, the imports keep to
the floors its ``text`` block states (read from the page, so the page is the one place they are
written), and no module is longer than the page says."""

from __future__ import annotations

import re

from tests.paths import REPO
from tests.unit.imports import PACKAGE, imports_of, modules

LAYOUT = REPO / "guide" / "layout.md"
FLOORS_HEADING = "## What may import what"
LINE_LIMIT = re.compile(r"No module is over (\d+) lines but `([\w./]+)`")


def _blocks(text: str) -> list[tuple[str, list[str]]]:
    """The page's fenced blocks: (language, lines)."""
    blocks, current, language = [], None, ""
    for line in text.splitlines():
        if line.startswith("```"):
            if current is None:
                current, language = [], line[3:].strip()
            else:
                blocks.append((language, current))
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def tree_entries(text: str) -> dict[str, str]:
    """The entries under ``loader/`` of the page's tree (its first block): the name an entry
    starts with (``index/``, ``settings.py``) -> the entry's whole text."""
    lines = _blocks(text)[0][1]
    start = lines.index("loader/") + 1
    entries: dict[str, str] = {}
    key = None
    for line in lines[start:]:
        if not line.startswith(" "):
            break
        if re.match(r"^  \S", line):
            key = line.split()[0]
            entries[key] = ""
        entries[key] += " " + line.strip()
    return entries


def floors(text: str) -> dict[str, set[str]]:
    """The floors block: floor -> the floors it may import."""
    after = text.split(FLOORS_HEADING, 1)[1]
    (lines,) = [lines for language, lines in _blocks(after) if language == "text"][:1]
    rules = {}
    for line in lines:
        name, _, allowed = line.partition(":")
        rules[name.strip()] = {part.strip() for part in allowed.split(",") if part.strip()}
    return rules


def floor_of(module: str) -> str:
    """``loader.index.plan`` -> ``index``; ``loader.settings`` -> ``root``; the package's own
    ``__init__`` and ``__main__`` are floors of their own."""
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    path = modules()[module]
    if path.parent == PACKAGE and path.name != "__init__.py":
        return parts[1] if parts[1] == "__main__" else "root"
    return parts[1]


def _named(entry: str, file_name: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(file_name)}(?!\w)", entry) is not None


def missing_from_the_tree(text: str) -> list[str]:
    """The modules of loader/ the page's tree does not name where they live."""
    entries = tree_entries(text)
    root_text = " ".join(entry for key, entry in entries.items() if not key.endswith("/"))
    missing = []
    for path in modules().values():
        relative = path.relative_to(PACKAGE)
        if len(relative.parts) == 1:
            found = _named(root_text, relative.name)
        else:
            entry = entries.get(f"{relative.parts[0]}/", "")
            if relative.name == "__init__.py":  # the package: its folder named
                found = bool(entry) and (
                    len(relative.parts) == 2 or _named(entry, f"{relative.parts[-2]}/")
                )
            else:
                found = _named(entry, relative.name)
        if not found:
            missing.append(relative.as_posix())
    return missing


def floor_breaks(text: str) -> list[str]:
    """Imports between modules whose floors the page's block does not allow."""
    rules = floors(text)
    breaks = []
    for module in modules():
        floor = floor_of(module)
        if floor not in rules:
            breaks.append(f"{module}: floor {floor!r} has no line in the block")
            continue
        for target in sorted(imports_of(module)):
            other = floor_of(target)
            if other != floor and other not in rules[floor]:
                breaks.append(f"{module} imports {target} ({floor} may not import {other})")
    return breaks


def test_the_layout_names_every_module():
    missing = missing_from_the_tree(LAYOUT.read_text(encoding="utf-8"))
    assert not missing, f"guide/layout.md does not name: {', '.join(missing)}"


def test_imports_keep_to_the_floors_the_layout_states():
    breaks = floor_breaks(LAYOUT.read_text(encoding="utf-8"))
    assert not breaks, "\n".join(breaks)


def test_no_module_is_longer_than_the_layout_says():
    limit, exception = LINE_LIMIT.search(LAYOUT.read_text(encoding="utf-8")).groups()
    longer = {
        path.relative_to(PACKAGE).as_posix(): lines
        for path in modules().values()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > int(limit)
    }
    longer.pop(exception, None)
    assert not longer, f"over {limit} lines: {longer}"


def test_the_checks_catch_a_module_left_out_and_a_floor_broken():
    text = LAYOUT.read_text(encoding="utf-8")
    assert "index/copy_check.py" in missing_from_the_tree(text.replace("copy_check.py", "x"))
    assert "ingest/readers/code/__init__.py" in missing_from_the_tree(
        text.replace("code/ python.py", "python.py")
    )
    lowered = text.replace("query:         root, cluster, models, index", "query: root")
    assert any(line.startswith("loader.query.search imports") for line in floor_breaks(lowered))
