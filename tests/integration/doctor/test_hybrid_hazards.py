"""The hybrid query's hazards on the real node (OpenSearch 3.6, issue #44): what
``search_type=dfs_query_then_fetch`` does to a hybrid search on two shards, that loader's
template calls refuse it, and `loader doctor`'s warnings for a stored pipeline that sets it and a
mapping with a nested field (the DLS half of the check is tested on a recorded roles answer in
tests/unit/doctor/test_hybrid.py: this node has no security plugin)."""

from __future__ import annotations

import pytest

from loader.doctor.checks import run_doctor
from loader.errors import ConfigError
from loader.index.apply import apply_config
from loader.index.render import config_names
from loader.index.search_params import search_template_params, template_url_params
from loader.ingest.sync import push

DOCS = {
    f"note{number}.md": f"---\ntenant: A\n---\n# Note {number}\n\n## Refunds\n\n"
    f"Refund rule {number}: late orders are refunded within {number + 2} days.\n"
    for number in range(12)
}
DFS = "dfs_query_then_fetch"


@pytest.fixture
def settings(client, base_settings, unique_name, embedder, tmp_path):
    settings = base_settings.replace(index_name=unique_name, number_of_shards=2)
    apply_config(settings, dimension=embedder.dimension, client=client)
    folder = tmp_path / "kb"
    folder.mkdir()
    for name, text in DOCS.items():
        (folder / name).write_text(text, encoding="utf-8")
    assert push(folder, settings, client=client, embedder=embedder).failed == 0
    client.indices.refresh(index=settings.index_name)
    return settings


def _checks(settings, client, embedder) -> dict:
    report = run_doctor(settings, client=client, dimension=embedder.dimension)
    return {check.name: check for check in report.checks}


def test_dfs_returns_unfused_hybrid_results_on_two_shards_and_loader_refuses_it(
    settings, client, embedder
):
    names = config_names(settings.index_name)
    template, pipeline = names.for_search_mode("hybrid-rrf")
    question = "how fast are late orders refunded"
    params = search_template_params(
        "A", query_text=question, query_vector=embedder.embed_queries([question])[0], depth=10
    )

    def scores(url_params: dict) -> list[float]:
        answer = client.search_template(
            index=settings.index_name,
            body={"id": template, "params": params},
            params=url_params,
        )
        return [float(hit["_score"]) for hit in answer["hits"]["hits"]]

    fused = scores(template_url_params(pipeline))
    assert fused and all(0 < score <= 2 / 61 for score in fused), fused  # RRF, rank constant 60
    # The hazard the refusal is for, on this server: the pipeline's fusion skipped.
    raw = scores({"search_pipeline": pipeline, "search_type": DFS})
    # The hybrid query's raw answer: its sub-query delimiters (scores like -9549512000.0) and
    # each sub-query's own scores, none fused.
    assert any(score < 0 for score in raw) and not set(raw) & set(fused), raw
    with pytest.raises(ConfigError, match="search_type dfs_query_then_fetch is refused"):
        template_url_params(pipeline, search_type=DFS)


def test_doctor_is_quiet_on_a_fresh_apply(settings, client, embedder):
    checks = _checks(settings, client, embedder)
    assert checks["hybrid search type"].status == "ok", checks["hybrid search type"].line()
    assert checks["hybrid sub-query scores"].status == "ok", checks["hybrid sub-query scores"]


def test_doctor_warns_of_a_stored_pipeline_that_sets_dfs(settings, client, embedder):
    pipeline = config_names(settings.index_name).object_name("rrf")
    body = client.transport.perform_request("GET", f"/_search/pipeline/{pipeline}")[pipeline]
    body["request_processors"] = [
        *(body.get("request_processors") or []),
        {"script": {"source": f"ctx.search_type = '{DFS}'"}},
    ]
    client.transport.perform_request("PUT", f"/_search/pipeline/{pipeline}", body=body)
    check = _checks(settings, client, embedder)["hybrid search type"]
    assert check.status == "warn"
    assert check.detail.startswith(f"{pipeline} (stored) set {DFS}: "), check.detail


def test_doctor_warns_of_a_nested_field(settings, client, embedder):
    index = next(iter(client.indices.get_alias(name=settings.index_name)))
    client.indices.put_mapping(
        index=index,
        body={
            "properties": {"reviews": {"type": "nested", "properties": {"by": {"type": "keyword"}}}}
        },
    )
    check = _checks(settings, client, embedder)["hybrid sub-query scores"]
    assert check.status == "warn"
    assert check.detail.startswith("the mapping has nested fields (reviews): "), check.detail
