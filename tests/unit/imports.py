"""The imports between loader's modules, read from the source with ``ast`` (module-level,
function-level and ``TYPE_CHECKING`` imports alike: each says one module needs the other), for the
import-circle and layout tests."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from tests.paths import REPO

PACKAGE = REPO / "loader"


def module_name(path: Path) -> str:
    """``loader/index/plan.py`` -> ``loader.index.plan``; a package's ``__init__.py`` -> the
    package."""
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    """Every module of loader/, by dotted name."""
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imported_names(path: Path, name: str) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the package, up level - 1 packages
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            found.add(source)
            # ``from loader.index import plan`` imports the module loader.index.plan
            found.update(f"{source}.{alias.name}" for alias in node.names)
    return found


@cache
def imports_of(name: str) -> frozenset[str]:
    """The modules of loader/ that module ``name`` imports (itself left out)."""
    known = modules()
    return frozenset(
        target
        for target in _imported_names(known[name], name)
        if target in known and target != name
    )


def is_part_of(module: str, package: str) -> bool:
    """Whether ``module`` lies inside ``package`` (a package importing its own parts, and a part
    importing from its package's ``__init__``, is how a Python package is built)."""
    return module.startswith(f"{package}.")


def two_module_circles() -> list[tuple[str, str]]:
    """Pairs of modules that import each other, a package and its own parts left out."""
    circles = []
    for first in modules():
        for second in imports_of(first):
            mutual = first < second and first in imports_of(second)
            if mutual and not (is_part_of(first, second) or is_part_of(second, first)):
                circles.append((first, second))
    return sorted(circles)
