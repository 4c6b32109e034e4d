"""What one `loader eval` run measured, and its outputs: Markdown table, JSON, TREC runs, PNG chart.

- ``EvalReport`` (with a ``ConfigResult`` per configuration and an ``IndexResult`` per index
  pushed) is what ``loader.eval.runner.evaluate`` returns; ``to_dict`` is the JSON file's content;
- ``render_table``: the results as Markdown, for terminals and pull requests;
- ``write_outputs``: the JSON file, one TREC run per configuration, a Markdown copy of the table
  and a PNG chart (``render_chart``: matplotlib, Agg backend: no display needed).

The renderers work on the report's JSON form (``EvalReport.to_dict()``), so a stored results file
can be rendered exactly like a fresh run; comparing two of them (the regression gate) lives in
``loader.eval.compare``.

Example::

    written = write_outputs(report, "eval-results")   # {"json": ..., "table": ..., ...}
    print(render_table(report.to_dict()))
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from loader.eval.datasets import write_trec_run
from loader.eval.metrics import CONTEXT_RECALL, SECTION_PREFIX

if TYPE_CHECKING:
    from loader.eval.configs import EvalConfig

log = logging.getLogger(__name__)

# Metrics shown in tables and compared by --compare, in display order.
REPORT_METRICS = (
    "recall@1",
    "recall@5",
    "recall@10",
    "recall@50",
    "recall@100",
    "mrr@10",
    "ndcg@10",
)

# What results.md and results.json say when every question's candidates came from one source:
# a document ranking of one document scores the same whatever the order.
SINGLE_SOURCE = (
    "every question's candidates came from one source (document), so recall, MRR and nDCG "
    "score by source and are the same whatever the order: they cannot tell these rankings "
    "apart. For chunk-level metrics give the questions a heading_path (section_recall, "
    "section_mrr) or an answer (context_recall), or evaluate over more documents"
)

# Metrics drawn in the chart, one bar each per configuration.
CHART_METRICS = ("ndcg@10", "mrr@10", "recall@10", "recall@100")
# Section-level metrics added to the table when the questions name headings.
SECTION_TABLE_METRICS = ("section_recall@10", "section_mrr@10")
CONTEXT_RECALL_PREFIX = CONTEXT_RECALL.split("{", 1)[0]


@dataclass
class ConfigResult:
    """The measurement of one configuration.

    Attributes:
        config: what was run.
        index: the alias searched.
        metrics: averaged metrics (``recall@k``, ``ndcg@k``, ``mrr@k``; ``section_*`` too when
            questions name a heading).
        latency_ms: ``p50``, ``p95`` and ``mean`` of the end-to-end search time per query.
        queries: number of queries searched.
        run: ``(document key, score)`` per query id, best first (written as a TREC run).
        run_file: where the run was written (set by ``write_outputs``).
    """

    config: EvalConfig
    index: str
    metrics: dict[str, float]
    latency_ms: dict[str, float]
    queries: int
    run: dict[str, list[tuple[str, float]]] = field(default_factory=dict, repr=False)
    run_file: str | None = None

    @property
    def single_source(self) -> bool:
        """Whether every query's ranking holds at most one document: then the document metrics
        are 1 or 0 whatever the order (a tenant with one document scores 1.0)."""
        return bool(self.run) and all(len(ranked) <= 1 for ranked in self.run.values())

    def summary(self) -> str:
        """One line, e.g. ``structure:bm25: ndcg@10 0.6650, recall@100 0.9000, p50 12.0 ms``."""
        return (
            f"{self.config.name}: ndcg@10 {self.metrics['ndcg@10']:.4f}, "
            f"recall@100 {self.metrics['recall@100']:.4f}, p50 {self.latency_ms['p50']} ms"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.config.name,
            "strategy": self.config.strategy,
            "mode": self.config.mode,
            "rerank": self.config.rerank,
            "sweep": self.config.sweep,
            "index": self.index,
            "queries": self.queries,
            "metrics": dict(self.metrics),
            "latency_ms": dict(self.latency_ms),
            "run_file": self.run_file,
        }


@dataclass
class IndexResult:
    """One index the evaluation pushed into, and what the push did."""

    index: str
    strategy: str
    sweep: dict[str, Any] | None
    push: dict[str, Any]


@dataclass
class EvalReport:
    """Everything one evaluation measured; ``to_dict`` is the JSON file's content."""

    dataset: str
    kind: str
    split: str
    queries: int
    documents: int
    candidates: int
    settings: dict[str, Any]
    configurations: list[ConfigResult] = field(default_factory=list)
    indexes: list[IndexResult] = field(default_factory=list)
    created: str = ""
    tenant: str = ""  # whose documents were pushed and searched
    # The whole run, reading the documents included; read_seconds is that reading alone.
    seconds: float = 0.0
    read_seconds: float = 0.0
    # What a reader of the figures must know, e.g. that rerank = auto left the rerank out.
    warnings: list[str] = field(default_factory=list)
    # The table's caption on the rerank: which reranker ran, or why none did
    # (``loader.eval.configs.rerank_caption``).
    rerank: str = ""
    # Every question's candidates came from one source: the document metrics cannot
    # discriminate (``note_single_source``).
    single_source: bool = False

    def note_single_source(self) -> None:
        """Say so (``single_source``, a warning) when a configuration's every question found
        candidates of one source only."""
        self.single_source = any(result.single_source for result in self.configurations)
        if self.single_source:
            self.warnings.append(SINGLE_SOURCE)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "kind": self.kind,
            "split": self.split,
            "queries": self.queries,
            "documents": self.documents,
            "candidates": self.candidates,
            "created": self.created,
            "tenant": self.tenant,
            "seconds": round(self.seconds, 3),
            "read_seconds": round(self.read_seconds, 3),
            "settings": dict(self.settings),
            "indexes": [dataclasses.asdict(index) for index in self.indexes],
            "configurations": [result.to_dict() for result in self.configurations],
            "warnings": list(self.warnings),
            "rerank": self.rerank,
            "single_source": self.single_source,
        }


