"""The hard negatives of `loader adapt`: for each pair, the stock model's nearest chunks of other
documents of its tenant in the index, less those it scores nearly as high as the pair's own
passage (likely right answers, ``wrong_candidates``).

Example::

    examples, without = with_hard_negatives(pairs, stock, client, settings, 1, NEGATIVE_MARGIN)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from loader.train import defaults
from loader.train.guard import unit_rows
from loader.train.pairs import Pair
from loader.train.trainer import TrainingExample

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

    from loader.models.embedding import Embedder
    from loader.settings import Settings

# A chunk of another document that the stock model scores within 5 % of a pair's own passage is
# as likely another right answer as a wrong one; training it away teaches the model to push
# relevant passages apart. Such candidates are skipped (NV-Retriever's "TopK-PercPos", Moreira et
# al. 2024; sentence-transformers' mine_hard_negatives(relative_margin=0.05)). On SciFact every
# other document's chunk among the nearest was within it for 27 % (MiniLM) and 35 % (bge) of the
# pairs, which then learn from the rest of their batch alone.
NEGATIVE_MARGIN = defaults.NEGATIVE_MARGIN


def with_hard_negatives(
    pairs: list[Pair],
    embedder: Embedder,
    client: OpenSearch,
    settings: Settings,
    negatives: int,
    margin: float,
) -> tuple[list[TrainingExample], int]:
    """Each pair with the stock model's nearest chunks of other documents of its tenant, less
    those scored too close to the pair's own passage to be wrong (``wrong_candidates``); and how
    many pairs were left with none."""
    if negatives == 0:
        return [TrainingExample(pair.query, pair.positive) for pair in pairs], 0
    from loader.cluster.client import cluster_errors

    vectors = embedder.embed_queries([pair.query for pair in pairs])
    queries = unit_rows(vectors)
    positives = unit_rows(embedder.embed_passages([pair.positive for pair in pairs]))
    examples = []
    without = 0
    k = negatives + 10  # a document's own chunks come first; look past them
    for start in range(0, len(pairs), 100):
        batch = pairs[start : start + 100]
        lines: list[dict[str, Any]] = []
        for pair, vector in zip(batch, vectors[start : start + 100], strict=True):
            tenant = {"term": {"tenant": pair.tenant}}
            knn = {"vector": vector.tolist(), "k": k, "filter": tenant}
            lines += [{}, {"size": k, "_source": ["doc_id", "content", "embedding"],
                           "query": {"knn": {"embedding": knn}}}]  # fmt: skip
        with cluster_errors(settings, f"mining hard negatives from {settings.index_name!r}"):
            responses = client.msearch(index=settings.index_name, body=lines)["responses"]
        for i, (pair, response) in enumerate(zip(batch, responses, strict=True), start):
            hits = response.get("hits", {}).get("hits", [])
            others = [h["_source"] for h in hits if h["_source"]["doc_id"] != pair.doc_id]
            kept = []
            if others:
                found = np.array([source["embedding"] for source in others], dtype=np.float32)
                kept = wrong_candidates(queries[i], positives[i], unit_rows(found), margin)[
                    :negatives
                ]
            without += not kept
            negatives_of_pair = tuple(others[j]["content"] for j in kept)
            examples.append(TrainingExample(pair.query, pair.positive, negatives_of_pair))
    return examples, without


def wrong_candidates(
    query: np.ndarray, positive: np.ndarray, candidates: np.ndarray, margin: float
) -> list[int]:
    """Which ``candidates`` (rows, unit vectors, nearest first) can serve as the query's
    negatives: those whose cosine to ``query`` is below the positive's by at least ``margin`` of
    its magnitude (sentence-transformers' ``relative_margin``).

    >>> q, pos = np.array([1.0, 0.0]), np.array([0.8, 0.6])          # cosine 0.8
    >>> wrong_candidates(q, pos, np.array([[0.9, 0.436], [0.7, 0.714]]), 0.05)
    [1]
    """
    positive_score = float(query @ positive)
    ceiling = positive_score - abs(positive_score) * margin
    return [int(j) for j in np.flatnonzero(candidates @ query <= ceiling)]
