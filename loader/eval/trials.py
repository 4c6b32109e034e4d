"""A trial of fusion settings on a judged query set, scored without applying them (pure): Quepid's
"change the settings, rerun, see each question's score move", with production untouched.

The hybrid modes fuse their template's sub-queries (BM25, the first reader's k-NN, the second
reader's with one, the exact-identifier sub-query) in a search pipeline. A trial fuses the *same*
sub-query lists on the client instead (``loader.query.fusion``: the twins of OpenSearch's
``score-ranker-processor`` and ``normalization-processor``), once with the fusion stored on the
cluster (``now``) and once with the trial's (``trial``), keeps each document's best chunk as the
hybrid query's ``collapse`` does, and scores both top 10s with the live scores' own metric
(``loader.eval.live.ranking_score``: nDCG@10 against the set's grades). The sub-query lists are
searched once per question (``loader.eval.trial_searches``); a trial then costs no cluster call.

Only the settings that the fusion pipelines read (scope ``pipeline``) and ``search_mode`` (a
hybrid mode: which fusion) may be tried: anything else changes the index, the chunks, the model
or what a search asks for, which no fusion of the same lists can show.

Fused scores are compared as OpenSearch compares them, as 32-bit floats, and ties go to the chunk
first in the index (its Lucene document number, what a one-shard index orders ties by), so
that fusing with the stored settings gives the rankings the live scores show.

Example::

    trial = check_trial({"rrf_bm25_weight": 0.7, "rrf_rank_constant": 20})
    fused_sources(sides, read_fusion(pipeline))        # ['refunds.md', 'faq.md', ...]
    trial_table(questions, graded, now, tried)["means"]   # {"now": 0.61, "trial": 0.66, ...}
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from loader.errors import ConfigError
from loader.eval.live import LIVE_K, ranking_score
from loader.eval.snapshot_scores import delta_of, direction
from loader.eval.toml_edit import toml_value
from loader.modes import HYBRID_MODES, RANK_FUSION, Fusion
from loader.query.fusion import NORMALIZERS, rrf, weighted_arithmetic_mean
from loader.settings import SCOPES, Settings, check_setting, settings_in_scope

# What a trial may set: the fusion pipelines' settings, and which hybrid mode fuses.
TRIAL_SETTINGS: tuple[str, ...] = ("search_mode", *settings_in_scope("pipeline"))
_SCOPE_OF = {name: scope for scope in SCOPES for name in settings_in_scope(scope)}
MAX_SWEEP_VALUES = 10  # each value fuses every question again (no search): a table each


@dataclass(frozen=True)
class SubHit:
    """One chunk of a sub-query's list, best first: its ids, its document's source, its score,
    and its place in the index (the Lucene document number ties are broken by)."""

    chunk_id: str
    doc_id: str
    source: str
    score: float
    order: int = 0


def check_trial(raw: Any) -> dict[str, Any]:
    """A trial's settings, checked: each name one a trial may set, each value of its setting's
    type and within its bounds.

    Raises:
        ConfigError: not a mapping of names to values, an unknown name, a setting no fusion can
            try (it names its scope), a value of the wrong type or out of bounds (naming it).

    Example::

        check_trial({"rrf_rank_constant": 20})   # {'rrf_rank_constant': 20}
        check_trial({"chunk_strategy": "fixed"})  # ConfigError: ... decides the chunks ...
    """
    if not isinstance(raw, Mapping) or not raw:
        raise ConfigError(
            "settings: give the trial's settings as names and values, e.g. "
            '{"rrf_bm25_weight": 0.4}; a trial may set ' + ", ".join(TRIAL_SETTINGS)
        )
    checked: dict[str, Any] = {}
    for name, value in raw.items():
        name = str(name)
        shown = name[:60]
        if name not in _SCOPE_OF:
            raise ConfigError(
                f"setting {shown!r} is not a setting; a trial may set {', '.join(TRIAL_SETTINGS)}"
            )
        if name not in TRIAL_SETTINGS:
            raise ConfigError(
                f"setting {name!r} cannot be tried: it is a {_SCOPE_OF[name]} setting "
                f"({SCOPES[_SCOPE_OF[name]]}); a trial fuses the same searches again and may set "
                f"only {', '.join(TRIAL_SETTINGS)}"
            )
        checked[name] = _typed(name, value)
    return checked


def sweep_trials(trial: Mapping[str, Any], sweep: Any) -> list[dict[str, Any]]:
    """The trials of a sweep, each checked (``check_trial``): ``trial`` (the settings held fixed,
    possibly none) with each value of the one setting ``sweep`` names, in its order. The sub-query
    lists are searched once for all of them. Pure.

    Raises:
        ConfigError: a sweep of no setting or of several, fewer than 2 or more than
            ``MAX_SWEEP_VALUES`` values, a value given twice, a setting also held fixed, or a
            bad value (naming it).

    Example::

        sweep_trials({}, {"rrf_bm25_weight": "0.3, 0.5"})
        # [{'rrf_bm25_weight': 0.3}, {'rrf_bm25_weight': 0.5}]
    """
    if not isinstance(sweep, Mapping) or len(sweep) != 1:
        raise ConfigError(
            'sweep: name one setting and its values, e.g. {"rrf_bm25_weight": [0.3, 0.5, 0.7]}'
        )
    ((name, values),) = sweep.items()
    name = str(name)
    if isinstance(values, str):  # the command line's and a form's "0.3,0.5"
        values = [value.strip() for value in values.split(",")]
    if not isinstance(values, Sequence) or not 2 <= len(values) <= MAX_SWEEP_VALUES:
        raise ConfigError(f"sweep: give {name[:60]!r} 2 to {MAX_SWEEP_VALUES} values")
    if not isinstance(trial, Mapping) or name in trial:
        raise ConfigError(f"sweep: {name[:60]!r} is also given one value; sweep it or set it")
    trials = [check_trial({**trial, name: value}) for value in values]
    if len({repr(checked[name]) for checked in trials}) < len(trials):
        raise ConfigError(f"sweep: {name!r} is given a value twice")
    return trials


def trial_from_options(
    assignments: Sequence[str], sweep: str | None
) -> tuple[dict[str, Any], dict[str, str] | None]:
    """``loader judgments try``'s ``--set NAME=VALUE`` options and ``--sweep NAME=V1,V2``, as
    the trial and the sweep, checked (``check_trial``, ``sweep_trials``). Pure.

    Raises:
        ConfigError: neither option, one that is no ``NAME=VALUE``, or a bad setting or value.
    """
    trial: dict[str, Any] = {}
    swept = None
    for option, assignment in [*(("--set", a) for a in assignments), ("--sweep", sweep)]:
        if assignment is None:
            continue
        key, sep, value = assignment.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{option} {assignment!r}: give NAME=VALUE, e.g. rrf_bm25_weight=0.4")
        if option == "--sweep":
            swept = {key.strip(): value}
        else:
            trial[key.strip()] = value.strip()
    if not trial and swept is None:
        raise ConfigError("give --set NAME=VALUE or --sweep NAME=V1,V2 (see --help)")
    if swept is None:
        return check_trial(trial), None
    sweep_trials(trial, swept)
    return trial, swept


def best_trial(tables: Sequence[Mapping[str, Any]]) -> int:
    """Which of the trials' tables (``trial_table``) has the highest mean tried, the first of
    equals; 0 when none has a mean. Pure."""
    means = [table["means"]["trial"] for table in tables]
    scored = [index for index, mean in enumerate(means) if mean is not None]
    return max(scored, key=lambda index: (means[index], -index)) if scored else 0


def sweep_summary(
    name: str, trials: Sequence[Mapping[str, Any]], tables: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """A sweep as the answer shows it: per value of setting ``name`` its means and counts, and
    the best value (``best_trial``), whose table the answer carries. Pure."""
    values = [
        {"value": trial[name], "means": table["means"], "counts": table["counts"]}
        for trial, table in zip(trials, tables, strict=True)
    ]
    return {"setting": name, "values": values, "best": trials[best_trial(tables)][name]}


def _typed(name: str, value: Any) -> Any:
    """``value`` as setting ``name``'s type, checked against its bounds and choices."""
    default = getattr(Settings, name)
    if isinstance(default, str):
        if not isinstance(value, str) or value not in HYBRID_MODES:
            raise ConfigError(
                f"setting {name!r} of a trial must be one of {', '.join(HYBRID_MODES)} (a trial "
                f"fuses the hybrid template's sub-queries), got {str(value)[:60]!r}"
            )
        return value
    if isinstance(value, str):  # the command line's and a form's text
        with contextlib.suppress(ValueError):
            value = int(value) if isinstance(default, int) else float(value)
    wanted = "a whole number" if isinstance(default, int) else "a number"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"setting {name!r} of a trial must be {wanted}, got {value!r:.60}")
    if isinstance(default, int):
        if isinstance(value, float) and not value.is_integer():
            raise ConfigError(f"setting {name!r} of a trial must be {wanted}, got {value!r}")
        value = int(value)
    else:
        value = float(value)
    check_setting(name, value, "the trial")
    return value


