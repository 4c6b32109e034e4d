"""`loader eval --tune`: which settings are best for this data, found on a train split, checked
on the test split.

The search is coordinate descent from the current settings, one setting at a time in the order
of ``TUNE_SPACE`` (query-time settings first: they cost a search per query; chunking last: each
value costs an index), keeping a value only when it beats the best so far on the gated metric
(nDCG@10 unless told) -- "change one thing, keep it only if the numbers move". At most ``budget``
configurations are measured on the train split; an index is pushed once per combination of the
settings in ``loader.eval.configs.INDEX_SETTINGS`` and reused by every configuration that only
changes query or pipeline settings (the pipelines are re-applied in place). The winner and the
starting settings are then both measured on the test split.

``write_winner`` puts the winning values into ``loader.toml`` line by line
(``loader.eval.toml_edit``), after showing the diff.

Example::

    result = tune_settings(TuneRequest("datasets/scifact", budget=8), settings)
    result.winner, result.test["winner"]["ndcg@10"], result.test["start"]["ndcg@10"]
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loader.errors import ConfigError
from loader.eval.compare import check_gate_metrics
from loader.eval.configs import (
    INDEX_SETTINGS,
    EvalConfig,
    check_values,
    name_part,
    parse_sweep,
)
from loader.eval.runner import run_configuration
from loader.eval.tasks import EvalTask, load_task
from loader.eval.toml_edit import edit_toml, toml_diff
from loader.models.registry import effective_prefixes
from loader.modes import HYBRID_MODES, modes_tuning
from loader.resolve import CONFIG_FILE_NAME
from loader.settings import KEYWORD_RERANK, Settings, check_choice
from loader.userfile import read_user_text

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

log = logging.getLogger(__name__)

# What is searched, in the order it is tried, and the values tried for each.
TUNE_SPACE: dict[str, tuple[Any, ...]] = {
    "search_mode": HYBRID_MODES,
    "query_instruction": (True, False),  # skipped for a model without one
    "rrf_rank_constant": (10, 20, 60, 100),
    "bm25_weight": (0.1, 0.3, 0.5, 0.7),
    "rrf_bm25_weight": (0.4, 0.5, 0.6),
    "candidates": (20, 50, 100),
    "chunk_strategy": ("structure", "recursive", "fixed"),
    "chunk_target_tokens": (120, 180, 256),
    "chunk_overlap_tokens": (0, 27, 54),
}
# Tried after the fusion settings when the searches rerank by keyword (``keyword_reranks``).
KEYWORD_SPACE: dict[str, tuple[Any, ...]] = {"keyword_rerank_weight": (0.1, 0.2, 0.3, 0.5)}
DEFAULT_BUDGET = 12
DEFAULT_TUNE_METRIC = "ndcg@10"
_EPSILON = 1e-9


@dataclass(frozen=True)
class TuneRequest:
    """One ``loader eval --tune``: the dataset, the splits, the budget and the space."""

    dataset: str | Path
    train_split: str = "train"
    test_split: str = "test"
    budget: int = DEFAULT_BUDGET
    metric: str = DEFAULT_TUNE_METRIC
    space: tuple[str, ...] = ()  # "SETTING=V1,V2" each; empty: TUNE_SPACE
    limit: int | None = None
    index_prefix: str = "eval"


@dataclass
class Trial:
    """One configuration measured on the train split."""

    values: dict[str, Any]
    metrics: dict[str, float]
    kept: bool = False


@dataclass
class TuneResult:
    """What the tuning tried, what won, and both on the test split."""

    metric: str
    start: dict[str, Any]
    winner: dict[str, Any]
    trials: list[Trial] = field(default_factory=list)
    test: dict[str, dict[str, float]] = field(default_factory=dict)  # "start"/"winner" -> metrics
    indexes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def changes(self) -> dict[str, Any]:
        """The winning values that differ from the starting ones."""
        return {name: v for name, v in self.winner.items() if self.start.get(name) != v}

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "start": self.start,
            "winner": self.winner,
            "changes": self.changes,
            "trials": [vars(trial) for trial in self.trials],
            "test": self.test,
            "indexes": self.indexes,
            "seconds": round(self.seconds, 3),
        }


def keyword_reranks(*, rerank: str, rerank_backend: str) -> bool:
    """Whether the settings' searches rerank by keyword: then tuning measures with that rerank
    (it costs no model) and tries ``keyword_rerank_weight``; a cross-encoder's rerank is left
    out of tuning, as it always was (minutes per configuration)."""
    return rerank_backend == KEYWORD_RERANK and rerank != "off"


def parse_space(texts: Sequence[str], settings: Settings) -> dict[str, tuple[Any, ...]]:
    """``["bm25_weight=0.2,0.5", "search_mode=hybrid-rrf,hybrid-minmax"]`` -> typed values;
    none: ``TUNE_SPACE`` (without ``query_instruction`` for a model that has none; with
    ``KEYWORD_SPACE`` before ``candidates`` when the searches rerank by keyword).

    Raises:
        ConfigError: naming ``--space``: an unknown setting, a bad value, or a value the setting
            (or the chunking configuration) refuses with the other current settings;
            ``keyword_rerank_weight`` without the keyword reranker.
    """
    if not texts:
        space = dict(TUNE_SPACE)
        if not effective_prefixes(settings.replace(query_instruction=True))[0]:
            del space["query_instruction"]  # the model has none to leave out
        if keyword_reranks(rerank=settings.rerank, rerank_backend=settings.rerank_backend):
            names = list(space)
            cut = names.index("candidates")
            space = {
                **{name: space[name] for name in names[:cut]},
                **KEYWORD_SPACE,
                **{name: space[name] for name in names[cut:]},
            }
        return space
    space: dict[str, tuple[Any, ...]] = {}
    for text in texts:
        name, _, raw = text.partition("=")
        name = name.strip()
        if name in ("search_mode", "chunk_strategy"):  # own options of eval, tunable here
            values = tuple(dict.fromkeys(v.strip() for v in raw.split(",") if v.strip()))
            for value in values:
                check_choice(name, value, f"--space {text!r}")
            if not values:
                raise ConfigError(f"--space {text!r}: give at least one value after '='")
            check_values(name, values, settings, "--space")
        else:
            values = parse_sweep(text, settings, option="--space").values
        if name == "keyword_rerank_weight" and not keyword_reranks(
            rerank=settings.rerank, rerank_backend=settings.rerank_backend
        ):
            raise ConfigError(
                f"--space {text!r}: keyword_rerank_weight changes nothing unless "
                'rerank_backend = "keyword" and rerank is not off'
            )
        space[name] = values
    return space


def _index_alias(prefix: str, dataset: str, settings: Settings) -> str:
    """One alias per combination of index-side settings: configurations that differ only in
    query or pipeline settings share it."""
    index_values = repr(sorted((name, getattr(settings, name)) for name in INDEX_SETTINGS))
    digest = hashlib.sha1(index_values.encode()).hexdigest()[:10]
    return f"{prefix}-{name_part(dataset)}-tune-{name_part(settings.chunk_strategy)}-{digest}"


@dataclass
class _Measurer:
    """Measures configurations on one task, pushing each index once."""

    task: EvalTask
    client: OpenSearch
    index_prefix: str
    pushed: dict[str, None] = field(default_factory=dict)

    def measure(self, settings: Settings) -> dict[str, float]:
        from loader.index.apply import apply_config
        from loader.ingest.sync import sync_documents
        from loader.models.embedding import embedder_for

        alias = _index_alias(self.index_prefix, self.task.name, settings)
        settings = settings.replace(index_name=alias)
        embedder = embedder_for(settings)
        apply_config(settings, dimension=embedder.dimension, client=self.client)  # idempotent
        if alias not in self.pushed:
            sync_documents(
                self.task.documents(),
                settings,
                collection=name_part(self.task.name),
                tenant=self.task.tenant,
                client=self.client,
                embedder=embedder,
            )
            self.pushed[alias] = None
        config = EvalConfig(
            settings.chunk_strategy,
            settings.search_mode,
            keyword_reranks(rerank=settings.rerank, rerank_backend=settings.rerank_backend),
        )
        result = run_configuration(
            self.task, config, settings, candidates=settings.candidates, client=self.client
        )
        return result.metrics


def _candidates(
    best: Mapping[str, Any], space: Mapping[str, tuple[Any, ...]], mode: str | None = None
) -> list[dict]:
    """The next configurations of the descent: each other value of each setting, in order.

    A setting some modes' records list as theirs (``loader.modes.modes_tuning``: a pipeline's
    parameters) is tried only when the search mode is one of them: the best values'
    ``search_mode`` when the space tunes it, else ``mode`` (the settings' mode); with neither
    known, nothing is skipped.
    """
    mode = best.get("search_mode", mode)
    tried = []
    for name, values in space.items():
        owners = modes_tuning(name)
        if mode is not None and owners and mode not in owners:
            continue
        tried.extend({**best, name: value} for value in values if value != best[name])
    return tried


def _descend(
    measure: Callable[[dict[str, Any]], dict[str, float]],
    start: dict[str, Any],
    space: Mapping[str, tuple[Any, ...]],
    metric: str,
    budget: int,
    mode: str | None = None,
) -> tuple[dict[str, Any], list[Trial]]:
    """Coordinate descent within ``budget`` measurements; the best values and every trial.

    ``mode`` is the search mode when ``search_mode`` is not in the space (see ``_candidates``).
    """
    best = dict(start)
    trials = [Trial(dict(best), measure(best), kept=True)]
    if metric not in trials[0].metrics:
        known = ", ".join(sorted(trials[0].metrics))
        raise ConfigError(f"--gate-metric {metric!r} is not measured; one of: {known}")
    best_score = trials[0].metrics[metric]
    for name in space:
        for values in _candidates(best, {name: space[name]}, mode):
            if len(trials) >= budget:
                return best, trials
            metrics = measure(values)
            trial = Trial(values, metrics)
            trials.append(trial)
            if metrics[metric] > best_score + _EPSILON:
                best, best_score, trial.kept = dict(values), metrics[metric], True
    return best, trials


def tune_settings(
    request: TuneRequest,
    settings: Settings,
    *,
    client: OpenSearch | None = None,
    on_event: Callable[[str], None] | None = None,
) -> TuneResult:
    """Tune on the train split within the budget, then measure the start and the winner on the
    test split.

    Raises:
        ConfigError: a bad budget, metric or space; a dataset that is not a BEIR folder.
        InputError: the dataset or a split is missing.
        ClusterError, ModelError: as raised by apply, push and search.
    """
    from loader.cluster.client import connect

    started = time.perf_counter()
    notify = on_event or (lambda line: None)
    if request.budget < 1:
        raise ConfigError(f"--budget must be at least 1, got {request.budget}")
    if not Path(request.dataset).is_dir():
        raise ConfigError(f"--tune needs a BEIR folder with a {request.train_split} split")
    check_gate_metrics([request.metric], settings.top_k)
    space = parse_space(request.space, settings)
    client = client or connect(settings)
    start = {name: getattr(settings, name) for name in space}

    def measurer(split: str) -> Callable[[dict[str, Any]], dict[str, float]]:
        task = load_task(request.dataset, split=split, limit=request.limit)
        run = _Measurer(task, client, request.index_prefix)
        measured = measurers.setdefault(split, run)

        def measure(values: dict[str, Any]) -> dict[str, float]:
            key = (split, repr(sorted(values.items())))
            if key in seen:  # the same split and values: the same numbers
                return seen[key]
            metrics = seen[key] = measured.measure(settings.replace(**values))
            notify(
                f"{split}: {_shown(values, start)}: {request.metric} "
                f"{metrics.get(request.metric, 0.0):.4f}"
            )
            return metrics

        return measure

    measurers: dict[str, _Measurer] = {}
    seen: dict[tuple[str, str], dict[str, float]] = {}
    train = measurer(request.train_split)
    winner, trials = _descend(
        train, start, space, request.metric, request.budget, mode=settings.search_mode
    )
    test = measurer(request.test_split)
    result = TuneResult(request.metric, start, winner, trials)
    result.test["start"] = test(start)
    result.test["winner"] = result.test["start"] if winner == start else test(winner)
    result.indexes = sorted({alias for m in measurers.values() for alias in m.pushed})
    result.seconds = time.perf_counter() - started
    return result


def _shown(values: Mapping[str, Any], start: Mapping[str, Any]) -> str:
    changed = [f"{name}={value}" for name, value in values.items() if start.get(name) != value]
    return ", ".join(changed) or "the starting settings"


def toml_change(result: TuneResult, config_path: str | Path | None) -> tuple[Path, str, list[str]]:
    """``loader.toml`` (or ``config_path``) with the winning values: the file, its new text and
    the diff. Only the changed settings' lines change; a missing file would be created."""
    path = Path(config_path) if config_path else Path(CONFIG_FILE_NAME)
    before = read_user_text(path, "config file") if path.exists() else ""
    after = edit_toml(before, result.changes)
    return path, after, toml_diff(before, after, str(path))


def write_winner(result: TuneResult, config_path: str | Path | None) -> tuple[Path, list[str]]:
    """Write the winning values (see ``toml_change``); the file and the diff written."""
    path, after, diff = toml_change(result, config_path)
    if diff:
        path.write_text(after, encoding="utf-8")
    return path, diff


def render_tune(result: TuneResult) -> str:
    """The trials on the train split, then the start and the winner on the test split, as
    Markdown tables."""
    from loader.eval.report import REPORT_METRICS, markdown_table

    trials = [
        [
            str(number),
            _shown(trial.values, result.start),
            f"{trial.metrics[result.metric]:.4f}",
            "kept" if trial.kept else "",
        ]
        for number, trial in enumerate(result.trials, start=1)
    ]
    train = markdown_table(["#", "train: changed", result.metric, ""], trials, numeric=range(2, 3))
    rows = [
        [label, *(f"{result.test[key].get(name, 0.0):.4f}" for name in REPORT_METRICS)]
        for label, key in (
            ("start", "start"),
            (f"winner: {_shown(result.winner, result.start)}", "winner"),
        )
    ]
    test = markdown_table(
        ["test", *REPORT_METRICS], rows, numeric=range(1, 1 + len(REPORT_METRICS))
    )
    return (
        f"{len(result.trials)} configurations on train, {len(result.indexes)} indexes, "
        f"{result.seconds:.1f} s\n\n{train}\n\n{test}"
    )
