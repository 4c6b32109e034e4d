"""The house's measures (issue #45's table): how big the package is, where it is too long, how
its modules lean on each other and on ``Settings``, and how often the CLI declares its shared
options. Read from the source with ``ast``; nothing is imported or run.

    python3 benchmarks/house_measures.py            # a table
    python3 benchmarks/house_measures.py --json     # the same figures as JSON

The circle count is the import-circle test's own reading (``tests/unit/imports.py``), so the two
cannot disagree. ``duplicates`` and ``.ci/run`` times are measured apart (see the closing notes).
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.unit.imports import modules, two_module_circles  # noqa: E402

PACKAGE = REPO / "loader"
LONG_MODULE = 450
LONG_FUNCTION = 60


def _trees() -> dict[Path, ast.Module]:
    return {path: ast.parse(path.read_text(encoding="utf-8")) for path in modules().values()}


def _functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _code_lines(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The lines from the first statement after the docstring to the end."""
    body = (
        function.body[1:]
        if ast.get_docstring(function) and len(function.body) > 1
        else function.body
    )
    return function.end_lineno - body[0].lineno + 1


def _names_settings(annotation: ast.expr | None) -> bool:
    return annotation is not None and "Settings" in ast.unparse(annotation).strip("'\"").split(" ")


def _option_declarations(trees: dict[Path, ast.Module], flag: str) -> int:
    """Calls of ``click.option(flag, ...)`` in loader/cli: how often the option is declared."""
    count = 0
    for path, tree in trees.items():
        if "cli" not in path.relative_to(PACKAGE).parts[:1]:
            continue
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and ast.unparse(node.func) == "click.option"
                and any(isinstance(a, ast.Constant) and a.value == flag for a in node.args)
            ):
                count += 1
    return count


def measure() -> dict[str, object]:
    trees = _trees()
    lines = {path: len(path.read_text(encoding="utf-8").splitlines()) for path in trees}
    long_modules = {
        str(path.relative_to(REPO)): n for path, n in sorted(lines.items()) if n > LONG_MODULE
    }
    spans = [
        (node.end_lineno - node.lineno + 1, f"{path.relative_to(REPO)}:{node.name}")
        for path, tree in trees.items()
        for node in _functions(tree)
    ]
    long_functions = sorted((span for span in spans if span[0] > LONG_FUNCTION), reverse=True)
    code_spans = [
        (_code_lines(node), f"{path.relative_to(REPO)}:{node.name}")
        for path, tree in trees.items()
        for node in _functions(tree)
    ]
    inner_imports = len(  # a set: an import in a nested function is one import, not two
        {
            id(sub)
            for tree in trees.values()
            for function in _functions(tree)
            for sub in ast.walk(function)
            if isinstance(sub, (ast.Import, ast.ImportFrom))
        }
    )
    settings_typed = sum(
        _names_settings(arg.annotation)
        for tree in trees.values()
        for function in _functions(tree)
        for arg in (*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs)
    ) + sum(
        _names_settings(node.annotation)
        for tree in trees.values()
        for node in ast.walk(tree)
        if isinstance(node, ast.AnnAssign)
    )
    return {
        "modules": len(trees),
        "lines": sum(lines.values()),
        "modules_over_450_lines": long_modules,
        "functions_over_60_lines": len(long_functions),
        "longest_function": {"lines": max(spans)[0], "name": max(spans)[1]},
        "functions_over_60_lines_past_the_docstring": sum(n > LONG_FUNCTION for n, _ in code_spans),
        "longest_past_the_docstring": {"lines": max(code_spans)[0], "name": max(code_spans)[1]},
        "two_module_import_circles": [list(pair) for pair in two_module_circles()],
        "imports_inside_functions": inner_imports,
        "parameters_and_fields_typed_settings": settings_typed,
        "tenant_option_declared": _option_declarations(trees, "--tenant"),
        "json_option_declared": _option_declarations(trees, "--json"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    figures = measure()
    if parser.parse_args().json:
        print(json.dumps(figures, indent=2))
        return
    for name, value in figures.items():
        print(f"{name:44} {value}")


if __name__ == "__main__":
    main()