def _float32(value: float) -> float:
    """``value`` as the 32-bit float OpenSearch's fusion computes and sorts by."""
    return struct.unpack("f", struct.pack("f", value))[0]


def fused_chunks(sides: Sequence[Sequence[SubHit]], fusion: Fusion) -> list[SubHit]:
    """The sub-query lists fused as ``fusion`` fuses them on the cluster: RRF by rank, else
    each list's scores normalised by the technique and combined by their weighted mean; best
    first, ties to the chunk first in the index. Pure."""
    weights = fusion.side_weights(len(sides))
    if fusion.by_rank:
        rankings = [[hit.chunk_id for hit in side] for side in sides]
        fused = rrf(rankings, rank_constant=fusion.rank_constant, weights=weights)
    else:
        if fusion.combination != "arithmetic_mean":
            raise ConfigError(
                f"fusion {fusion.technique}/{fusion.combination}: a trial combines by "
                "arithmetic_mean only, as the hybrid modes' pipelines do"
            )
        normalize = NORMALIZERS[fusion.technique]
        normalized = [normalize({hit.chunk_id: hit.score for hit in side}) for side in sides]
        fused = weighted_arithmetic_mean(normalized, weights)
    chunks: dict[str, SubHit] = {}
    for side in sides:
        for hit in side:
            chunks.setdefault(hit.chunk_id, hit)
    ordered = sorted(fused, key=lambda item: (-_float32(item[1]), chunks[item[0]].order))
    return [chunks[chunk_id] for chunk_id, _score in ordered]


