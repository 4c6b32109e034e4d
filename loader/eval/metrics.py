"""Retrieval metrics as pure functions: recall@k, MRR@k, nDCG@k, and their average over a run.

Conventions follow BEIR / pytrec_eval so numbers can be compared with other tools:

- ``relevant`` maps document ids to graded relevance; a grade of 0 (or less) means "not relevant";
- a ranked list is read after dropping repeated ids (only the first occurrence counts), so a run
  that returns several chunks of one document is not rewarded twice for it;
- nDCG uses the grade as gain and a ``log2(rank + 1)`` discount (pytrec_eval's ``ndcg_cut``).

Example::

    run = {"q1": ["d3", "d1", "d2"]}
    qrels = {"q1": {"d1": 1, "d2": 2}}
    evaluate_run(run, qrels, ks=(1, 3))["recall@3"]   # 1.0

From search hits to scores (what ``loader eval`` measures for each configuration):
``document_ranking`` ranks each document at its best chunk, ``section_ranking`` gives the chunks
under a question's expected heading one id, ``score_run`` scores both (``section_*`` metrics), and
``latency_summary`` gives p50 / p95 / mean latency.
"""

from __future__ import annotations

import functools
import logging
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from loader.documents import PATH_SEPARATOR
from loader.query.fusion import best_rank_per_document

if TYPE_CHECKING:
    from loader.eval.tasks import EvalQuery

log = logging.getLogger(__name__)

DEFAULT_KS = (1, 5, 10, 50, 100)
SECTION_PREFIX = "section_"
# The id a chunk under the question's expected heading gets in the section-level run.
_SECTION_MATCH = "\x00match"


def _first_k_unique(ranked_ids: Iterable[str], k: int) -> list[str]:
    """The first ``k`` distinct ids, in order (repeats after the first occurrence are ignored)."""
    seen: set[str] = set()
    unique: list[str] = []
    for doc_id in ranked_ids:
        if len(unique) >= k:
            break
        if doc_id not in seen:
            seen.add(doc_id)
            unique.append(doc_id)
    return unique


def _positive(relevant: Mapping[str, int]) -> dict[str, int]:
    return {doc_id: grade for doc_id, grade in relevant.items() if grade > 0}


