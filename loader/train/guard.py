"""The guard of `loader adapt`: the measure an adapted model must win on to be kept.

Both models rank the same passages for the same queries by cosine; a query's reciprocal rank is
1 over the rank of its right passage (0 below rank ``MRR_DEPTH``), their mean the MRR@10. The
queries are the held-out pairs (``Guard``: documents the model was not trained on), or, when the
tenant has them, judged questions (``JudgedQuestions``: what users ask, which pairs only imitate).
The gain is kept only when it is above the threshold with 95 % confidence: the lower bound of a
paired bootstrap over the queries (``gain_lower_bound``), and no kind of query got worse
(``kinds_worse``): a model that learnt one easy kind of pair, and lost on the others, is refused.

Example::

    guard = Guard(held_out_pairs, chunks, seed=0)
    stock, adapted = guard.reciprocal_ranks(stock_model), guard.reciprocal_ranks(adapted_model)
    gain_lower_bound(stock, adapted, seed=0)   # 0.013: better with 95 % confidence
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from loader.train.pairs import Chunk, Pair

if TYPE_CHECKING:
    from loader.models.embedding import Embedder

# The held-out measure ranks each query's positive among this many passages at most (its own
# documents' and others'): enough to tell the models apart, cheap to embed twice.
GUARD_POOL = 3000
GUARD_QUERIES = 600
MRR_DEPTH = 10
# The paired bootstrap of the gain: resamples of the held-out queries, and the one-sided level.
BOOTSTRAP_SAMPLES = 2000
CONFIDENCE = 0.95
# A kind with fewer held-out queries is shown but not judged alone: its mean moves with a few.
MIN_KIND_QUERIES = 20
JUDGED = "judged"  # the kind of every judged question


class Guard:
    """The held-out measure: each held-out query's positive ranked among the held-out passages
    and other chunks (``GUARD_POOL`` at most), by a model's cosine; MRR@10 over the queries.

    The chunks the queries were cut from are not among the others: each holds its query word
    for word (its sentence, or its heading and title in the prefix), so it would outrank the
    positive for both models and the measure would tell them apart on noise."""

    def __init__(self, held: list[Pair], chunks: list[Chunk], seed: int) -> None:
        rng = random.Random(seed)
        self.pairs = held if len(held) <= GUARD_QUERIES else rng.sample(held, GUARD_QUERIES)
        positives = list(dict.fromkeys(pair.positive for pair in self.pairs))
        tenants = {pair.tenant for pair in self.pairs}
        sources = {(pair.tenant, pair.chunk_id) for pair in self.pairs}
        others = [
            c.content
            for c in chunks
            if c.tenant in tenants
            and (c.tenant, c.chunk_id) not in sources
            and c.content not in positives
        ]
        room = max(0, GUARD_POOL - len(positives))
        self.passages = positives + (others if len(others) <= room else rng.sample(others, room))
        where = {text: i for i, text in enumerate(self.passages)}
        self.targets = np.array([where[pair.positive] for pair in self.pairs])
        self.kinds = [pair.kind for pair in self.pairs]
        self.measured_on = f"{len(self.pairs)} held-out pairs"

    def reciprocal_ranks(self, embedder: Embedder) -> np.ndarray:
        """Each query's reciprocal rank of its positive (0 below rank ``MRR_DEPTH``); their
        mean is the MRR@10."""
        queries = unit_rows(embedder.embed_queries([pair.query for pair in self.pairs]))
        passages = unit_rows(embedder.embed_passages(self.passages))
        scores = queries @ passages.T
        own = scores[np.arange(len(self.pairs)), self.targets]
        ranks = 1 + (scores > own[:, None]).sum(axis=1)
        return np.where(ranks <= MRR_DEPTH, 1.0 / ranks, 0.0)


class JudgedQuestions:
    """The judged measure: each judged question's documents ranked among the tenant's, by a
    model's best chunk of each document (as the search collapses on the document); a question's
    reciprocal rank is that of its best-ranked relevant document.

    ``questions`` are each a text and the sources judged relevant to it; a question none of whose
    sources is indexed for the tenant is left out (``skipped``). The passages are the relevant
    documents' chunks and others of the tenant, ``GUARD_POOL`` at most."""

    def __init__(
        self, questions: list[tuple[str, set[str]]], chunks: list[Chunk], seed: int
    ) -> None:
        indexed = {chunk.source for chunk in chunks}
        kept = [(text, sources & indexed) for text, sources in questions if sources & indexed]
        self.skipped = len(questions) - len(kept)
        self.queries = [text for text, _ in kept]
        wanted = set().union(*(sources for _, sources in kept))
        relevant = [chunk for chunk in chunks if chunk.source in wanted]
        others = [chunk for chunk in chunks if chunk.source not in wanted]
        room = max(0, GUARD_POOL - len(relevant))
        if len(others) > room:
            others = random.Random(seed).sample(others, room)
        pool = sorted(relevant + others, key=lambda chunk: chunk.source)  # a document's together
        self.passages = [chunk.content for chunk in pool]
        sources = [chunk.source for chunk in pool]
        self.starts = np.array([i for i, s in enumerate(sources) if i == 0 or s != sources[i - 1]])
        documents = [sources[i] for i in self.starts]
        self.relevant = np.array([[doc in sources for doc in documents] for _, sources in kept])
        self.kinds = [JUDGED] * len(self.queries)
        self.measured_on = f"{len(self.queries)} judged questions"

    def reciprocal_ranks(self, embedder: Embedder) -> np.ndarray:
        """Each question's reciprocal rank of its best relevant document (0 below rank
        ``MRR_DEPTH``)."""
        queries = unit_rows(embedder.embed_queries(self.queries))
        passages = unit_rows(embedder.embed_passages(self.passages))
        by_document = np.maximum.reduceat(queries @ passages.T, self.starts, axis=1)
        best = np.where(self.relevant, by_document, -np.inf).max(axis=1)
        above = np.where(self.relevant, -np.inf, by_document) > best[:, None]
        ranks = 1 + above.sum(axis=1)
        return np.where(ranks <= MRR_DEPTH, 1.0 / ranks, 0.0)


