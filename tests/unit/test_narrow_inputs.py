"""A function below the CLI takes the few values it uses, not the whole ``Settings`` (issue #45).

A function of loader/ (outside cli/) with a parameter annotated ``Settings`` that reads three or
fewer of its fields and passes it on to no call fails here unless the allow-list below names it
with the reason it keeps the whole object; an entry that no longer fits fails too, so the list
stays true.
"""

from __future__ import annotations

import ast
from pathlib import Path

LOADER = Path(__file__).resolve().parents[2] / "loader"
MOST_FIELDS = 3

# "module:function" -> why it takes the whole Settings.
ALLOWED = {
    "loader.doctor.checks:_int8_check": "a doctor check: all are called alike",
    "loader.doctor.checks:_vector_checks": "a doctor check: all are called alike",
    "loader.eval.configs:check_values": "validates by building Settings (replace)",
    "loader.eval.configs:config_settings": "resolves settings: returns a derived Settings",
    "loader.eval.configs:parse_sweep": "passes it on as `base or Settings()` to check_values",
    "loader.eval.runner:_new_report": "the report records every public setting",
    "loader.integrations.core:__init__": "keeps it for every search (`self.settings = "
    "settings if settings is not None else ...`)",
    "loader.models.rerank.check:choose_reranker": "the documented rerank choice, given the "
    "settings by search, eval, explain, serve and the retrievers",
    "loader.resolve:resolve_tenant": "resolves the tenant default: the one place",
    "loader.settings:_basic_auth_tokens": "the settings registry's own credentials",
    "loader.settings:rewrite_api_key": "the registry resolves the key: value or file",
}


def _settings_params(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    args = node.args
    return [
        arg.arg
        for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs)
        if arg.annotation is not None
        and ast.unparse(arg.annotation).strip("'\"") in ("Settings", "Settings | None")
    ]


def _use(node: ast.AST, name: str) -> tuple[set[str], bool]:
    """The fields read as ``name.field``, and whether ``name`` itself goes into a call, a dict
    (a template's context: the template reads what fields it likes) or an attribute (an object
    keeping it for its methods)."""
    fields, passed = set(), False
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name):
            if sub.value.id == name:
                fields.add(sub.attr)
        elif isinstance(sub, ast.Call):
            values = [*sub.args, *(keyword.value for keyword in sub.keywords)]
            values += [v.value for v in values if isinstance(v, ast.Starred)]
            passed |= any(isinstance(v, ast.Name) and v.id == name for v in values)
        elif isinstance(sub, ast.Dict):
            passed |= any(isinstance(v, ast.Name) and v.id == name for v in sub.values)
        elif isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Name):
            passed |= sub.value.id == name and isinstance(sub.targets[0], ast.Attribute)
    return fields, passed


def narrow_candidates() -> dict[str, set[str]]:
    """``module:function`` -> the fields it reads, for each one that would do with them alone."""
    found = {}
    for path in sorted(LOADER.rglob("*.py")):
        if path.relative_to(LOADER).parts[0] == "cli":
            continue
        module = ".".join(path.relative_to(LOADER.parent).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for name in _settings_params(node):
                fields, passed = _use(node, name)
                if len(fields) <= MOST_FIELDS and not passed:
                    found[f"{module}:{node.name}"] = fields
    return found


def test_functions_below_the_cli_take_the_values_they_read_not_settings():
    found = narrow_candidates()
    unexplained = {key: sorted(fields) for key, fields in found.items() if key not in ALLOWED}
    assert not unexplained, (
        "take these values as parameters instead of Settings (or allow-list with a reason): "
        + "; ".join(f"{key} reads {fields}" for key, fields in sorted(unexplained.items()))
    )


def test_every_allow_list_entry_is_still_needed():
    stale = sorted(set(ALLOWED) - set(narrow_candidates()))
    assert not stale, f"no longer take the whole Settings for a few fields: {stale}"


def test_the_reading_sees_a_narrow_function_and_a_passed_on_settings():
    source = """
def narrow(settings: Settings) -> str:
    return settings.index_name
def passes(settings: "Settings") -> None:
    helper(x=settings)
def renders(settings: Settings | None) -> str:
    return template.render(**{"settings": settings})
def keeps(self, settings: Settings) -> None:
    self.settings = settings
"""
    narrow, passes, renders, keeps = ast.parse(source).body
    assert _use(narrow, *_settings_params(narrow)) == ({"index_name"}, False)
    assert _use(passes, *_settings_params(passes)) == (set(), True)
    assert _use(renders, *_settings_params(renders)) == (set(), True)
    assert _use(keeps, *_settings_params(keeps)) == (set(), True)
