"""The pure parts of `loader doctor`: the lines and verdict, the blocks on the index, the k-NN
filter test on a rendered query, the fusion bound, and the chunking fingerprint."""

from __future__ import annotations

import pytest

from loader.doctor.checks import block_check, blocks_set
from loader.doctor.probes import (
    _fused_problem,
    _fusion_bound,
    _has_tenant_filter,
    _vector_clauses,
)
from loader.doctor.report import Check, DoctorReport
from loader.errors import ClusterError, IncompatibleIndexError
from loader.ingest.fingerprint import chunking_fingerprint
from loader.settings import Settings


def test_lines_summary_and_the_first_failure_decides_the_exit_code():
    report = DoctorReport(
        [
            Check("cluster", "ok", "OpenSearch 3.6.0"),
            Check("alias", "fail", "alias 'kb' does not exist", "run `loader apply`"),
            Check("plugins", "fail", "missing opensearch-knn", "use the image", ClusterError),
            Check("probes", "skip", "no index"),
        ]
    )
    assert report.lines()[:2] == [
        "ok    cluster: OpenSearch 3.6.0",
        "FAIL  alias: alias 'kb' does not exist; fix: run `loader apply`",
    ]
    assert report.summary() == "1 ok, 0 warnings, 2 failed, 1 skipped"
    with pytest.raises(IncompatibleIndexError, match="first: alias") as raised:
        report.check()
    assert raised.value.exit_code == 5
    assert report.to_dict()["checks"][2]["exit_code"] == 3
    DoctorReport([Check("cluster", "warn", "yellow")]).check()  # warnings never fail


def test_knn_clauses_must_hold_the_tenant_filter():
    inside = {
        "knn": {
            "embedding": {
                "vector": [1],
                "k": 5,
                "filter": {"bool": {"filter": [{"term": {"tenant": "t"}}]}},
            }
        }
    }
    around = {
        "bool": {
            "filter": [{"term": {"tenant": "t"}}],
            "must": {"neural": {"embedding": {"query_text": "x", "k": 5}}},
        }
    }
    query = {"hybrid": {"queries": [{"match": {"content": "x"}}, inside, around]}}
    clauses = list(_vector_clauses(query))
    assert [kind for kind, _ in clauses] == ["knn", "neural"]
    assert [_has_tenant_filter(clause, "t") for _, clause in clauses] == [True, False]


def test_fusion_bounds():
    rrf = {
        "phase_results_processors": [
            {
                "score-ranker-processor": {
                    "combination": {
                        "technique": "rrf",
                        "rank_constant": 60,
                        "parameters": {"weights": [0.2, 0.2, 0.6]},
                    }
                }
            }
        ]
    }
    assert _fusion_bound(rrf) == ("rrf", pytest.approx(1 / 61))
    plain = {
        "phase_results_processors": [
            {"score-ranker-processor": {"combination": {"technique": "rrf", "rank_constant": 20}}}
        ]
    }
    assert _fusion_bound(plain) == ("rrf", pytest.approx(2 / 21))
    # Read by technique: a normalization-processor's default is min_max; z_score has no bound.
    minmax = {"phase_results_processors": [{"normalization-processor": {}}]}
    assert _fusion_bound(minmax) == ("min_max", 1.0)
    zscore = {
        "phase_results_processors": [
            {"normalization-processor": {"normalization": {"technique": "z_score"}}}
        ]
    }
    assert _fusion_bound(zscore) == ("z_score", None)
    assert _fusion_bound({"phase_results_processors": []}) == ("none", 0.0)


def test_raw_sub_query_lists_are_told_from_fused_hits():
    # What OpenSearch 3.6 returned for a hybrid query without a pipeline (separator scores, one
    # document once per sub-query), against a z_score pipeline's fused hits.
    raw = [
        {"_id": "1", "_score": -9.549512e9},
        {"_id": "1", "_score": -4.4224404e9},
        {"_id": "1", "_score": 0.058},
        {"_id": "3", "_score": 1.0},
    ]
    fused = [{"_id": "2", "_score": 0.795}, {"_id": "1", "_score": 0.548}]
    assert "ran unfused" in _fused_problem(raw, "z_score", None)
    assert _fused_problem(fused, "z_score", None) == ""
    assert _fused_problem(fused, "rrf", 1 / 61).startswith("top score 0.7950 is not a rrf score")
    assert _fused_problem([], "min_max", 1.0).startswith("the hybrid query ran unfused")


def test_chunking_fingerprint_follows_chunking_and_model_settings_only():
    base = Settings()
    assert chunking_fingerprint(base) == chunking_fingerprint(
        base.replace(top_k=9, bm25_weight=0.9)
    )
    assert chunking_fingerprint(base) != chunking_fingerprint(base.replace(chunk_target_tokens=60))
    assert chunking_fingerprint(base) != chunking_fingerprint(base.replace(chunk_strategy="fixed"))
    assert chunking_fingerprint(base).startswith("c")


def test_blocks_set_reads_the_flat_settings():
    assert blocks_set({}) == []
    assert blocks_set({"index.blocks.write": "false", "index.blocks.metadata": "true"}) == []
    flat = {"index.blocks.read_only_allow_delete": "true", "index.blocks.write": True}
    assert blocks_set(flat) == ["write", "read_only_allow_delete"]


def test_a_block_is_a_failure_naming_the_index_the_block_and_how_to_lift_it():
    assert block_check("kb-v1", []) == Check(
        "index blocks", "ok", "no write or read block on kb-v1"
    )
    write = block_check("kb-v1", ["write"])
    assert (write.status, write.error) == ("fail", IncompatibleIndexError)
    assert write.line() == (
        "FAIL  index blocks: kb-v1 has index.blocks.write = true: every `loader push` fails; "
        'fix: PUT kb-v1/_settings {"index.blocks.write": null} once whoever set it is done'
    )
    flood = block_check("kb-v1", ["write", "read_only_allow_delete"])
    assert flood.detail == (
        "kb-v1 has index.blocks.write = true: every `loader push` fails; kb-v1 has "
        "index.blocks.read_only_allow_delete = true: OpenSearch sets it when a node's disk "
        "passes the flood-stage watermark: every `loader push` fails"
    )
    assert flood.fix == (
        "free disk on the data nodes (GET _cat/allocation?v; OpenSearch lifts the flood-stage "
        "block once they are below the high watermark), then PUT kb-v1/_settings "
        '{"index.blocks.write": null, "index.blocks.read_only_allow_delete": null}'
    )


def test_a_write_block_a_killed_apply_recorded_is_lifted_by_apply():
    meta = {"loader_reindex_block": {"dest": "kb-v2", "started_at": "2026-12-01T11:30:00Z"}}
    left = block_check("kb-v1", ["write"], meta)
    assert (left.status, left.error) == ("fail", IncompatibleIndexError)
    assert left.line() == (
        "FAIL  index blocks: kb-v1 has index.blocks.write = true: every `loader push` fails; "
        "left by a `loader apply` copying kb-v1 to kb-v2, started 2026-12-01T11:30:00Z that did "
        "not finish; fix: run `loader apply`: it lifts the write block (see `loader apply "
        "--dry-run`)"
    )
    # Another block beside it keeps its own fix; without the record the block is someone else's.
    both = block_check("kb-v1", ["write", "read"], meta)
    assert both.fix == (
        "run `loader apply`: it lifts the write block (see `loader apply --dry-run`); "
        'PUT kb-v1/_settings {"index.blocks.read": null} once whoever set it is done'
    )
    assert block_check("kb-v1", ["write"], {"doc_id_scheme": "x"}) == block_check(
        "kb-v1", ["write"]
    )