def table_metrics(report: Mapping[str, Any]) -> list[str]:
    """The metric columns of a report's table: the standard ones, plus section-level ones when
    any configuration has them."""
    names = list(REPORT_METRICS)
    configurations = report.get("configurations") or []
    if any(SECTION_PREFIX + "recall@10" in c.get("metrics", {}) for c in configurations):
        names.extend(SECTION_TABLE_METRICS)
    # Context recall (questions with an answer), at the top_k each run used.
    recall_names = {
        name
        for c in configurations
        for name in c.get("metrics", {})
        if name.startswith(CONTEXT_RECALL_PREFIX)
    }
    names.extend(sorted(recall_names))
    return names


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: range) -> str:
    """A Markdown table; the ``numeric`` columns are right-aligned."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        padded = [
            str(cell).rjust(width) if index in numeric else str(cell).ljust(width)
            for index, (cell, width) in enumerate(zip(cells, widths, strict=True))
        ]
        return "| " + " | ".join(padded) + " |"

    rule = [
        ("-" * (width - 1) + ":") if index in numeric else "-" * width
        for index, width in enumerate(widths)
    ]
    return "\n".join([line(header), line(rule), *(line(row) for row in rows)])


def render_table(report: Mapping[str, Any]) -> str:
    """The results as a Markdown table: one row per configuration.

    Args:
        report: ``EvalReport.to_dict()`` or a results file's content.

    Returns:
        A title line, the rerank's caption line (when the report has one: results files from
        before it have none), a line saying the metrics scored by source when every question's
        candidates came from one (``single_source``), then the table (metrics to 4 decimals,
        latencies in ms).

    Example output::

        scifact (test): 300 queries, 5183 documents, 100 candidates
        rerank: off (auto: no cross-encoder on this machine)

        | configuration        | recall@1 | ... | ndcg@10 | p50 ms | p95 ms |
        |----------------------|---------:| ... |--------:|-------:|-------:|
        | structure:bm25       |   0.5000 | ... |  0.6650 |   12.0 |   25.3 |
    """
    metrics = table_metrics(report)
    header = ["configuration", *metrics, "p50 ms", "p95 ms"]
    rows = []
    for configuration in report.get("configurations") or []:
        values = configuration.get("metrics", {})
        latency = configuration.get("latency_ms", {})
        rows.append(
            [
                configuration["name"],
                *(_number(values.get(name)) for name in metrics),
                f"{latency.get('p50', 0.0):.1f}",
                f"{latency.get('p95', 0.0):.1f}",
            ]
        )
    split = f" ({report['split']})" if report.get("split") else ""
    title = (
        f"{report.get('dataset', '')}{split}: {report.get('queries', 0)} queries, "
        f"{report.get('documents', 0)} documents, {report.get('candidates', 0)} candidates"
    )
    caption = f"\n{report['rerank']}" if report.get("rerank") else ""
    if report.get("single_source"):
        caption += f"\nscored by source: {SINGLE_SOURCE}"
    return f"{title}{caption}\n\n{markdown_table(header, rows, numeric=range(1, len(header)))}"


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def run_file_name(configuration: str) -> str:
    """A file name for a configuration's TREC run: ``structure:bm25`` -> ``structure_bm25.trec``."""
    return re.sub(r"[^A-Za-z0-9._=+-]+", "_", configuration) + ".trec"


