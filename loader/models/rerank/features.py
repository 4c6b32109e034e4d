"""The learned reranker's features of each fused candidate, version ``FEATURE_VERSION``.

The search has already fetched each candidate's text, metadata, fused score and rank; the rest
comes from one ``_msearch`` (``feature_lookup``): each sub-query alone -- BM25 on ``content``,
BM25 on ``heading_path``, the question's vector against each chunk's (exact cosine, the k-NN
plugin's ``knn_score`` script), the exact identifiers held (one point per ``exact_terms`` phrase
on ``content.exact``) and, with two readers, the second reader's vector against each chunk's
``second_embedding`` -- restricted to the candidates (``terms`` on ``chunk_id``) and to the
tenant (``term`` on ``tenant``), so every candidate's raw score comes back and no other
tenant's chunk is scored. ``feature_matrix`` turns both into one row per candidate.

Two feature sets (``FeatureSet``): ``ONE_READER`` (``FEATURES``) and ``TWO_READERS``, the same
columns and, after them, the second reader's cosine in the same four forms
(``second_vector_*``; ``second_embedding_model``), so a two-reader row begins with the one-reader
row. A model records the set it learnt on (its fingerprint and ``readers``); a one-reader model
keeps reranking an index with two readers (its lookup leaves the second out).

Features carry over between collections: a raw BM25 score or a chunk's length in words means
something else in every index, so each score is normalised within the question's candidates
(min-max, ratio to the best, z-score) or turned into a rank (its reciprocal), and lengths into
ratios to the candidates' median. ``FEATURES`` names them in column order, each with what it is;
``guide/rerank.md`` lists them. A model records ``feature_fingerprint()``; one trained on other
features is refused when it loads.

Pure (numpy), except that the lookup is run by the search.

Example::

    lines = feature_lookup(query, hits)                 # 8 _msearch lines (4 without a vector...)
    matrix = feature_matrix(query, hits, answers)       # shape (len(hits), len(FEATURES))
    feature_lookup(query, hits, TWO_READERS)            # 10 lines with the second reader's vector
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from loader.models.readers import FIRST_FIELD, SECOND_FIELD
from loader.models.rerank import Candidate, LookupAnswers, RerankQuery
from loader.models.rerank.keyword import content_terms, words

# Bump when a feature is added, removed, reordered or computed differently: models trained on
# the old ones are refused (their fingerprint differs).
FEATURE_VERSION = 1

# The sub-queries looked up per candidate, in the _msearch's order (the last with two readers).
SUB_QUERIES = ("content", "heading", "vector", "exact", "second_vector")
# Scores per sub-query: (suffix, what it is).
_SCORE_FORMS = (
    ("minmax", "min-max normalised over the candidates (best 1, worst 0)"),
    ("ratio", "score / the best candidate's score"),
    ("zscore", "z-score over the candidates"),
    ("rank", "1 / its rank among the candidates (0 when it does not match)"),
)
_SUB_QUERY_TEXT = {
    "content": "BM25 of the question on content",
    "heading": "BM25 of the question on heading_path",
    "vector": "(1 + cosine) / 2 of the question's vector and the chunk's (missing in bm25 mode)",
    "second_vector": "(1 + cosine) / 2 of the question's and the chunk's vectors by the second "
    "reader, second_embedding_model (missing outside the hybrid modes)",
}

FEATURES: tuple[tuple[str, str], ...] = (
    *(
        (f"{side}_{form}", f"{_SUB_QUERY_TEXT[side]}: {what}")
        for side in ("content", "heading", "vector")
        for form, what in _SCORE_FORMS
    ),
    ("exact_share", "share of the question's identifiers (exact_terms) the chunk holds"),
    ("fused_minmax", "the fused (retrieval) score, min-max normalised over the candidates"),
    ("fused_zscore", "the fused score's z-score over the candidates"),
    ("fused_rank", "1 / the fused rank"),
    ("heading_overlap", "share of the question's content words in the heading path"),
    ("title_overlap", "share of the question's content words in the title"),
    ("body_overlap", "share of the question's content words in the chunk's text"),
    ("question_terms", "the question's content words (stopwords left out)"),
    ("has_identifiers", "1 when the question holds identifiers (exact_terms), else 0"),
    ("length_ratio", "the chunk's words / the candidates' median"),
    ("position", "1 / (1 + the chunk's position in its document)"),
    ("doc_candidates", "how many of the candidates are chunks of the chunk's document"),
)
FEATURE_NAMES: tuple[str, ...] = tuple(name for name, _ in FEATURES)
SECOND_READER_FEATURES: tuple[tuple[str, str], ...] = tuple(
    (f"second_vector_{form}", f"{_SUB_QUERY_TEXT['second_vector']}: {what}")
    for form, what in _SCORE_FORMS
)


@dataclass(frozen=True)
class FeatureSet:
    """The columns a model learns from: ``ONE_READER`` or ``TWO_READERS`` (``readers``)."""

    readers: int
    features: tuple[tuple[str, str], ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.features)

    def fingerprint(self) -> str:
        """A hash of the feature version and names: what a model must have been trained on
        (the one-reader set's is the fingerprint of every model before two readers)."""
        text = f"{FEATURE_VERSION}:" + ",".join(self.names)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


ONE_READER = FeatureSet(1, FEATURES)
TWO_READERS = FeatureSet(2, FEATURES + SECOND_READER_FEATURES)
FEATURE_SETS = (ONE_READER, TWO_READERS)


def feature_fingerprint() -> str:
    """The one-reader set's fingerprint (``ONE_READER.fingerprint()``)."""
    return ONE_READER.fingerprint()


def feature_set_of(fingerprint: object) -> FeatureSet | None:
    """The feature set whose fingerprint a model records, or ``None`` (another version)."""
    return next((found for found in FEATURE_SETS if found.fingerprint() == fingerprint), None)


def feature_set_of_width(columns: int) -> FeatureSet:
    """The feature set of rows ``columns`` wide.

    Raises:
        ValueError: no set has that many columns.
    """
    for found in FEATURE_SETS:
        if len(found.features) == columns:
            return found
    raise ValueError(f"{columns} feature columns: no feature set of version {FEATURE_VERSION}")


def prior(hits: Sequence[Candidate]) -> np.ndarray:
    """What the model starts from and learns the residual over: the fused rank's DCG discount,
    ``1 / log2(1 + rank)`` (1 for the first, 0.5 for the third); scaled by the model's
    ``prior_scale``."""
    ranks = np.array([hit.ranks.get("retrieval", i + 1) for i, hit in enumerate(hits)], float)
    return 1.0 / np.log2(1.0 + ranks)


# --- the lookup ----------------------------------------------------------------------------------


def _restricted(query: RerankQuery, chunk_ids: list[str], scoring: dict[str, Any]) -> dict:
    return {
        "size": len(chunk_ids),
        "_source": ["chunk_id"],
        "track_total_hits": False,
        "query": {
            "bool": {
                "must": scoring,
                "filter": [
                    {"terms": {"chunk_id": chunk_ids}},
                    {"term": {"tenant": query.tenant}},
                ],
            }
        },
    }


def _cosine(field: str, vector: Sequence[float] | None) -> dict[str, Any] | None:
    if not vector:
        return None
    return {
        "script_score": {
            "query": {"match_all": {}},
            "script": {
                "lang": "knn",
                "source": "knn_score",
                "params": {
                    "field": field,
                    "query_value": list(vector),
                    "space_type": "cosinesimil",  # (1 + cosine) / 2, whatever the index's
                },
            },
        }
    }


def _scorings(query: RerankQuery, features: FeatureSet) -> dict[str, dict[str, Any] | None]:
    """Each sub-query's scoring clause in the lookup's order; ``None`` for one that cannot run
    (no vector, no identifiers, no second reader's vector). The second reader's is there only
    in the two-reader set."""
    exact = None
    if query.exact_terms:
        exact = {
            "bool": {
                "should": [
                    {"constant_score": {"filter": {"match_phrase": {"content.exact": term}}}}
                    for term in query.exact_terms
                ]
            }
        }
    scorings = {
        "content": {"match": {"content": {"query": query.query_text}}},
        "heading": {"match": {"heading_path": {"query": query.query_text}}},
        "vector": _cosine(FIRST_FIELD, query.query_vector),
        "exact": exact,
    }
    if features.readers > 1:
        scorings["second_vector"] = _cosine(SECOND_FIELD, query.second_query_vector)
    return scorings


def feature_lookup(
    query: RerankQuery, hits: Sequence[Candidate], features: FeatureSet = ONE_READER
) -> list[dict[str, Any]]:
    """The ``_msearch`` lines (a header and a body per sub-query of ``features`` that can run)
    whose answers hold each candidate's raw sub-query scores; ``parse_lookup`` reads them back.

    Raises:
        ValueError: the query names no tenant or index (the lookup must filter on both).
    """
    if not query.tenant or not query.index:
        raise ValueError("a feature lookup needs the search's index and tenant")
    chunk_ids = list(dict.fromkeys(hit.chunk_id for hit in hits))
    lines: list[dict[str, Any]] = []
    for scoring in _scorings(query, features).values():
        if scoring is not None:
            lines.extend(({"index": query.index}, _restricted(query, chunk_ids, scoring)))
    return lines


def parse_lookup(
    query: RerankQuery, answers: LookupAnswers, features: FeatureSet = ONE_READER
) -> dict[str, dict[str, float] | None]:
    """Sub-query -> chunk id -> raw score, from ``feature_lookup``'s answers (``None`` for a
    sub-query that was not run).

    Raises:
        ValueError: not one answer per sub-query run, or an answer that is an error.
    """
    ran = [side for side, scoring in _scorings(query, features).items() if scoring is not None]
    answers = list(answers or [])
    if len(answers) != len(ran):
        raise ValueError(f"{len(answers)} lookup answers for {len(ran)} sub-queries")
    found: dict[str, dict[str, float] | None] = dict.fromkeys(SUB_QUERIES)
    for side, answer in zip(ran, answers, strict=True):
        if "error" in answer:
            raise ValueError(f"the {side} lookup failed: {answer['error']}")
        found[side] = {
            str((hit.get("_source") or {}).get("chunk_id") or hit.get("_id")): float(hit["_score"])
            for hit in answer.get("hits", {}).get("hits", [])
        }
    return found


# --- the matrix ----------------------------------------------------------------------------------


def _minmax(values: np.ndarray) -> np.ndarray:
    low, high = values.min(), values.max()
    if high == low:
        return np.where(values > 0, 1.0, 0.0)
    return (values - low) / (high - low)


def _ratio(values: np.ndarray) -> np.ndarray:
    best = values.max()
    return values / best if best > 0 else np.zeros_like(values)


def _zscore(values: np.ndarray) -> np.ndarray:
    spread = values.std()
    return (values - values.mean()) / spread if spread > 0 else np.zeros_like(values)


def _reciprocal_rank(values: np.ndarray, matched: np.ndarray) -> np.ndarray:
    """1 / rank by score, best first (ties in candidate order); 0 for the unmatched."""
    order = np.argsort(-values, kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(1, len(values) + 1)
    return np.where(matched, 1.0 / ranks, 0.0)


def _score_forms(scores: dict[str, float] | None, ids: list[str]) -> list[np.ndarray]:
    """The four forms of one sub-query's scores (NaN each when it did not run)."""
    if scores is None:
        missing = np.full(len(ids), np.nan)
        return [missing] * len(_SCORE_FORMS)
    matched = np.array([chunk_id in scores for chunk_id in ids])
    values = np.array([scores.get(chunk_id, 0.0) for chunk_id in ids])
    return [_minmax(values), _ratio(values), _zscore(values), _reciprocal_rank(values, matched)]


def _overlap(terms: frozenset[str], texts: list[str]) -> np.ndarray:
    if not terms:
        return np.zeros(len(texts))
    return np.array([len(terms.intersection(words(text))) / len(terms) for text in texts])


def _text_features(question: str, hits: Sequence[Candidate]) -> list[np.ndarray]:
    terms = content_terms(question)
    lengths = np.array([len(words(hit.text or hit.body)) for hit in hits], float)
    median = float(np.median(lengths)) or 1.0
    return [
        _overlap(terms, [" ".join(hit.heading_path) for hit in hits]),
        _overlap(terms, [hit.title for hit in hits]),
        _overlap(terms, [hit.text or hit.body for hit in hits]),
        np.full(len(hits), float(len(terms))),
        lengths / median,
    ]


def feature_matrix(
    query: RerankQuery,
    hits: Sequence[Candidate],
    answers: LookupAnswers,
    features: FeatureSet = ONE_READER,
) -> np.ndarray:
    """One row per candidate, one column per entry of ``features`` (float64; NaN for a
    reader's features without its vector).

    Raises:
        ValueError: as ``parse_lookup``.
    """
    if not hits:
        return np.zeros((0, len(features.features)))
    found = parse_lookup(query, answers, features)
    ids = [hit.chunk_id for hit in hits]
    columns: list[np.ndarray] = []
    for side in ("content", "heading", "vector"):
        columns.extend(_score_forms(found[side], ids))
    exact = found["exact"]
    terms = len(query.exact_terms)
    columns.append(
        np.array([exact.get(i, 0.0) / terms for i in ids])
        if exact and terms
        else np.zeros(len(ids))
    )
    fused = np.array([hit.scores.get("retrieval", 0.0) for hit in hits], float)
    ranks = np.array([hit.ranks.get("retrieval", n + 1) for n, hit in enumerate(hits)], float)
    columns.extend([_minmax(fused), _zscore(fused), 1.0 / ranks])
    overlap_and_length = _text_features(query.question, hits)
    columns.extend(overlap_and_length[:4])
    columns.append(np.full(len(hits), 1.0 if query.exact_terms else 0.0))
    columns.append(overlap_and_length[4])
    columns.append(1.0 / (1.0 + np.array([max(hit.position, 0) for hit in hits], float)))
    per_document: dict[str, int] = {}
    for hit in hits:
        per_document[hit.doc_id] = per_document.get(hit.doc_id, 0) + 1
    columns.append(np.array([per_document[hit.doc_id] for hit in hits], float))
    if features.readers > 1:
        columns.extend(_score_forms(found["second_vector"], ids))
    matrix = np.column_stack(columns)
    assert matrix.shape[1] == len(features.features), matrix.shape
    return matrix


def finite_or_nan(value: float) -> float | None:
    """A feature value for JSON: ``None`` for NaN."""
    return None if math.isnan(value) else float(value)
