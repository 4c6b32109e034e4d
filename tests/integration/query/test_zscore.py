"""hybrid-zscore on the real node: `loader apply` stores the z-score pipeline as its file renders
it, the node refuses any other combination with z_score (why the file says arithmetic_mean),
`loader search --mode hybrid-zscore` returns fused results, and `loader explain` names each
mode's technique as stored: rrf, min_max, z_score."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from opensearchpy import RequestError

from loader.cli import cli
from loader.index.apply import apply_config
from loader.index.render import config_names, render_config
from loader.ingest.sync import push
from loader.models.readers import reader_settings
from loader.modes import read_fusion

DOCS = {
    "refunds.md": "# Refund policy\n\n## Late deliveries\n\n"
    "Orders delayed by more than 45 minutes get a full refund within five days.\n",
    "printer.md": "# Printer manual\n\n## Error codes\n\n"
    "Error E1043 means the paper tray is empty; refill it and press resume.\n",
    "password.md": "# Account help\n\n## Passwords\n\n"
    "Reset your password from the login page; the link expires after 30 minutes.\n",
}


@pytest.fixture
def settings(client, base_settings, unique_name, embedder, tmp_path):
    settings = base_settings.replace(index_name=unique_name, rerank="off")
    apply_config(settings, dimension=embedder.dimension, client=client)
    folder = tmp_path / "kb"
    folder.mkdir()
    for name, text in DOCS.items():
        (folder / name).write_text(text, encoding="utf-8")
    assert push(folder, settings, client=client, embedder=embedder).failed == 0
    return settings


def test_apply_stores_the_z_score_pipeline(settings, client, embedder):
    pipeline = config_names(settings.index_name).for_search_mode("hybrid-zscore")[1]
    assert pipeline == f"{settings.index_name}-zscore"
    stored = client.transport.perform_request("GET", f"/_search/pipeline/{pipeline}")[pipeline]
    rendered = render_config(settings, embedder.dimension).search_pipelines[pipeline]
    assert stored["phase_results_processors"] == rendered["phase_results_processors"]
    processor = stored["phase_results_processors"][0]["normalization-processor"]
    assert processor["normalization"] == {"technique": "z_score"}
    assert processor["combination"]["technique"] == "arithmetic_mean"
    shared = 1 - settings.exact_weight
    vector = (1 - settings.bm25_weight) * shared
    if reader_settings(settings) is not None:  # bge's jar here: two readers share the vector side
        share = settings.second_reader_share
        vectors = [vector * (1 - share), vector * share]
    else:
        vectors = [vector]
    assert processor["combination"]["parameters"]["weights"] == pytest.approx(
        [settings.bm25_weight * shared, *vectors, settings.exact_weight]
    )
    fusion = read_fusion(stored)
    assert (fusion.technique, fusion.mode().name) == ("z_score", "hybrid-zscore")


def test_the_node_combines_z_scores_by_arithmetic_mean_only(client, unique_name):
    body = {
        "phase_results_processors": [
            {
                "normalization-processor": {
                    "normalization": {"technique": "z_score"},
                    "combination": {"technique": "geometric_mean"},
                }
            }
        ]
    }
    with pytest.raises(RequestError, match="Supported techniques are: arithmetic_mean"):
        client.transport.perform_request("PUT", f"/_search/pipeline/{unique_name}-z", body=body)


def test_search_in_hybrid_zscore_mode_returns_fused_results(settings):
    result = CliRunner().invoke(
        cli,
        [
            "search",
            "my order came late, can I get a refund?",
            "--url",
            settings.opensearch_url,
            "--index",
            settings.index_name,
            "--tenant",
            "default",
            "--mode",
            "hybrid-zscore",
            "--no-rerank",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    answer = json.loads(result.output)
    assert answer["mode"] == "hybrid-zscore"
    hits = answer["hits"]
    assert hits[0]["source"] == "refunds.md"
    assert len({hit["chunk_id"] for hit in hits}) == len(hits) == 3  # fused: each chunk once
    assert all(hit["scores"]["retrieval"] > 0 for hit in hits)


@pytest.mark.parametrize(
    ("mode", "technique"),
    [("hybrid-rrf", "rrf"), ("hybrid-minmax", "min_max"), ("hybrid-zscore", "z_score")],
)
def test_explain_names_each_modes_technique(settings, mode, technique):
    result = CliRunner().invoke(
        cli,
        [
            "explain",
            "printer error E1043",
            "--expect",
            "printer.md#Error codes",
            "--url",
            settings.opensearch_url,
            "--index",
            settings.index_name,
            "--tenant",
            "default",
            "--mode",
            mode,
            "--no-rerank",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["fusion"]["technique"] == technique
    (explanation,) = report["explanations"]
    assert explanation["cut"] is None
    formulas = " ".join(share["formula"] for share in explanation["contributions"])
    assert (f"x {technique} " in formulas) if technique != "rrf" else ("/(60+" in formulas)