def fused_sources(sides: Sequence[Sequence[SubHit]], fusion: Fusion, k: int = LIVE_K) -> list[str]:
    """The first ``k`` documents (sources) of the fused lists, one per document at its best
    chunk (the templates' ``collapse`` on ``doc_id``), as the live scores rank them. Pure."""
    documents: set[str] = set()
    sources: list[str] = []
    for hit in fused_chunks(sides, fusion):
        if hit.doc_id in documents:
            continue
        documents.add(hit.doc_id)
        if hit.source not in sources:  # eval's document_ranking: one per source
            sources.append(hit.source)
        if len(sources) == k:
            break
    return sources


def trial_table(
    questions: Sequence[str],
    graded: Sequence[Sequence[Mapping[str, Any]]],
    now: Sequence[Sequence[str]],
    tried: Sequence[Sequence[str]],
) -> dict[str, Any]:
    """Each question's nDCG@10 now and under the trial (both from the same ``graded``: per
    question its ``source`` / ``grade`` pairs), the delta and its direction, the means over the
    questions scored, and how many got better, worse or stayed. Pure."""
    rows = []
    pairs: list[tuple[float, float]] = []
    counts = {"better": 0, "worse": 0, "unchanged": 0}
    for number, (question, grades, before, after) in enumerate(
        zip(questions, graded, now, tried, strict=True)
    ):
        score_now, score_trial = ranking_score(before, grades), ranking_score(after, grades)
        delta = delta_of(score_now, score_trial)
        way = direction(delta)
        if way is not None:
            counts[way] += 1
            pairs.append((score_now, score_trial))  # type: ignore[arg-type]
        rows.append(
            {
                "number": number,
                "question": question,
                "now": score_now,
                "trial": score_trial,
                "delta": delta,
                "direction": way,
                "rankings": {"now": list(before), "trial": list(after)},
            }
        )
    mean_now = sum(a for a, _ in pairs) / len(pairs) if pairs else None
    mean_trial = sum(b for _, b in pairs) / len(pairs) if pairs else None
    means = {
        "now": mean_now,
        "trial": mean_trial,
        "delta": delta_of(mean_now, mean_trial),
        "questions": len(pairs),
    }
    return {"questions": rows, "means": means, "counts": counts}


