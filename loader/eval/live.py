"""Live scores of a query set being judged (pure): a question's nDCG@10 per search mode from the
grades stored so far, computed exactly as ``loader eval`` computes it on the exported questions
file (the same ``document_ranking``, ``graded_qrels`` and ``ndcg_at_k``), and the set's mean.

A question none of whose results is graded above 0 has no score (``None``): ``loader eval``
leaves it out of the export, and out of the mean. A question's **spread** is its best mode's
score minus its worst: where the modes disagree most, a grade says most about which to serve.

Before any grade, **what to judge next**: where grades would most change what is served. With
a learned model served, ``ranking_difference`` of the model's top 10 documents and fusion's:
the share of DCG@10 weight that moves between the two orders, so a question the model leaves
as it is (nothing its grades could decide) comes last. Without one, ``mode_disagreement``, how
little the modes' top 10 documents overlap; a question the modes rank alike gains little from
grades, one they rank apart says which to serve.

Example::

    question_score(hits, [{"source": "refunds.md", "grade": 2}])   # 0.63
    spread({"bm25": 0.2, "vector": 0.9})                           # 0.7
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from loader.eval.judgments import graded_qrels
from loader.eval.metrics import document_ranking, ndcg_at_k

LIVE_K = 10  # nDCG@10, as `loader eval` reports it


def question_score(
    hits: Sequence[tuple[str, str, float]], judgments: Iterable[dict[str, Any]]
) -> float | None:
    """nDCG@10 of one mode's ``(chunk_id, source, score)`` hits (best first, one per document,
    as ``loader eval`` searches) against a question's ``judgments`` (``source``, ``grade``);
    ``None`` without a grade above 0. Pure."""
    return ranking_score([document for document, _score in document_ranking(hits)], judgments)


def ranking_score(ranking: Sequence[str], judgments: Iterable[dict[str, Any]]) -> float | None:
    """nDCG@10 of documents ranked best first (``top_documents``: what a snapshot stores)
    against a question's ``judgments``; ``None`` without a grade above 0. Pure."""
    qrels = graded_qrels(judgments)
    if not qrels:
        return None
    return ndcg_at_k(ranking, qrels, LIVE_K)


def spread(scores: Mapping[str, float | None]) -> float | None:
    """The best mode's score minus the worst's; ``None`` when no mode has a score. Pure."""
    known = [score for score in scores.values() if score is not None]
    return max(known) - min(known) if known else None


def mean_scores(per_question: Iterable[Mapping[str, float | None]]) -> dict[str, float | None]:
    """Each mode's mean over the questions that have a score, as ``loader eval``'s mean over the
    exported questions. Pure."""
    totals: dict[str, list[float]] = {}
    for scores in per_question:
        for mode, score in scores.items():
            bucket = totals.setdefault(mode, [])
            if score is not None:
                bucket.append(score)
    return {mode: (sum(v) / len(v) if v else None) for mode, v in totals.items()}


def top_documents(hits: Sequence[tuple[str, str, float]], k: int = LIVE_K) -> list[str]:
    """The first ``k`` documents of ``(chunk_id, source, score)`` hits, as eval ranks them."""
    return [document for document, _score in document_ranking(hits)][:k]


def mode_disagreement(rankings: Mapping[str, Sequence[str]]) -> float | None:
    """1 minus the mean overlap of every two modes' top documents (``|A & B| / max(|A|, |B|)``):
    0 when every mode returns the same documents, 1 when no two share one; ``None`` with fewer
    than two modes that found anything. Pure."""
    found = [set(ranking) for ranking in rankings.values() if ranking]
    overlaps = [
        len(a & b) / max(len(a), len(b)) for i, a in enumerate(found) for b in found[i + 1 :]
    ]
    return 1 - sum(overlaps) / len(overlaps) if overlaps else None


def _discount(rank: int | None, k: int) -> float:
    """DCG's weight of a document at ``rank`` (1 first), 0 below the first ``k`` or absent."""
    return 1 / math.log2(1 + rank) if rank is not None and rank <= k else 0.0


def ranking_difference(
    first: Sequence[str], second: Sequence[str], k: int = LIVE_K
) -> float | None:
    """How far two orders of documents differ in their first ``k``, rank-aware: the DCG weight
    that moves, ``sum |w(rank in first) - w(rank in second)|`` over the documents (``w(r) = 1 /
    log2(1 + r)``, 0 below ``k`` or absent), as a share of both orders' weight. 0 when the top
    ``k`` are the same documents in the same order, 1 when they share none; a swap at the top
    weighs more than one at the bottom. The moved weight bounds how far the two orders' DCG@k
    can differ under any binary grades, so a question with a small difference is one whose
    grades can barely change which order serves better. ``None`` when neither found anything.
    Pure.

    >>> ranking_difference(["a", "b"], ["a", "b"]), ranking_difference(["a"], ["b"])
    (0.0, 1.0)
    """
    ranks = [{doc: r for r, doc in enumerate(order[:k], 1)} for order in (first, second)]
    # fsum: the same figure whatever order the set yields the documents in, so two questions
    # that move alike tie exactly (and keep their order) in every process.
    total = math.fsum(_discount(r, k) for ranked in ranks for r in ranked.values())
    if not total:
        return None
    documents = set(ranks[0]) | set(ranks[1])
    moved = math.fsum(
        abs(_discount(ranks[0].get(d), k) - _discount(ranks[1].get(d), k)) for d in documents
    )
    return moved / total