# What a TREC run's document column cannot hold (its columns are whitespace-separated), and the
# escape character itself, so that an escaped id reads back unambiguously.
_NOT_IN_A_TREC_TOKEN = re.compile(r"[\s%]")


def _trec_id(key: str) -> str:
    """``key`` as a TREC run's document id: unchanged unless it holds whitespace or ``%``
    (a questions file's keys are file paths, which may hold spaces), so that BEIR ids
    (``café``, ``d#1``) still match the dataset's own qrels in trec_eval, pytrec_eval or ranx."""
    return _NOT_IN_A_TREC_TOKEN.sub(lambda match: quote(match[0], safe=""), key)


def write_outputs(
    report: EvalReport,
    out_dir: str | Path,
    output: str | Path | None = None,
    chart: bool = True,
) -> dict[str, str]:
    """Write the TREC runs, the JSON results, a Markdown table and the PNG chart.

    Args:
        report: the evaluation report (its configurations' ``run_file`` are set here).
        out_dir: folder of the run files, table and chart (created).
        output: the JSON file (default ``<out_dir>/results.json``); the table and chart take its
            stem (``results.md``, ``results.png``) in ``out_dir``.
        chart: draw the PNG chart.

    Returns:
        ``{"json": ..., "table": ..., "chart": ..., "runs": ...}`` paths written.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = Path(output) if output else out_dir / "results.json"
    runs_dir = out_dir / "runs"
    for result in report.configurations:
        path = runs_dir / run_file_name(result.config.name)
        run = {
            qid: [(_trec_id(key), score) for key, score in ranked]
            for qid, ranked in result.run.items()
        }
        write_trec_run(run, path, tag=result.config.name)
        result.run_file = str(path)
    data = report.to_dict()
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    table_path = out_dir / f"{json_path.stem}.md"
    table_path.write_text(render_table(data) + "\n", encoding="utf-8")
    written = {"json": str(json_path), "table": str(table_path), "runs": str(runs_dir)}
    if chart:
        chart_path = out_dir / f"{json_path.stem}.png"
        render_chart(data, chart_path)
        written["chart"] = str(chart_path)
    return written


def render_chart(report: Mapping[str, Any], path: str | Path) -> Path:
    """A PNG comparing the configurations: grouped bars of ``CHART_METRICS`` and latency p50/p95.

    Args:
        report: ``EvalReport.to_dict()`` or a results file's content.
        path: the PNG to write.

    Returns:
        ``path``.
    """
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on servers and CI
    import matplotlib.pyplot as plt

    configurations = report.get("configurations") or []
    names = [c["name"] for c in configurations]
    count = max(len(names), 1)
    height = 1.6 + 0.55 * count * len(CHART_METRICS) / 2
    figure, (quality, latency) = plt.subplots(
        1, 2, figsize=(13, height), gridspec_kw={"width_ratios": [3, 1]}, sharey=True
    )
    bar = 0.8 / len(CHART_METRICS)
    positions = list(range(len(names)))
    for index, metric in enumerate(CHART_METRICS):
        values = [c.get("metrics", {}).get(metric, 0.0) for c in configurations]
        offsets = [p + (index - (len(CHART_METRICS) - 1) / 2) * bar for p in positions]
        bars = quality.barh(offsets, values, height=bar, label=metric)
        quality.bar_label(bars, fmt="%.3f", fontsize=7, padding=2)
    quality.set_xlim(0, 1.1)
    quality.set_yticks(positions, names)
    quality.invert_yaxis()  # first configuration on top, as in the table
    quality.set_xlabel("score")
    # Legends under the axes: inside, they would hide the longest bars.
    legend_below = {"loc": "upper center", "bbox_to_anchor": (0.5, -0.22), "frameon": False}
    quality.legend(ncol=len(CHART_METRICS), fontsize=8, **legend_below)
    split = f" ({report['split']})" if report.get("split") else ""
    quality.set_title(f"{report.get('dataset', '')}{split}: {report.get('queries', 0)} queries")
    for index, key in enumerate(("p50", "p95")):
        values = [c.get("latency_ms", {}).get(key, 0.0) for c in configurations]
        offsets = [p + (index - 0.5) * 0.4 for p in positions]
        latency.barh(offsets, values, height=0.4, label=key)
    latency.set_xlabel("latency (ms)")
    latency.legend(ncol=2, fontsize=8, **legend_below)
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)
    return path
