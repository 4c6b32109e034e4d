"""Rendering and gating of ``loader eval`` results: Markdown table, JSON, TREC runs, PNG chart.

Everything here works on the report's JSON form (``EvalReport.to_dict()``), so a stored results
file can be rendered or compared exactly like a fresh run:

- ``render_table`` / ``render_comparison``: Markdown for terminals and pull requests;
- ``compare_reports``: per configuration and metric, previous vs current, and which chosen metrics
  dropped by more than the threshold (the regression gate; pure);
- ``write_outputs``: the JSON file, one TREC run per configuration, a Markdown copy of the table
  and a PNG chart (matplotlib, Agg backend: no display needed).

Example::

    data = report.to_dict()
    print(render_table(data))
    comparison = compare_reports(data, json.loads(Path("previous.json").read_text()))
    comparison.regressions   # [] when nothing dropped by more than 0.01
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from loader.errors import InputError
from loader.eval.datasets import write_trec_run
from loader.eval.runner import (
    DEFAULT_GATE_METRICS,
    DEFAULT_THRESHOLD,
    REPORT_METRICS,
    SECTION_PREFIX,
)

if TYPE_CHECKING:
    from loader.eval.runner import EvalReport

log = logging.getLogger(__name__)

# Metrics drawn in the chart, one bar each per configuration.
CHART_METRICS = ("ndcg@10", "mrr@10", "recall@10", "recall@100")
# Section-level metrics added to the table when the questions name headings.
SECTION_TABLE_METRICS = ("section_recall@10", "section_mrr@10")
# A change smaller than this is float noise, never a regression.
_EPSILON = 1e-9


def table_metrics(report: Mapping[str, Any]) -> list[str]:
    """The metric columns of a report's table: the standard ones, plus section-level ones when
    any configuration has them."""
    names = list(REPORT_METRICS)
    configurations = report.get("configurations") or []
    if any(SECTION_PREFIX + "recall@10" in c.get("metrics", {}) for c in configurations):
        names.extend(SECTION_TABLE_METRICS)
    return names


def _markdown(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: range) -> str:
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
        A title line, then the table (metrics to 4 decimals, latencies in ms).

    Example output::

        scifact (test): 300 queries, 5183 documents, 100 candidates

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
    return f"{title}\n\n{_markdown(header, rows, numeric=range(1, len(header)))}"


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


@dataclass
class MetricDelta:
    """One metric of one configuration, before and after."""

    configuration: str
    metric: str
    previous: float
    current: float
    gated: bool
    regressed: bool

    @property
    def delta(self) -> float:
        return self.current - self.previous

    def to_dict(self) -> dict[str, Any]:
        return {
            "configuration": self.configuration,
            "metric": self.metric,
            "previous": self.previous,
            "current": self.current,
            "delta": self.delta,
            "gated": self.gated,
            "regressed": self.regressed,
        }


@dataclass
class Comparison:
    """The current results against a previous results file."""

    threshold: float
    gate_metrics: tuple[str, ...]
    deltas: list[MetricDelta] = field(default_factory=list)
    only_current: list[str] = field(default_factory=list)  # configurations new in this run
    only_previous: list[str] = field(default_factory=list)  # configurations no longer run
    notes: list[str] = field(default_factory=list)

    @property
    def regressions(self) -> list[MetricDelta]:
        return [delta for delta in self.deltas if delta.regressed]

    def to_dict(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            "gate_metrics": list(self.gate_metrics),
            "passed": not self.regressions,
            "deltas": [delta.to_dict() for delta in self.deltas],
            "only_current": list(self.only_current),
            "only_previous": list(self.only_previous),
            "notes": list(self.notes),
        }

    def failure_message(self) -> str:
        """One line naming every regression (for ``RegressionError``)."""
        parts = [
            f"{d.configuration} {d.metric} {d.previous:.4f} -> {d.current:.4f} ({d.delta:+.4f})"
            for d in self.regressions
        ]
        return f"{len(parts)} metric(s) dropped by more than {self.threshold:g}: " + "; ".join(
            parts
        )


def compare_reports(
    current: Mapping[str, Any],
    previous: Mapping[str, Any],
    gate_metrics: Sequence[str] = DEFAULT_GATE_METRICS,
    threshold: float = DEFAULT_THRESHOLD,
    metrics: Sequence[str] | None = None,
) -> Comparison:
    """Compare two results files configuration by configuration (matched by name).

    Args:
        current: this run's ``EvalReport.to_dict()``.
        previous: an earlier results file's content.
        gate_metrics: metrics whose drop fails the gate.
        threshold: the largest allowed drop (absolute, e.g. 0.01 = one point of nDCG).
        metrics: metrics to list (default the table's metrics plus the gate metrics).

    Returns:
        The comparison; ``regressions`` lists the gated metrics that dropped by more than
        ``threshold``. Configurations present on one side only are listed, never failed.

    Example::

        compare_reports(run, run).regressions   # [] -- identical runs pass
    """
    if threshold < 0:
        raise InputError(f"threshold must be 0 or more, got {threshold}")
    gate = tuple(dict.fromkeys(gate_metrics))
    shown = list(dict.fromkeys([*(metrics or table_metrics(current)), *gate]))
    comparison = Comparison(threshold=threshold, gate_metrics=gate)
    for key in ("dataset", "split", "queries", "candidates"):
        if previous.get(key) != current.get(key):
            comparison.notes.append(
                f"{key} differs: previous {previous.get(key)!r}, current {current.get(key)!r}"
            )
    before = {c["name"]: c for c in previous.get("configurations") or []}
    after = {c["name"]: c for c in current.get("configurations") or []}
    comparison.only_current = [name for name in after if name not in before]
    comparison.only_previous = [name for name in before if name not in after]
    for name, configuration in after.items():
        if name not in before:
            continue
        old_metrics = before[name].get("metrics", {})
        new_metrics = configuration.get("metrics", {})
        for metric in shown:
            if metric not in old_metrics or metric not in new_metrics:
                continue
            old, new = float(old_metrics[metric]), float(new_metrics[metric])
            gated = metric in gate
            comparison.deltas.append(
                MetricDelta(
                    configuration=name,
                    metric=metric,
                    previous=old,
                    current=new,
                    gated=gated,
                    regressed=gated and (old - new) > threshold + _EPSILON,
                )
            )
    missing = [m for m in gate if not any(d.metric == m for d in comparison.deltas)]
    if missing and comparison.deltas:
        comparison.notes.append(f"gate metric(s) not in both files: {', '.join(missing)}")
    return comparison


def render_comparison(comparison: Comparison) -> str:
    """The deltas as a Markdown table, then one line per note and the verdict."""
    rows = []
    for d in comparison.deltas:
        status = "REGRESSION" if d.regressed else ("ok" if d.gated else "")
        rows.append(
            [
                d.configuration,
                d.metric + (" *" if d.gated else ""),
                f"{d.previous:.4f}",
                f"{d.current:.4f}",
                f"{d.delta:+.4f}",
                status,
            ]
        )
    lines = []
    if rows:
        header = ["configuration", "metric", "previous", "current", "delta", "gate"]
        lines.append(_markdown(header, rows, numeric=range(2, 5)))
    for name in comparison.only_current:
        lines.append(f"new configuration (not compared): {name}")
    for name in comparison.only_previous:
        lines.append(f"configuration no longer run: {name}")
    lines.extend(f"note: {note}" for note in comparison.notes)
    gate = ", ".join(comparison.gate_metrics)
    if comparison.regressions:
        lines.append(f"FAILED: {comparison.failure_message()}")
    else:
        lines.append(
            f"passed: no gated metric (* {gate}) dropped by more than {comparison.threshold:g}"
        )
    return "\n".join(lines)


def load_results(path: str | Path) -> dict[str, Any]:
    """Read a results JSON file written by ``loader eval``.

    Raises:
        InputError: the file is missing, not JSON, or has no ``configurations`` list.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"results file {path} does not exist") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read results file {path}: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("configurations"), list):
        raise InputError(f"{path} is not a `loader eval` results file (no 'configurations' list)")
    return data


def run_file_name(configuration: str) -> str:
    """A file name for a configuration's TREC run: ``structure:bm25`` -> ``structure_bm25.trec``."""
    return re.sub(r"[^A-Za-z0-9._=+-]+", "_", configuration) + ".trec"


def _trec_id(key: str) -> str:
    # Document keys of a questions file are file paths, which may hold spaces: TREC runs cannot.
    return quote(key, safe="/:@=+-._~")


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
