"""Judgments from clicks: graded (question, chunk) judgments from the query log's searches and
click events, corrected for position bias (``loader.train.click_export`` writes them as a
``questions`` file marked implicit).

The model is the position-based model (PBM) of the click-model literature, fitted by
expectation-maximisation: a result at rank r is clicked when it is examined (``examination[r]``,
the same for every question) and found attractive (the ``attractiveness`` of its question and
chunk). Why PBM: it is the standard answer to position bias and its estimate reads as a
probability; a cascade model would also assume that a reader scans the sources top down and stops
at the first click, which readers of a RAG answer, who open several sources, do not. Clicks over
expected clicks (COEC) is the same correction in one step, with the per-rank click-through rate
standing in for the fitted examination.

Identification: examination and attractiveness are told apart only by pairs shown at more than one
rank (spellings, rewrites, modes and a changing corpus reorder results; a small randomisation does
it on purpose). A rank that no such pair ties to rank 1 keeps its first guess, 1/rank, for the log
has no evidence either way: with one fixed ranking per question every rank does, and each estimate
is the chunk's click-through rate times its rank (clicks over expected clicks under a 1/rank
curve). ``ClickModel.varied_pairs`` counts the pairs seen at several ranks, ``identified`` the
ranks the log ties to the first.

The top rank is taken as always examined (``examination[0] == 1``), which fixes the model's one
free scale: an estimate reads as the chance a reader clicks the chunk when it is shown first.

Smoothing: each pair starts with ``prior_impressions`` (2) pseudo-impressions at the top rank and
an attractiveness of 0.1, below grade 1, so a chunk shown a few times gets no extreme estimate
(one click in one impression is 0.4, not 1.0) and a grade is earned by clicks; each rank's
examination starts with 10 pseudo-impressions at 1/rank, so a rank never clicked in a small log
does not read as never examined. Only pairs shown ``min_impressions`` (10) times are graded: 2
from an estimate of ``grade_2_at`` (0.5), 1 from ``grade_1_at`` (0.2), else 0.

Tenant isolation: an event counts only when its query is one of the tenant's searches (an event
naming another tenant's query id is ignored).

Example::

    impressions = impressions_from_log(queries, events, "acme")
    model = fit_position_model(impressions)
    judgments = click_judgments(model, ClickGrading(min_impressions=10))
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from loader.errors import ConfigError
from loader.query.query_log import normalize_question

MODEL_NAME = "pbm"
CLICK = "click"
# EM stops when no probability moves by more than this; _EDGE keeps each inside (0, 1).
TOLERANCE = 1e-7
_EDGE = 1e-6
EXAMINATION_PRIOR_IMPRESSIONS = 10.0
# Where the attractiveness prior's pseudo-impressions sit: below grade 1, so a grade is earned by
# clicks; the log's own mean would lift a chunk seen a few times and never clicked to grade 1.
PRIOR_ATTRACTIVENESS = 0.1

Pair = tuple[str, str]  # (normalised question, chunk id)


@dataclass(frozen=True)
class ClickGrading:
    """How clicks become grades; validates itself (``ConfigError`` naming the parameter)."""

    min_impressions: int = 10
    grade_1_at: float = 0.2
    grade_2_at: float = 0.5
    prior_impressions: float = 2.0
    max_iterations: int = 2000

    def __post_init__(self) -> None:
        if self.min_impressions < 1:
            raise ConfigError(f"min_impressions: must be at least 1, got {self.min_impressions}")
        if not 0 < self.grade_1_at < self.grade_2_at <= 1:
            raise ConfigError(
                f"grade_1_at, grade_2_at: need 0 < grade_1_at < grade_2_at <= 1, got "
                f"{self.grade_1_at} and {self.grade_2_at}"
            )
        if self.prior_impressions < 0:
            raise ConfigError(f"prior_impressions: must be 0 or more, got {self.prior_impressions}")
        if self.max_iterations < 1:
            raise ConfigError(f"max_iterations: must be at least 1, got {self.max_iterations}")

    def grade(self, estimate: float) -> int:
        return 2 if estimate >= self.grade_2_at else 1 if estimate >= self.grade_1_at else 0


@dataclass(frozen=True)
class Impression:
    """One logged search as its reader saw it: the question as asked, the chunk ids shown (best
    first) and those clicked."""

    question: str
    shown: tuple[str, ...]
    clicked: frozenset[str] = frozenset()


# --- the log to impressions (pure) --------------------------------------------------------------


def impressions_from_log(
    queries: Iterable[Mapping[str, Any]], events: Iterable[Mapping[str, Any]], tenant: str
) -> list[Impression]:
    """The tenant's searches (``ubi_queries`` sources) with their clicks (``ubi_events``
    sources), in the order of ``queries``. Pure.

    A query of another tenant is skipped, and so is an event whose query is not one of the
    tenant's searches. A click names its chunk by ``object_id`` (it must be among those shown) or,
    without one, by ``position.ordinal`` (1 is the first shown).
    """
    shown_by_id: dict[str, tuple[str, ...]] = {}
    asked_by_id: dict[str, str] = {}
    for query in queries:
        if _mapping(query.get("query_attributes")).get("tenant") != tenant:
            continue
        query_id = str(query.get("query_id") or "")
        question = str(query.get("user_query") or "")
        hit_ids = query.get("query_response_hit_ids")
        shown = tuple(dict.fromkeys(map(str, hit_ids if isinstance(hit_ids, list) else [])))
        if query_id and shown and normalize_question(question):
            shown_by_id[query_id] = shown
            asked_by_id[query_id] = question
    clicked: dict[str, set[str]] = defaultdict(set)
    for event in events:
        attributes = _mapping(event.get("event_attributes"))
        if event.get("action_name") != CLICK or attributes.get("tenant") != tenant:
            continue
        query_id = str(event.get("query_id") or "")
        chunk_id = _clicked_chunk(attributes, shown_by_id.get(query_id, ()))
        if chunk_id:
            clicked[query_id].add(chunk_id)
    return [
        Impression(asked_by_id[query_id], shown, frozenset(clicked.get(query_id, ())))
        for query_id, shown in shown_by_id.items()
    ]


def _clicked_chunk(attributes: Mapping[str, Any], shown: tuple[str, ...]) -> str:
    """The shown chunk an event's attributes name, or ``""``."""
    object_id = str(_mapping(attributes.get("object")).get("object_id") or "")
    if object_id:
        return object_id if object_id in shown else ""
    ordinal = _mapping(attributes.get("position")).get("ordinal")
    if isinstance(ordinal, int) and not isinstance(ordinal, bool) and 1 <= ordinal <= len(shown):
        return shown[ordinal - 1]
    return ""


