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
    "loader.cluster.local:start_local": "not narrowed yet (reads local_port, opensearch_image)",
    "loader.doctor.checks:_vector_checks": "a doctor check: all are called alike",
    "loader.eval.configs:_model_text_tokens": "not narrowed yet (reads embedding_model)",
    "loader.eval.configs:check_values": "validates by building Settings (replace)",
    "loader.eval.configs:config_settings": "resolves settings: returns a derived Settings",
    "loader.eval.configs:parse_sweep": "passes it on as `base or Settings()` to check_values",
    "loader.eval.configs:rerank_caption": "not narrowed: its caller runner.py is at the line limit",
    "loader.eval.judgments:export": "not narrowed yet (reads index_name)",
    "loader.eval.judgments:store_imported": "not narrowed yet (reads index_name)",
    "loader.eval.runner:_new_report": "the report records every public setting",
    "loader.index.render:render_file": "not narrowed yet (reads index_name)",
    "loader.ingest.plan:__init__": "not narrowed yet (reads tenant)",
    "loader.integrations.core:__init__": "documented entry point: the retrievers' core",
    "loader.models.rerank.check:choose_reranker": "the documented rerank choice, given the "
    "settings by search, eval, explain, serve and the retrievers",
    "loader.models.embedding:int8_cpu_warning": "not narrowed yet (reads embedding_model)",
    "loader.query.retrieve:_lookup_answers": "not narrowed yet (reads opensearch_url)",
    "loader.query.retrieve:ranked_hits": "not narrowed yet (reads rrf_rank_constant)",
    "loader.query.retrieve:template_calls": "not narrowed yet (reads index_name)",
    "loader.resolve:resolve_tenant": "resolves the tenant default: the one place",
    "loader.settings:_basic_auth_tokens": "the settings registry's own credentials",
    "loader.settings:rewrite_api_key": "the registry resolves the key: value or file",
    "loader.train.adapt:keep": "not narrowed yet (reads embedding_model, index_name)",
    "loader.train.learn:_provenance": "not narrowed yet (reads chunk_strategy, embedding_model)",
    "loader.train.sources:_beir_source": "not narrowed yet (reads chunk_strategy)",
    "loader.train.sources:_questions_source": "not narrowed yet (reads index_name)",
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
    """The fields read as ``name.field``, and whether ``name`` itself goes into a call."""
    fields, passed = set(), False
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name):
            if sub.value.id == name:
                fields.add(sub.attr)
        elif isinstance(sub, ast.Call):
            values = [*sub.args, *(keyword.value for keyword in sub.keywords)]
            values += [v.value for v in values if isinstance(v, ast.Starred)]
            passed |= any(isinstance(v, ast.Name) and v.id == name for v in values)
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
"""
    narrow, passes = ast.parse(source).body
    assert _use(narrow, *_settings_params(narrow)) == ({"index_name"}, False)
    assert _use(passes, *_settings_params(passes)) == (set(), True)
