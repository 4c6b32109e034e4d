"""The HTTP front end is a top floor: nothing in ``loader`` but the CLI imports ``loader.serve``."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[3] / "loader"


def _imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_only_the_cli_imports_the_http_front_end():
    below = [
        path
        for path in PACKAGE.rglob("*.py")
        if path.relative_to(PACKAGE).parts[0] not in ("serve", "cli")
    ]
    assert len(below) > 50
    offenders = {
        str(path.relative_to(PACKAGE)): sorted(
            name for name in _imported(path) if name.startswith("loader.serve")
        )
        for path in below
    }
    assert {path: names for path, names in offenders.items() if names} == {}