def _mapping(value: object) -> Mapping[str, Any]:
    """``value`` when it is an object; ``{}`` for what a hand-written log entry may hold instead."""
    return value if isinstance(value, Mapping) else {}


# --- the position-based model (pure) ------------------------------------------------------------


@dataclass
class ClickModel:
    """A fitted PBM: examination per rank (index 0 is rank 1), and per pair its attractiveness,
    impressions and clicks."""

    examination: list[float]
    attractiveness: dict[Pair, float]
    impressions: dict[Pair, int]
    clicks: dict[Pair, int]
    varied_pairs: int
    iterations: int
    # Per rank: whether the log ties it to rank 1 (else its examination is the first guess).
    identified: list[bool]


def fit_position_model(
    impressions: Iterable[Impression], prior_impressions: float = 2.0, max_iterations: int = 2000
) -> ClickModel:
    """Fit the position-based model to ``impressions`` by EM (see the module's docstring). Pure.

    Example::

        model = fit_position_model(impressions_from_log(queries, events, "acme"))
        model.attractiveness["how long do refunds take", chunk_id]
    """
    cells = _Cells.of(impressions)
    if not cells.pairs:
        return ClickModel([], {}, {}, {}, varied_pairs=0, iterations=0, identified=[])
    examination = first_guess(cells.depth)
    identified = cells.identified_ranks()
    # Started from clicks over expected clicks under that first guess: EM moves slowly for
    # chunks rarely examined (deep ranks), and a neutral start would stay near where it began.
    attractiveness = _clamp(
        cells.per_pair(cells.clicked) / cells.per_pair(cells.shown * examination[cells.rank])
    )
    iterations = 0
    for iterations in range(1, max_iterations + 1):  # noqa: B007 - reported after the loop
        new_attractiveness, new_examination = _em_step(
            cells, attractiveness, examination, prior_impressions
        )
        new_examination = np.where(identified, new_examination, examination)
        moved = max(
            np.abs(new_attractiveness - attractiveness).max(initial=0.0),
            np.abs(new_examination - examination).max(initial=0.0),
        )
        attractiveness, examination = new_attractiveness, new_examination
        if moved < TOLERANCE:
            break
    impressions_of = cells.per_pair(cells.shown)
    clicks_of = cells.per_pair(cells.clicked)
    return ClickModel(
        examination=[float(e) for e in examination],
        attractiveness={
            pair: float(a) for pair, a in zip(cells.pairs, attractiveness, strict=True)
        },
        impressions={pair: int(n) for pair, n in zip(cells.pairs, impressions_of, strict=True)},
        clicks={pair: int(n) for pair, n in zip(cells.pairs, clicks_of, strict=True)},
        varied_pairs=int((np.bincount(cells.pair, minlength=len(cells.pairs)) > 1).sum()),
        iterations=iterations,
        identified=[bool(flag) for flag in identified],
    )