def recall_at_k(ranked_ids: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    """Share of the relevant documents found in the first ``k`` results.

    Args:
        ranked_ids: document ids, best first.
        relevant: graded relevance per document id; grades <= 0 are not relevant.
        k: cut-off.

    Returns:
        A value in [0, 1]; 0 when the query has no relevant document.
    """
    positive = _positive(relevant)
    if not positive:
        return 0.0
    found = sum(1 for doc_id in _first_k_unique(ranked_ids, k) if doc_id in positive)
    return found / len(positive)


def reciprocal_rank(ranked_ids: Sequence[str], relevant: Mapping[str, int], k: int = 10) -> float:
    """``1 / rank`` of the first relevant document within the first ``k`` results, else 0.

    Averaged over queries this is MRR@k.
    """
    positive = _positive(relevant)
    for rank, doc_id in enumerate(_first_k_unique(ranked_ids, k), start=1):
        if doc_id in positive:
            return 1.0 / rank
    return 0.0


def _dcg(gains: Iterable[float]) -> float:
    # rank i (1-based) is discounted by log2(i + 1): rank 1 by 1, rank 2 by log2(3), ...
    return sum(gain / math.log2(rank + 1) for rank, gain in enumerate(gains, start=1))


def ndcg_at_k(ranked_ids: Sequence[str], relevant: Mapping[str, int], k: int = 10) -> float:
    """Normalised discounted cumulative gain at ``k`` with graded relevance.

    ``DCG = sum(rel_i / log2(i + 1))`` over the first ``k`` results; the ideal DCG sorts the
    query's relevant grades in decreasing order.

    Example::

        ndcg_at_k(["a", "b"], {"a": 1, "b": 2}, k=2)
        # DCG = 1/1 + 2/log2(3) = 2.2619; IDCG = 2/1 + 1/log2(3) = 2.6309 -> 0.8597
    """
    positive = _positive(relevant)
    if not positive:
        return 0.0
    gains = [positive.get(doc_id, 0) for doc_id in _first_k_unique(ranked_ids, k)]
    ideal = sorted(positive.values(), reverse=True)[:k]
    return _dcg(gains) / _dcg(ideal)


def evaluate_queries(
    run: Mapping[str, Sequence[str]],
    qrels: Mapping[str, Mapping[str, int]],
    ks: Sequence[int] = DEFAULT_KS,
) -> dict[str, dict[str, float]]:
    """Metrics per query, for every query of ``qrels``.

    Args:
        run: ranked document ids per query id, best first.
        qrels: graded relevance per query id and document id.
        ks: cut-offs of recall@k, ndcg@k and mrr@k (mrr@10 is always included).

    Returns:
        ``{qid: {"recall@5": ..., "ndcg@10": ..., "mrr@10": ...}}``; a query missing from the run
        scores 0 everywhere.
    """
    mrr_ks = sorted({*ks, 10})
    per_query: dict[str, dict[str, float]] = {}
    for qid, relevant in qrels.items():
        ranked = run.get(qid, [])
        scores: dict[str, float] = {}
        for k in ks:
            scores[f"recall@{k}"] = recall_at_k(ranked, relevant, k)
            scores[f"ndcg@{k}"] = ndcg_at_k(ranked, relevant, k)
        for k in mrr_ks:
            scores[f"mrr@{k}"] = reciprocal_rank(ranked, relevant, k)
        per_query[qid] = scores
    missing = sum(1 for qid in qrels if not run.get(qid))
    if missing:
        log.info("%d of %d judged queries have no results; they count as 0", missing, len(qrels))
    return per_query


def evaluate_run(
    run: Mapping[str, Sequence[str]],
    qrels: Mapping[str, Mapping[str, int]],
    ks: Sequence[int] = DEFAULT_KS,
) -> dict[str, float]:
    """Average each metric over the queries present in ``qrels``.

    Queries of the run that have no judgements are ignored; judged queries without results count
    as 0, so a search that fails silently cannot raise the average.

    Returns:
        ``{"recall@1": ..., "ndcg@1": ..., ..., "mrr@10": ...}``; all zeros for empty qrels.
    """
    per_query = evaluate_queries(run, qrels, ks)
    if not per_query:
        empty = evaluate_queries({}, {"": {}}, ks)[""]
        return dict.fromkeys(empty, 0.0)
    names = next(iter(per_query.values())).keys()
    count = len(per_query)
    return {name: sum(scores[name] for scores in per_query.values()) / count for name in names}


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0..100) with linear interpolation, like ``numpy.percentile``.

    Example::

        percentile([10, 20, 30, 40], 50)   # 25.0
    """
    if not values:
        raise ValueError("percentile of an empty list")
    if not 0 <= p <= 100:
        raise ValueError(f"percentile p must be within 0..100, got {p}")
    ordered = sorted(values)
    position = (len(ordered) - 1) * p / 100
    lower = math.floor(position)
    upper = min(lower + 1, len(ordered) - 1)
    fraction = position - lower
    return float(ordered[lower] + (ordered[upper] - ordered[lower]) * fraction)


def document_ranking(hits: Sequence[tuple[str, str, float]]) -> list[tuple[str, float]]:
    """Chunk hits -> documents ranked by their best chunk, with that chunk's score.

    Args:
        hits: ``(chunk_id, document key, score)``, best first.

    Returns:
        ``(document key, score)``, each document once, best first.

    Example::

        document_ranking([("a#1", "a", 3.0), ("b#0", "b", 2.0), ("a#0", "a", 1.0)])
        # [("a", 3.0), ("b", 2.0)]
    """
    best_score: dict[str, float] = {}
    for _chunk_id, key, score in hits:
        best_score.setdefault(key, score)  # the first (best) chunk of each document
    ranked = best_rank_per_document([(chunk_id, key) for chunk_id, key, _score in hits])
    return [(key, best_score[key]) for key in ranked]


def heading_matches(expected: Sequence[str], title: str, heading_path: Sequence[str]) -> bool:
    """Whether a chunk sits under the expected heading path (case-insensitive prefix match).

    The expected path may start with the document title or leave it out.

    Example::

        heading_matches(("Refunds", "UPI"), "Payments", ("Refunds", "UPI", "Limits"))  # True
    """
    want = [part.strip().lower() for part in expected]
    if not want:
        return True
    for have in ((title, *heading_path), tuple(heading_path)):
        parts = [part.strip().lower() for part in have]
        if parts[: len(want)] == want:
            return True
    return False


def section_ranking(
    hits: Sequence[tuple[str, str, str, tuple[str, ...]]], query: EvalQuery
) -> list[str]:
    """Chunk hits -> a ranking where chunks under the expected section share one id.

    Args:
        hits: ``(chunk_id, source, title, heading_path)``, best first.
        query: the question, with the expected ``source`` and ``heading_path``.

    Returns:
        Ids best first; scored against ``{_SECTION_MATCH: 1}`` it gives section-level metrics.
    """
    keys = []
    for _chunk_id, source, title, heading_path in hits:
        if source == query.source and heading_matches(query.heading_path, title, heading_path):
            keys.append(_SECTION_MATCH)
        else:
            keys.append(f"{source}\x00{PATH_SEPARATOR.join(heading_path)}")
    return list(dict.fromkeys(keys))


def latency_summary(milliseconds: Sequence[float]) -> dict[str, float]:
    """``{"p50", "p95", "mean"}`` of per-query latencies, rounded to 0.1 ms."""
    if not milliseconds:
        return {"p50": 0.0, "p95": 0.0, "mean": 0.0}
    return {
        "p50": round(percentile(milliseconds, 50), 1),
        "p95": round(percentile(milliseconds, 95), 1),
        "mean": round(sum(milliseconds) / len(milliseconds), 1),
    }


def score_run(
    run: Mapping[str, Sequence[str]],
    qrels: Mapping[str, Mapping[str, int]],
    section_runs: Mapping[str, Sequence[str]] | None = None,
    ks: Sequence[int] = DEFAULT_KS,
) -> dict[str, float]:
    """Document-level metrics, plus ``section_*`` metrics over the queries that name a heading."""
    metrics = evaluate_run(run, qrels, ks)
    if section_runs:
        section_qrels = {qid: {_SECTION_MATCH: 1} for qid in section_runs}
        for name, value in evaluate_run(section_runs, section_qrels, ks).items():
            metrics[f"{SECTION_PREFIX}{name}"] = value
    return metrics


# --- context recall ----------------------------------------------------------------------------

CONTEXT_RECALL = "context_recall@{k}"
# English function words (the usual list of search engines and NLTK, abridged): they carry no
# content, so an answer's share of them in a chunk says nothing about retrieval.
_STOP_WORDS = """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not now of off on once only or other our ours ourselves out
    over own same she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves"""
STOP_WORDS = frozenset(_STOP_WORDS.split())
_WORD = re.compile(r"\w+")


@functools.lru_cache(maxsize=1)
def _stemmer():
    import snowballstemmer

    return snowballstemmer.stemmer("english")


def content_words(text: str) -> set[str]:
    """The stems of ``text``'s content words: lowercased words, stop words out, Snowball-stemmed.

    Example::

        content_words("Refunds are paid within 48 hours")
        # {'refund', 'paid', 'within', '48', 'hour'}
    """
    words = [word for word in _WORD.findall(text.lower()) if word not in STOP_WORDS]
    return set(_stemmer().stemWords(words))


def context_recall(answer: str, contexts: Sequence[str]) -> float | None:
    """The share of the reference answer's content words present in the retrieved ``contexts``
    (the retrieval half of RAGAS' context recall, without an LLM); ``None`` for an answer with
    no content word.

    Example::

        context_recall("Within 48 hours of approval", ["UPI refunds arrive within 48 hours."])
        # 3 of {'within', '48', 'hour', 'approv'} -> 0.75
    """
    wanted = content_words(answer)
    if not wanted:
        return None
    found = set().union(*(content_words(text) for text in contexts)) if contexts else set()
    return len(wanted & found) / len(wanted)


def metric_names(top_k: int, ks: Sequence[int] = DEFAULT_KS) -> tuple[str, ...]:
    """Every metric name a `loader eval` run can report, for checking a name before a run.

    ``recall@k``, ``ndcg@k`` and ``mrr@k`` for each cut-off (``mrr@10`` always), the same with
    ``section_`` in front (questions that name a heading), and ``context_recall@<top_k>``
    (questions with an answer; ``top_k`` is the setting a run keeps that many passages by).

    Example::

        "ndcg@10" in metric_names(5), "context_recall@5" in metric_names(5)   # True, True
    """
    document = [
        *(f"recall@{k}" for k in ks),
        *(f"ndcg@{k}" for k in ks),
        *(f"mrr@{k}" for k in sorted({*ks, 10})),
    ]
    sections = [f"{SECTION_PREFIX}{name}" for name in document]
    return (*document, *sections, CONTEXT_RECALL.format(k=top_k))


def mean_context_recall(recalls: Mapping[str, float | None], k: int) -> dict[str, float]:
    """``{"context_recall@k": mean}`` over the queries with a scorable answer; empty without."""
    values = [value for value in recalls.values() if value is not None]
    return {CONTEXT_RECALL.format(k=k): sum(values) / len(values)} if values else {}
