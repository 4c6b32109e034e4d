"""The figures of ``bench_scale.py`` as a Markdown table and a PNG plot, and the extrapolation of
sizes that were not built.

Extrapolation model (fitted only on measured rows; such rows say ``extrapolated``):

- store bytes and vector file bytes: linear in n (``a + b*n``, least squares), i.e. constant bytes
  per chunk for large n;
- latency p50/p95, per mode by what its query does (``LATENCY_MODEL``): vector ``a + b*ln(n)``
  (an HNSW search visits O(log n) nodes); bm25 and the hybrid modes ``a + b*n``: the BM25 side
  scores every chunk matching a question term (with this corpus a fixed share of the chunks), the
  hybrid query collects all of its sub-queries' matches without early termination, and
  ``track_total_hits`` counts up to 10,000 hits before BM25 may skip. A fit whose slope comes out
  negative (noise: the machine is shared) holds the largest measured size's value. Each row also
  keeps the other model's figure (``latency_other_model``), so the report can give both;
- build time: ``c * n * ln(n)`` (each HNSW insert is an O(log n) search), c from the largest
  measured size;
- recall@10 is not extrapolated (it depends on ef_search and the data, not on a simple law).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from loader.eval.metrics import percentile
from loader.settings import SEARCH_MODES

__all__ = ["extrapolate", "markdown_table", "percentile", "plot"]

LATENCY_MODEL = {
    "bm25": "linear",
    "vector": "log",
    "hybrid-rrf": "linear",
    "hybrid-minmax": "linear",
}
MODEL = (
    "model: bytes linear in n; latency a + b*ln(n) for vector, a + b*n for bm25 and hybrid; "
    "build time c*n*ln(n) from the largest measured size; recall not extrapolated"
)

LATENCY_KEYS = ("p50", "p95", "p50_embed", "p95_embed")


def _fit_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    if len(xs) == 1:
        return 0.0, ys[0] / xs[0]  # through the origin: y proportional to x
    slope, intercept = np.polyfit(xs, ys, 1)
    return float(intercept), float(slope)


def extrapolate(measured: list[dict[str, Any]], size: int) -> dict[str, Any]:
    """A row for ``size`` from the measured rows (at least one), per the module's model."""
    sizes = [row["size"] for row in measured]
    row: dict[str, Any] = {"size": size, "extrapolated": True, "latency": {}}
    for key in ("store_bytes", "vector_file_bytes"):
        a, b = _fit_line(sizes, [r["index"][key] for r in measured])
        row.setdefault("index", {})[key] = a + b * size
    largest = max(measured, key=lambda r: r["size"])
    scale = size * math.log(size) / (largest["size"] * math.log(largest["size"]))
    row["build_seconds"] = largest["build_seconds"] * scale
    row["latency_other_model"] = {}
    for mode in SEARCH_MODES:
        other = "log" if LATENCY_MODEL[mode] == "linear" else "linear"
        for target, model in (("latency", LATENCY_MODEL[mode]), ("latency_other_model", other)):
            row[target][mode] = {
                key: _fit_latency(sizes, [r["latency"][mode][key] for r in measured], model, size)
                for key in LATENCY_KEYS
            }
    return row


def _fit_latency(sizes: list[int], values: list[float], model: str, size: int) -> float:
    """``values`` at ``size`` under ``model`` (``log``: a + b*ln n; ``linear``: a + b*n)."""
    if len(sizes) == 1:
        return values[0]
    scale = math.log if model == "log" else float
    a, b = _fit_line([scale(n) for n in sizes], values)
    if b < 0:  # latency that falls with size is noise of a shared machine: hold the last value
        return values[sizes.index(max(sizes))]
    return a + b * scale(size)


def _mib(value: float) -> str:
    return f"{value / 2**20:,.0f}"


def _cost_cells(row: dict[str, Any]) -> list[str]:
    index = row["index"]
    if row.get("extrapolated"):
        memory, split, recall = ["—", "—"], "—", "—"
    else:
        memory = [f"{index['knn_graph_memory_kb'] / 1024:,.0f}"]
        memory.append(f"{_mib(index['heap_used_bytes'])} / {_mib(index['heap_max_bytes'])}")
        split = f"{row['bulk_seconds']:,.0f} / {row['refresh_merge_seconds']:,.0f}"
        recall = ", ".join(f"{value:.3f} ({ef})" for ef, value in row["recall"].items())
    return [
        f"{index['store_bytes'] / row['size']:,.0f}",
        _mib(index["vector_file_bytes"]),
        _mib(index["store_bytes"]),
        *memory,
        f"{row['build_seconds']:,.0f}",
        split,
        f"{row['size'] / row['build_seconds']:,.0f}",
        recall,
    ]


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """Two tables, one line per size: what the index costs, then latency per mode."""
    cost = (
        "| chunks | how | store B/chunk | vector+graph files MiB | index MiB | k-NN native MiB | "
        "heap used / max MiB | build s | bulk / refresh+merge s | chunks/s | "
        "recall@10 (ef_search) |"
    )
    embedded = [mode for mode in SEARCH_MODES if mode != "bm25"]
    latency = (
        "| chunks | how | "
        + " | ".join(f"{mode} p50 / p95 ms" for mode in SEARCH_MODES)
        + " | "
        + " | ".join(f"{mode} + embedding p50 / p95 ms" for mode in embedded)
        + " |"
    )
    lines = [cost, "|" + "---|" * (cost.count("|") - 1)]
    ordered = sorted(rows, key=lambda r: r["size"])
    for row in ordered:
        how = "extrapolated" if row.get("extrapolated") else "measured"
        lines.append("| " + " | ".join([f"{row['size']:,}", how, *_cost_cells(row)]) + " |")
    lines += ["", latency, "|" + "---|" * (latency.count("|") - 1)]
    for row in ordered:
        how = "extrapolated" if row.get("extrapolated") else "measured"
        lat = row["latency"]
        cells = [f"{lat[m]['p50']:.1f} / {lat[m]['p95']:.1f}" for m in SEARCH_MODES]
        cells += [f"{lat[m]['p50_embed']:.1f} / {lat[m]['p95_embed']:.1f}" for m in embedded]
        lines.append("| " + " | ".join([f"{row['size']:,}", how, *cells]) + " |")
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], path: Path, note: str) -> None:
    """p50 (solid) and p95 (dashed) latency against size per mode; extrapolated points hollow."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 5))
    ordered = sorted(rows, key=lambda r: r["size"])
    for number, mode in enumerate(SEARCH_MODES):
        color = f"C{number}"
        sizes = [r["size"] for r in ordered]
        for key, style in (("p50", "-"), ("p95", "--")):
            values = [r["latency"][mode][key] for r in ordered]
            axes.plot(sizes, values, style, color=color, label=f"{mode} {key}")
            for size, value, row in zip(sizes, values, ordered, strict=True):
                hollow = row.get("extrapolated", False)
                axes.plot(
                    size, value, "o", color=color, markerfacecolor="white" if hollow else color
                )
    axes.set_xscale("log")
    axes.set_xlabel("chunks in the index (log scale)")
    axes.set_ylabel("search latency, ms (query embedding excluded)")
    axes.set_title("loader search latency against index size (hollow: extrapolated)")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8, ncol=2, loc="upper left")
    figure.text(0.01, 0.01, note, fontsize=7)
    figure.tight_layout(rect=(0, 0.03, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
