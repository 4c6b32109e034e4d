"""The guard of `loader adapt`: the measure an adapted model must win on to be kept.

Both models rank the same passages for the same queries by cosine; a query's reciprocal rank is
1 over the rank of its right passage (0 below rank ``MRR_DEPTH``), their mean the MRR@10. The
queries are the held-out pairs (``Guard``: documents the model was not trained on). The gain is
kept only when it is above the threshold with 95 % confidence: the lower bound of a paired
bootstrap over the queries (``gain_lower_bound``).

Example::

    guard = Guard(held_out_pairs, chunks, seed=0)
    stock, adapted = guard.reciprocal_ranks(stock_model), guard.reciprocal_ranks(adapted_model)
    gain_lower_bound(stock, adapted, seed=0)   # 0.013: better with 95 % confidence
"""

from __future__ import annotations

import random
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

    def reciprocal_ranks(self, embedder: Embedder) -> np.ndarray:
        """Each query's reciprocal rank of its positive (0 below rank ``MRR_DEPTH``); their
        mean is the MRR@10."""
        queries = unit_rows(embedder.embed_queries([pair.query for pair in self.pairs]))
        passages = unit_rows(embedder.embed_passages(self.passages))
        scores = queries @ passages.T
        own = scores[np.arange(len(self.pairs)), self.targets]
        ranks = 1 + (scores > own[:, None]).sum(axis=1)
        return np.where(ranks <= MRR_DEPTH, 1.0 / ranks, 0.0)


def gain_lower_bound(stock: np.ndarray, adapted: np.ndarray, seed: int) -> float:
    """The gain in mean reciprocal rank that the adapted model beats with 95 % confidence: the
    5th percentile of the mean per-query difference over bootstrap resamples of the queries
    (paired: both models are scored on the same resampled queries).

    >>> gain_lower_bound(np.array([0.5, 0.5, 1.0]), np.array([0.5, 0.5, 1.0]), seed=0)
    0.0
    """
    differences = adapted - stock
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(differences), size=(BOOTSTRAP_SAMPLES, len(differences)))
    return float(np.quantile(differences[picks].mean(axis=1), 1 - CONFIDENCE))


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1: cosine, whatever the model's own normalisation."""
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
