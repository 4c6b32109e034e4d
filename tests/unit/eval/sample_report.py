"""A small ``EvalReport`` of two configurations, shared by the report and compare tests."""

from __future__ import annotations

from loader.eval.configs import EvalConfig
from loader.eval.report import ConfigResult, EvalReport


def make_report() -> EvalReport:
    def metrics(scale: float) -> dict[str, float]:
        values = {}
        for k in (1, 5, 10, 50, 100):
            values[f"recall@{k}"] = min(1.0, scale * (0.5 + k / 200))
            values[f"ndcg@{k}"] = scale * 0.6
            values[f"mrr@{k}"] = scale * 0.7
        return values

    report = EvalReport(
        dataset="tiny",
        kind="beir",
        split="test",
        queries=2,
        documents=3,
        candidates=100,
        settings={"chunk_strategy": "structure"},
    )
    report.configurations = [
        ConfigResult(
            EvalConfig("structure", "bm25"),
            "eval-tiny-structure",
            metrics(1.0),
            {"p50": 12.25, "p95": 30.0, "mean": 15.0},
            2,
            run={"q1": [("d1", 3.5), ("d2", 1.25)], "q2": [("my doc.md", 0.5)]},
        ),
        ConfigResult(
            EvalConfig("structure", "hybrid-rrf", rerank=True),
            "eval-tiny-structure",
            metrics(1.2),
            {"p50": 40.0, "p95": 81.04, "mean": 50.0},
            2,
            run={"q1": [("d2", 0.9)], "q2": []},
        ),
    ]
    return report
