"""The regression gate of `loader eval --compare`: this run's results against a previous file.

- ``load_results`` reads a results JSON file written by ``loader eval`` (``EvalReport.to_dict()``);
- ``compare_reports``: per configuration (matched by name) and metric, previous vs current, and
  which chosen metrics dropped by more than the threshold (pure);
- ``render_comparison``: the deltas as Markdown, the notes and the verdict;
- ``Comparison.check``: the gate itself, raising ``RegressionError`` (exit code 10 in the CLI),
  or ``InputError`` (exit code 7) when it compared no gated metric at all: the previous file
  does not fit this run, and a gate that compared nothing has not passed.

Example::

    comparison = compare_reports(report.to_dict(), load_results("previous.json"))
    comparison.regressions   # [] when nothing dropped by more than 0.01
    comparison.check()       # raises RegressionError otherwise
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loader.errors import ConfigError, InputError, RegressionError
from loader.eval.metrics import DEFAULT_KS, metric_names
from loader.eval.report import markdown_table, table_metrics
from loader.userfile import parse_failure, read_user_text

log = logging.getLogger(__name__)

# What --compare gates on by default: ranking quality at the top (nDCG@10, recall@10) and the
# candidate set a reranker or an LLM gets to see (recall@100).
DEFAULT_GATE_METRICS = ("ndcg@10", "recall@10", "recall@100")
DEFAULT_THRESHOLD = 0.01
# A change smaller than this is float noise, never a regression.
_EPSILON = 1e-9
# Fields of a results file that should agree for a comparison to mean something.
_COMPARED_FIELDS = ("dataset", "split", "queries", "candidates")


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
    matched: list[str] = field(default_factory=list)  # configurations in both
    notes: list[str] = field(default_factory=list)
    previous_name: str = "the previous results"  # the file, for messages

    @property
    def regressions(self) -> list[MetricDelta]:
        return [delta for delta in self.deltas if delta.regressed]

    @property
    def compared_nothing(self) -> bool:
        """No gated metric was compared in any configuration: the gate cannot pass."""
        return not any(delta.gated for delta in self.deltas)

    @property
    def passed(self) -> bool:
        return not self.regressions and not self.compared_nothing

    def to_dict(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            "gate_metrics": list(self.gate_metrics),
            "passed": self.passed,
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

    def nothing_compared_message(self) -> str:
        """Why the gate compared nothing (for ``InputError``)."""
        gated = ", ".join(self.gate_metrics)
        if not self.matched:
            previous = ", ".join(self.only_previous) or "no configurations"
            why = f"no configuration of this run is in {self.previous_name} (it has {previous})"
        else:
            why = (
                f"no gated metric ({gated}) is in both this run and {self.previous_name} for "
                f"{', '.join(self.matched)}"
            )
        return f"the gate compared nothing: {why}; gated metrics: {gated}"

    def check(self) -> None:
        """The regression gate: raise when a gated metric dropped by more than the threshold,
        or when no gated metric could be compared at all (a gate that compared nothing has not
        passed).

        Raises:
            RegressionError: naming every regression (``failure_message``).
            InputError: nothing gated was compared (``nothing_compared_message``): the previous
                results do not fit this run (other configurations, or none of the metrics).
        """
        if self.regressions:
            raise RegressionError(self.failure_message())
        if self.compared_nothing:
            raise InputError(self.nothing_compared_message())


def check_gate_metrics(names: Sequence[str], top_k: int, option: str = "--gate-metric") -> None:
    """Refuse, before anything runs, a gate metric no `loader eval` run reports
    (``loader.eval.metrics.metric_names``): a misspelt one would be found only after the whole
    evaluation.

    Raises:
        ConfigError: naming ``option`` and the metric, with the names it could be.

    Example::

        check_gate_metrics(["NDCG@10"], top_k=5)
        # ConfigError: --gate-metric 'NDCG@10' is not a metric `loader eval` reports (did you
        # mean ndcg@10?); ...
    """
    known = metric_names(top_k)
    for name in names:
        # context_recall@k for any k: top_k may be swept, and compare_reports still refuses a
        # gate metric the run did not measure.
        if name in known or re.fullmatch(r"context_recall@[1-9][0-9]*", name):
            continue
        hint = f" (did you mean {name.lower()}?)" if name.lower() in known else ""
        ks = ", ".join(str(k) for k in DEFAULT_KS)
        raise ConfigError(
            f"{option} {name!r} is not a metric `loader eval` reports{hint}; it reports "
            f"recall@k, ndcg@k and mrr@k for k in {ks}, the same with section_ in front "
            f"(questions naming a heading) and context_recall@k (k: the top_k setting, "
            f"{top_k} here, or each value --sweep gives it)"
        )


def compare_reports(
    current: Mapping[str, Any],
    previous: Mapping[str, Any],
    gate_metrics: Sequence[str] = DEFAULT_GATE_METRICS,
    threshold: float = DEFAULT_THRESHOLD,
    metrics: Sequence[str] | None = None,
    previous_name: str = "the previous results",
) -> Comparison:
    """Compare two results files configuration by configuration (matched by name).

    Args:
        current: this run's ``EvalReport.to_dict()``.
        previous: an earlier results file's content.
        gate_metrics: metrics whose drop fails the gate.
        threshold: the largest allowed drop (absolute, e.g. 0.01 = one point of nDCG).
        metrics: metrics to list (default the table's metrics plus the gate metrics).
        previous_name: what ``previous`` is (its file), for messages.

    Returns:
        The comparison; ``regressions`` lists the gated metrics that dropped by more than
        ``threshold``. Configurations present on one side only are listed, never failed; but
        when no gated metric is compared in any configuration, ``check`` fails.

    Raises:
        InputError: a negative threshold, or a gate metric this run does not measure.

    Example::

        compare_reports(run, run).regressions   # [] -- identical runs pass
    """
    if threshold < 0:
        raise InputError(f"threshold must be 0 or more, got {threshold}")
    gate = tuple(dict.fromkeys(gate_metrics))
    after = {c["name"]: c for c in current.get("configurations") or []}
    measured = {metric for c in after.values() for metric in c.get("metrics", {})}
    unknown = [metric for metric in gate if metric not in measured]
    if after and unknown:
        # A misspelt gate metric would otherwise gate nothing, and the gate would pass.
        raise InputError(
            f"gate metric {', '.join(unknown)} is not measured by this run; "
            f"it measures {', '.join(sorted(measured))}"
        )
    shown = list(dict.fromkeys([*(metrics or table_metrics(current)), *gate]))
    comparison = Comparison(threshold=threshold, gate_metrics=gate, previous_name=previous_name)
    comparison.notes.extend(
        f"{key} differs: previous {previous.get(key)!r}, current {current.get(key)!r}"
        for key in _COMPARED_FIELDS
        if previous.get(key) != current.get(key)
    )
    before = {c["name"]: c for c in previous.get("configurations") or []}
    comparison.only_current = [name for name in after if name not in before]
    comparison.only_previous = [name for name in before if name not in after]
    comparison.matched = [name for name in after if name in before]
    for name, configuration in after.items():
        if name in before:
            comparison.deltas.extend(
                _metric_deltas(name, before[name], configuration, shown, gate, threshold)
            )
    missing = [m for m in gate if not any(d.metric == m for d in comparison.deltas)]
    if missing and comparison.deltas:
        comparison.notes.append(f"gate metric(s) not in both files: {', '.join(missing)}")
    return comparison


def _metric_deltas(
    name: str,
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    shown: Sequence[str],
    gate: Sequence[str],
    threshold: float,
) -> list[MetricDelta]:
    """The deltas of one configuration's metrics that both files hold, in ``shown`` order."""
    old_metrics = before.get("metrics", {})
    new_metrics = after.get("metrics", {})
    deltas = []
    for metric in shown:
        if metric not in old_metrics or metric not in new_metrics:
            continue
        if not (_is_number(old_metrics[metric]) and _is_number(new_metrics[metric])):
            continue  # NaN never "drops": not comparable (load_results refuses it)
        old, new = float(old_metrics[metric]), float(new_metrics[metric])
        gated = metric in gate
        deltas.append(
            MetricDelta(
                configuration=name,
                metric=metric,
                previous=old,
                current=new,
                gated=gated,
                regressed=gated and (old - new) > threshold + _EPSILON,
            )
        )
    return deltas


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
        lines.append(markdown_table(header, rows, numeric=range(2, 5)))
    for name in comparison.only_current:
        lines.append(f"new configuration (not compared): {name}")
    for name in comparison.only_previous:
        lines.append(f"configuration no longer run: {name}")
    lines.extend(f"note: {note}" for note in comparison.notes)
    gate = ", ".join(comparison.gate_metrics)
    if comparison.regressions:
        lines.append(f"FAILED: {comparison.failure_message()}")
    elif comparison.compared_nothing:
        lines.append(f"FAILED: {comparison.nothing_compared_message()}")
    else:
        lines.append(
            f"passed: no gated metric (* {gate}) dropped by more than {comparison.threshold:g}"
        )
    return "\n".join(lines)


def load_results(path: str | Path) -> dict[str, Any]:
    """Read a results JSON file written by ``loader eval`` (perhaps edited by hand).

    Every configuration is checked here, before anything is evaluated: an object with a
    non-empty string ``name`` (used once) and a ``metrics`` object of finite numbers.

    Raises:
        InputError: naming the file: it is missing, not JSON, has no ``configurations`` list,
            or a configuration is not of that shape.
    """
    path = Path(path)
    text = read_user_text(path, "results file", error=InputError)
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:  # ValueError: JSONDecodeError, a huge number
        reason = "nested too deeply" if isinstance(exc, RecursionError) else parse_failure(exc)
        raise InputError(f"cannot read results file {path}: {reason}") from None
    if not isinstance(data, dict) or not isinstance(data.get("configurations"), list):
        raise InputError(f"{path} is not a `loader eval` results file (no 'configurations' list)")
    names: set[str] = set()
    for number, configuration in enumerate(data["configurations"], start=1):
        problem = _configuration_problem(configuration, names)
        if problem:
            raise InputError(f"{path}: configuration {number}: {problem}")
    return data


def _configuration_problem(configuration: Any, names: set[str]) -> str | None:
    """What is wrong with one configuration of a results file (``None``: nothing); ``names``
    collects the names seen."""
    if not isinstance(configuration, dict):
        return f"expected an object, got {_shown(configuration)}"
    name = configuration.get("name")
    if not isinstance(name, str) or not name:
        return "has no 'name' (a non-empty string)"
    if name in names:
        return f"{name!r} appears twice"
    names.add(name)
    metrics = configuration.get("metrics")
    if not isinstance(metrics, dict):
        return f"{name!r} has no 'metrics' object"
    for metric, value in metrics.items():
        if not _is_number(value):
            return f"{name!r} metric {metric!r} is {_shown(value)}, not a finite number"
    return None


def _shown(value: Any, limit: int = 60) -> str:
    text = json.dumps(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def check_comparable(
    previous: Mapping[str, Any], gate_metrics: Sequence[str], name: str = "the previous results"
) -> None:
    """Refuse, before anything is evaluated, previous results the gate can compare nothing with:
    no configurations, or no gated metric in any of them.

    Raises:
        InputError: naming ``name`` (the file) and the gated metrics.
    """
    configurations = previous.get("configurations") or []
    if not configurations:
        raise InputError(f"{name} has no configurations: the gate would compare nothing")
    held = {metric for c in configurations for metric in c.get("metrics") or {}}
    if not any(metric in held for metric in gate_metrics):
        raise InputError(
            f"{name} holds none of the gated metrics ({', '.join(gate_metrics)}): "
            "the gate would compare nothing"
        )