def by_kind(
    stock: np.ndarray, adapted: np.ndarray, kinds: list[str]
) -> dict[str, tuple[int, float, float]]:
    """Per kind of query: how many, the stock model's MRR and the adapted model's.

    >>> by_kind(np.array([1.0, 0.5, 0.0]), np.array([1.0, 1.0, 0.0]), ["title", "title", "cloze"])
    {'title': (2, 0.75, 1.0), 'cloze': (1, 0.0, 0.0)}
    """
    figures = {}
    for kind in dict.fromkeys(kinds):
        mask = np.array([each == kind for each in kinds])
        figures[kind] = (int(mask.sum()), float(stock[mask].mean()), float(adapted[mask].mean()))
    return figures


def kinds_worse(figures: dict[str, tuple[int, float, float]], floor: float = 0.0) -> list[str]:
    """The kinds (with ``MIN_KIND_QUERIES`` queries at least) whose MRR the adapted model
    lowered by more than ``-floor``: each is a reason to refuse it, whatever the others gained.

    >>> kinds_worse({"title": (400, 0.60, 0.70), "cloze": (40, 0.50, 0.45), "heading": (5, 1, 0)})
    ['cloze']
    """
    return [
        kind
        for kind, (queries, stock, adapted) in figures.items()
        if queries >= MIN_KIND_QUERIES and adapted - stock < floor
    ]


def read_judged(path: Path) -> list[tuple[str, set[str]]]:
    """The questions of a questions file (`loader judgments export`, or `loader eval`'s) with
    the sources judged relevant to each (grade above 0).

    Raises:
        InputError: the file is missing or a line is malformed (naming the line).
    """
    from loader.eval.datasets import load_questions
    from loader.eval.tasks import _question_qrels  # the one reading of a question's grades

    questions = []
    for question in load_questions(path):
        relevant = {source for source, grade in _question_qrels(question).items() if grade > 0}
        questions.append((question.question, relevant))
    return questions


@dataclass(frozen=True)
class Verdict:
    """What ``judge`` decided, and why."""

    adopted: bool
    stock_mrr: float
    adapted_mrr: float
    lower_bound: float  # the gain is above this with 95 % confidence
    reason: str
    kinds: dict[str, dict[str, float]]  # per kind of query: queries, stock_mrr, adapted_mrr


def judge(
    stock: np.ndarray, adapted: np.ndarray, kinds: list[str], min_gain: float, seed: int
) -> Verdict:
    """Keep the adapted model when its gain in MRR@10 over the stock model (the reciprocal
    ranks of the same queries, each of a kind) is above ``min_gain`` with 95 % confidence and
    no kind of query lost more than ``min_gain`` allows (``kinds_worse``: with the default 0,
    none may lose at all). Pure."""
    lower = gain_lower_bound(stock, adapted, seed)
    figures = by_kind(stock, adapted, kinds)
    worse = kinds_worse(figures, floor=min(min_gain, 0.0))
    adopted = lower > min_gain and not worse
    stock_mrr, adapted_mrr = float(stock.mean()), float(adapted.mean())
    verdict = "better than" if lower > min_gain else "not surely better than"
    reason = (
        f"MRR@{MRR_DEPTH} {adapted_mrr:.4f} adapted against {stock_mrr:.4f} stock "
        f"(gain {adapted_mrr - stock_mrr:+.4f}, above {lower:+.4f} with 95 % confidence): "
        f"{verdict} the stock model by more than {min_gain}"
    )
    if worse:
        reason += "; worse on " + ", ".join(
            f"{kind} ({figures[kind][1]:.4f} -> {figures[kind][2]:.4f})" for kind in worse
        )
    table = {
        kind: {"queries": n, "stock_mrr": round(s, 4), "adapted_mrr": round(a, 4)}
        for kind, (n, s, a) in figures.items()
    }
    return Verdict(adopted, stock_mrr, adapted_mrr, lower, reason, table)


def gain_lower_bound(
    stock: np.ndarray, adapted: np.ndarray, seed: int, confidence: float = CONFIDENCE
) -> float:
    """The one-sided lower bound, at ``confidence``, of the mean per-query gain of ``adapted``
    over ``stock``: the (1 - confidence) quantile (at 0.95, the 5th percentile) of the mean
    per-query difference over bootstrap resamples of the queries (paired: both are scored on
    the same resampled queries).

    >>> gain_lower_bound(np.array([0.5, 0.5, 1.0]), np.array([0.5, 0.5, 1.0]), seed=0)
    0.0
    """
    differences = adapted - stock
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(differences), size=(BOOTSTRAP_SAMPLES, len(differences)))
    return float(np.quantile(differences[picks].mean(axis=1), 1 - confidence))


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1: cosine, whatever the model's own normalisation."""
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
