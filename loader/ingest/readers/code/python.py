"""Python source through the standard library's ``ast``: classes, functions and methods.

Functions nested inside functions stay part of their function; classes nested in classes are
members like methods. A definition starts at its first decorator, or at the comment lines right
above it.
"""

from __future__ import annotations

import ast
import textwrap

from loader.ingest.readers.code import Definition, Parsed, Unparsable

_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _first_line(node: ast.stmt) -> int:
    """0-based first line of a statement, its decorators included."""
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno, *(decorator.lineno for decorator in decorators)]) - 1


def _with_comments_above(lines: list[str], start: int, floor: int) -> int:
    """Move ``start`` up over the comment lines right above it (not above ``floor``)."""
    while start > floor and lines[start - 1].lstrip().startswith("#"):
        start -= 1
    return start


def _signature(lines: list[str], node: ast.stmt) -> str:
    """Decorators and the ``def``/``class`` line(s) up to the body, ending in ``...``."""
    body_line = node.body[0].lineno - 1
    header_end = max(node.lineno, body_line)  # a one-line "def f(): return 1" is its own stub
    header = textwrap.dedent("\n".join(lines[_first_line(node) : header_end])).rstrip()
    return header if header_end == node.lineno and body_line < node.lineno else f"{header} ..."


def _definition(lines: list[str], node: ast.stmt, floor: int) -> Definition:
    start = _with_comments_above(lines, _first_line(node), floor)
    members: list[Definition] = []
    if isinstance(node, ast.ClassDef):
        previous = node.lineno  # members' comments may not reach above the class line
        for child in node.body:
            if isinstance(child, _DEFINITIONS):
                members.append(_definition(lines, child, previous))
            previous = child.end_lineno or child.lineno
    return Definition(
        name=node.name,
        start=start,
        end=node.end_lineno or node.lineno,
        signature=_signature(lines, node),
        members=tuple(members),
    )


def parse_python(text: str, language: str = "python") -> Parsed:
    """Definitions and statement starts of a Python module.

    Raises:
        Unparsable: "Python syntax error on line N: ..." (this Python's grammar).
    """
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise Unparsable(f"Python syntax error on line {exc.lineno}: {exc.msg}") from None
    except ValueError as exc:  # null bytes and the like
        raise Unparsable(f"not Python source: {exc}") from None
    lines = text.split("\n")
    definitions = []
    previous = 0
    for node in tree.body:
        if isinstance(node, _DEFINITIONS):
            definitions.append(_definition(lines, node, previous))
        previous = node.end_lineno or node.lineno
    starts = {
        _with_comments_above(lines, _first_line(node), 0)
        for node in ast.walk(tree)
        if isinstance(node, ast.stmt)
    }
    return Parsed(definitions, starts)