@dataclass(frozen=True)
class _Cells:
    """The log as arrays, one entry per (pair, rank) it holds: the pair's index in ``pairs``, the
    rank (0 is the first), the times it was shown there and clicked there."""

    pairs: list[Pair]
    pair: np.ndarray
    rank: np.ndarray
    shown: np.ndarray
    clicked: np.ndarray

    @classmethod
    def of(cls, impressions: Iterable[Impression]) -> _Cells:
        counts: dict[tuple[Pair, int], list[int]] = defaultdict(lambda: [0, 0])
        for impression in impressions:
            question = normalize_question(impression.question)
            for rank, chunk_id in enumerate(impression.shown):
                cell = counts[(question, chunk_id), rank]
                cell[0] += 1
                cell[1] += chunk_id in impression.clicked
        keys = sorted(counts)
        pairs = sorted({pair for pair, _ in keys})
        number = {pair: n for n, pair in enumerate(pairs)}
        return cls(
            pairs,
            np.array([number[pair] for pair, _ in keys], dtype=np.int64),
            np.array([rank for _, rank in keys], dtype=np.int64),
            np.array([counts[key][0] for key in keys], dtype=np.float64),
            np.array([counts[key][1] for key in keys], dtype=np.float64),
        )

    @property
    def depth(self) -> int:
        return int(self.rank.max(initial=0)) + 1

    def identified_ranks(self) -> np.ndarray:
        """Per rank, whether pairs shown at several ranks chain it to rank 1 (whose examination
        is 1): only then do the clicks tell its examination from its chunks' attractiveness."""
        group = list(range(self.depth))

        def root(rank: int) -> int:
            while group[rank] != rank:
                group[rank] = group[group[rank]]
                rank = group[rank]
            return rank

        first_rank: dict[int, int] = {}
        for pair, rank in zip(self.pair.tolist(), self.rank.tolist(), strict=True):
            seen = first_rank.setdefault(pair, rank)
            group[root(rank)] = root(seen)
        return np.array([root(rank) == root(0) for rank in range(self.depth)])

    def per_pair(self, values: np.ndarray) -> np.ndarray:
        return np.bincount(self.pair, weights=values, minlength=len(self.pairs))

    def per_rank(self, values: np.ndarray) -> np.ndarray:
        return np.bincount(self.rank, weights=values, minlength=self.depth)


def _clamp(probabilities: np.ndarray) -> np.ndarray:
    return np.clip(np.nan_to_num(probabilities), _EDGE, 1.0 - _EDGE)


def _em_step(
    cells: _Cells, attractiveness: np.ndarray, examination: np.ndarray, prior_impressions: float
) -> tuple[np.ndarray, np.ndarray]:
    """One EM step. A click means examined and attractive; a result not clicked was attractive
    with probability a(1-e)/(1-ae) and examined with e(1-a)/(1-ae)."""
    a, e = attractiveness[cells.pair], examination[cells.rank]
    missed = (cells.shown - cells.clicked) / (1.0 - a * e)
    attractive = cells.per_pair(cells.clicked + missed * a * (1.0 - e))
    new_attractiveness = _clamp(
        (attractive + prior_impressions * PRIOR_ATTRACTIVENESS)
        / (cells.per_pair(cells.shown) + prior_impressions)
    )
    # The examination's own prior, at the first guess: a rank where nothing was ever clicked in
    # a small log stays examined a little, so its chunks' estimates keep their evidence.
    examined = cells.per_rank(cells.clicked + missed * e * (1.0 - a))
    new_examination = _clamp(
        (examined + EXAMINATION_PRIOR_IMPRESSIONS * first_guess(cells.depth))
        / (cells.per_rank(cells.shown) + EXAMINATION_PRIOR_IMPRESSIONS)
    )
    new_examination[0] = 1.0
    return new_attractiveness, new_examination


def first_guess(depth: int) -> np.ndarray:
    """The examination curve EM starts from, and keeps where the log cannot tell: 1/rank."""
    return 1.0 / np.arange(1, depth + 1)


def click_through_rates(impressions: Iterable[Impression]) -> dict[Pair, float]:
    """Raw clicks per impression of each pair, blind to rank: what the model corrects. Pure."""
    shown: Counter[Pair] = Counter()
    clicked: Counter[Pair] = Counter()
    for impression in impressions:
        question = normalize_question(impression.question)
        for chunk_id in impression.shown:
            shown[question, chunk_id] += 1
            clicked[question, chunk_id] += chunk_id in impression.clicked
    return {pair: clicked[pair] / count for pair, count in shown.items()}


# --- grades (pure) ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClickJudgment:
    """The grade of one (normalised question, chunk), with the estimate and counts behind it."""

    question: str
    chunk_id: str
    grade: int
    estimate: float
    impressions: int
    clicks: int


def click_judgments(model: ClickModel, grading: ClickGrading) -> list[ClickJudgment]:
    """The pairs shown at least ``grading.min_impressions`` times, graded. Pure."""
    return [
        ClickJudgment(
            question,
            chunk_id,
            grading.grade(estimate),
            estimate,
            model.impressions[question, chunk_id],
            model.clicks[question, chunk_id],
        )
        for (question, chunk_id), estimate in sorted(model.attractiveness.items())
        if model.impressions[question, chunk_id] >= grading.min_impressions
    ]