def toml_lines(trial: Mapping[str, Any]) -> list[str]:
    """The ``loader.toml`` lines that would apply the trial (then ``loader apply``). Pure."""
    return [f"{name} = {toml_value(value)}" for name, value in trial.items()]


def fusion_summary(fusion: Fusion) -> dict[str, Any]:
    """A fusion as the trial's answer shows it."""
    summary = fusion.to_dict()
    if fusion.technique != RANK_FUSION:
        del summary["rank_constant"]
    return summary


def trial_lines(result: Mapping[str, Any]) -> list[str]:
    """A trial as ``loader judgments try`` prints it: a line per question (the worst loss
    first), the means and counts, and the lines to apply it. Pure."""
    lines = [f"mode now {result['mode_now']}, trial {result['mode_trial']}"]
    rows = sorted(
        result["questions"],
        key=lambda row: (row["delta"] is None, row["delta"] or 0.0, row["number"]),
    )
    for row in rows:
        if row["delta"] is None:
            lines.append(f"{row['number']:>4}  (not graded)      {row['question'][:60]}")
            continue
        arrow = {"better": "▲", "worse": "▼"}.get(row["direction"], "=")
        lines.append(
            f"{row['number']:>4}  {row['now']:.4f} -> {row['trial']:.4f} {arrow}"
            f"{abs(row['delta']):.4f}  {row['question'][:60]}"
        )
    means, counts = result["means"], result["counts"]
    if means["delta"] is None:
        lines.append("mean: no question graded above 0")
    else:
        lines.append(
            f"mean nDCG@10 {means['now']:.4f} -> {means['trial']:.4f} ({means['delta']:+.4f}) "
            f"over {means['questions']}: {counts['better']} better, {counts['worse']} worse, "
            f"{counts['unchanged']} unchanged"
        )
    lines.append("to apply it, in loader.toml (then `loader apply`):")
    lines.extend(f"  {line}" for line in result["toml"])
    return lines


def sweep_lines(result: Mapping[str, Any]) -> list[str]:
    """A sweep as ``loader judgments try --sweep`` prints it before the best value's trial: a
    line per value, its mean nDCG@10 against the served fusion's and the counts. Pure."""
    sweep = result["sweep"]
    lines = [f"sweep of {sweep['setting']} (mean nDCG@10 now {_figure(result['means']['now'])}):"]
    for row in sweep["values"]:
        means, counts = row["means"], row["counts"]
        best = "  <- best" if row["value"] == sweep["best"] else ""
        change = "" if means["delta"] is None else f" ({means['delta']:+.4f})"
        lines.append(
            f"  {sweep['setting']} = {toml_value(row['value'])}: {_figure(means['trial'])}{change}"
            f", {counts['better']} better, {counts['worse']} worse{best}"
        )
    lines.append(
        f"the best value, {sweep['setting']} = {toml_value(sweep['best'])}, question by question:"
    )
    return lines


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"
