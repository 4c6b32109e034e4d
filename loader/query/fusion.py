"""Rank and score fusion as pure functions, beside the searchers (like pyserini's ``fusion``).

They reproduce, on the client, what OpenSearch's hybrid query does on the server, so runs can be
fused and evaluated offline and the two can be checked against each other.

``rrf`` is reciprocal rank fusion: a document scores ``sum(weight / (rank_constant + rank))`` over
the rankings that contain it, with 1-based ranks.

``min_max_normalize`` and ``weighted_arithmetic_mean`` mirror the ``normalization-processor``
(``min_max`` + ``arithmetic_mean``) of the neural-search plugin. Read from its source
(``MinMaxScoreNormalizationTechnique``, ``ScoreCombiner``,
``ArithmeticMeanScoreCombinationTechnique``) and the normalization-processor documentation:

- min-max is computed per sub-query over the documents *that sub-query returned*; when all its
  scores are equal every one becomes 1.0; a normalised score of exactly 0 is raised to 0.001 so
  the lowest returned document still beats a document the sub-query did not return;
- a document missing from a sub-query gets score 0.0 for it (the per-document score array is
  zero-filled), and 0.0 passes the ``score >= 0`` test, so its weight *stays* in the denominator:
  ``combined = sum(w_i * s_i) / sum(w_i)`` over all sub-queries (only negative scores, which
  min-max never produces, are skipped together with their weight);
- weights default to equal; the documentation asks for weights that sum to 1, so the division by
  ``sum(w_i)`` changes nothing in that case.

``z_score_normalize`` and ``l2_normalize`` mirror the other two normalisations of the processor
(``ZScoreNormalizationTechnique``, ``L2ScoreNormalizationTechnique``); ``NORMALIZERS`` maps
OpenSearch's technique names to them, for ``loader explain``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence

log = logging.getLogger(__name__)

DEFAULT_RANK_CONSTANT = 60
# OpenSearch's min_max floor (MinMaxScoreNormalizationTechnique.MIN_SCORE).
MIN_MAX_FLOOR = 0.001


def _check_weights(weights: Sequence[float] | None, count: int) -> list[float]:
    if weights is None:
        return [1.0] * count
    if len(weights) != count:
        raise ValueError(f"got {len(weights)} weights for {count} result lists; give one per list")
    if any(weight < 0 for weight in weights):
        raise ValueError(f"weights must not be negative, got {list(weights)}")
    return [float(weight) for weight in weights]


def _sorted_by_score(scores: dict[str, float]) -> list[tuple[str, float]]:
    # sorted() is stable and dicts keep insertion order, so ties stay in order of first appearance.
    return sorted(scores.items(), key=lambda item: -item[1])


def rrf(
    rankings: Sequence[Sequence[str]],
    rank_constant: int = DEFAULT_RANK_CONSTANT,
    weights: Sequence[float] | None = None,
) -> list[tuple[str, float]]:
    """Reciprocal rank fusion of ranked id lists.

    Args:
        rankings: id lists, best first; an id repeated within one list counts at its first rank.
        rank_constant: ``k`` in ``1 / (k + rank)``.
        weights: one multiplier per ranking (default 1 each).

    Returns:
        ``(id, score)`` pairs, best first; ties keep the order in which ids first appear
        (scanning the rankings in order).

    Example::

        rrf([["a", "b"], ["c", "d", "e", "a"]])
        # a: 1/61 + 1/64 = 0.0320, c: 1/61, b: 1/62 = 0.0161, d: 1/62, e: 1/63
    """
    weight_list = _check_weights(weights, len(rankings))
    scores: dict[str, float] = {}
    for ranking, weight in zip(rankings, weight_list, strict=True):
        seen: set[str] = set()
        rank = 0
        for doc_id in ranking:
            if doc_id in seen:
                continue
            seen.add(doc_id)
            rank += 1
            scores[doc_id] = scores.get(doc_id, 0.0) + weight / (rank_constant + rank)
    return _sorted_by_score(scores)


def min_max_normalize(
    scores: Mapping[str, float], floor: float = MIN_MAX_FLOOR
) -> dict[str, float]:
    """Rescale one sub-query's scores to [floor, 1] like OpenSearch's ``min_max`` technique.

    Args:
        scores: raw score per id, for the ids this sub-query returned.
        floor: value given to the minimum instead of 0 (OpenSearch uses 0.001); pass 0.0 for the
            textbook formula.

    Returns:
        Normalised score per id; all-equal scores (including a single one) become 1.0.
    """
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    if high == low:
        return dict.fromkeys(scores, 1.0)
    normalized = {}
    for doc_id, score in scores.items():
        value = (score - low) / (high - low)
        normalized[doc_id] = value if value != 0.0 else floor
    return normalized


def z_score_normalize(
    scores: Mapping[str, float], floor: float = MIN_MAX_FLOOR
) -> dict[str, float]:
    """Standardise one sub-query's scores like OpenSearch's ``z_score`` technique.

    ``(score - mean) / std`` over the documents the sub-query returned, with the *sample*
    standard deviation (commons-math ``DescriptiveStatistics``, bias-corrected: checked against
    a 3.6 node's fused scores); a z-score at or below 0 becomes ``floor``, so every returned
    document still beats one the sub-query missed. Two edge cases keep a raw score, as OpenSearch
    does: a score equal to the mean (a lone hit) becomes the sub-query's highest raw score, and
    with a standard deviation of 0 its lowest.

    Example::

        z_score_normalize({"a": 3.0, "b": 2.0, "c": 1.0})   # a: 1.0, b: raw 3.0, c: 0.001
    """
    if not scores:
        return {}
    values = list(scores.values())
    count = len(values)
    mean = sum(values) / count
    spread = sum((value - mean) ** 2 for value in values) / (count - 1) if count > 1 else 0.0
    std = math.sqrt(spread)
    high, low = max(values), min(values)
    normalized = {}
    for doc_id, score in scores.items():
        if score == mean:
            normalized[doc_id] = high
        elif std == 0.0:
            normalized[doc_id] = low
        else:
            z = (score - mean) / std
            normalized[doc_id] = z if z > 0.0 else floor
    return normalized


def l2_normalize(scores: Mapping[str, float]) -> dict[str, float]:
    """Divide one sub-query's scores by their L2 norm like OpenSearch's ``l2`` technique (0 when
    the norm is 0)."""
    norm = math.sqrt(sum(score * score for score in scores.values()))
    return {doc_id: (score / norm if norm else 0.0) for doc_id, score in scores.items()}


# OpenSearch's normalisation techniques (loader.modes.NORMALIZATIONS), by their names.
NORMALIZERS: dict[str, Callable[[Mapping[str, float]], dict[str, float]]] = {
    "min_max": min_max_normalize,
    "l2": l2_normalize,
    "z_score": z_score_normalize,
}


def weighted_arithmetic_mean(
    score_lists: Sequence[Mapping[str, float]],
    weights: Sequence[float] | None = None,
) -> list[tuple[str, float]]:
    """Combine (normalised) scores per id like OpenSearch's ``arithmetic_mean``.

    A document missing from a sub-query contributes 0 for it, with that sub-query's weight still
    in the denominator (see the module docstring for where this comes from).

    Args:
        score_lists: one ``{id: score}`` mapping per sub-query, usually min-max normalised.
        weights: one weight per sub-query (default equal).

    Returns:
        ``(id, score)`` pairs, best first; ties keep the order of first appearance.

    Example::

        weighted_arithmetic_mean([{"a": 1.0, "b": 0.5}, {"b": 1.0}], weights=[0.3, 0.7])
        # b: (0.3*0.5 + 0.7*1.0) / 1.0 = 0.85, a: (0.3*1.0 + 0.7*0) / 1.0 = 0.3
    """
    weight_list = _check_weights(weights, len(score_lists))
    ids: dict[str, None] = {}
    for scores in score_lists:
        ids.update(dict.fromkeys(scores))
    combined: dict[str, float] = {}
    for doc_id in ids:
        total = 0.0
        weight_sum = 0.0
        for scores, weight in zip(score_lists, weight_list, strict=True):
            score = scores.get(doc_id, 0.0)
            if score >= 0.0:  # OpenSearch skips negative scores, with their weight
                total += weight * score
                weight_sum += weight
        combined[doc_id] = total / weight_sum if weight_sum else 0.0
    return _sorted_by_score(combined)


def min_max_fusion(
    score_lists: Sequence[Mapping[str, float]],
    weights: Sequence[float] | None = None,
) -> list[tuple[str, float]]:
    """Min-max normalise each sub-query's scores, then combine them by weighted arithmetic mean.

    The client-side twin of a hybrid query with a ``min_max`` / ``arithmetic_mean`` pipeline.
    """
    return weighted_arithmetic_mean([min_max_normalize(s) for s in score_lists], weights)


def best_rank_per_document(hits: Sequence[tuple[str, str]]) -> list[str]:
    """Document ids ranked by their best chunk.

    Args:
        hits: ``(chunk_id, doc_id)`` pairs, best first.

    Returns:
        Each document id once, at the rank of its best (first) chunk.

    Example::

        best_rank_per_document([("d1#0", "d1"), ("d2#3", "d2"), ("d1#4", "d1")])  # ["d1", "d2"]
    """
    return list(dict.fromkeys(doc_id for _chunk_id, doc_id in hits))
