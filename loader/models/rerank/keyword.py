"""The keyword reranker: the free alternative to a cross-encoder, needing no model.

It blends each candidate's retrieval score with how many of the question's words the chunk
holds::

    final = (1 - weight) * normalised retrieval score + weight * keyword overlap

- the retrieval score is min-max normalised over the candidates (the best 1, the worst 0; all
  equal: 1 each), so the fusion's order is the starting point whatever its scale;
- the keyword overlap is the share of the question's distinct content terms found in the chunk's
  text: both lowercased and cut into words (runs of letters and digits; punctuation dropped), the
  question's stopwords dropped (``STOPWORDS``, English function words);
- ``weight`` is the ``keyword_rerank_weight`` setting (0.3: the seeds' starting point). 0 keeps
  the retrieval order, 1 orders by overlap alone.

Pure functions and one small class behind the ``loader.models.rerank.Reranker`` protocol (it
reads each hit's text and retrieval score); ``rerank_backend = "keyword"`` selects it
(``loader.models.rerank.load_reranker``).

Example::

    keyword_rerank_scores("How long do refunds take?", ["Refunds take 5 days.", "Shipping."],
                          [0.02, 0.03], weight=0.3)
    # [0.2, 0.7]: refunds 0.7 x 0 + 0.3 x 2/3 ('long' is missing), shipping 0.7 x 1 + 0.3 x 0
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from loader.errors import ConfigError
from loader.models.rerank import Candidate, RerankQuery

# English function words (the usual IR list): they match nearly every chunk and say nothing about
# what a question asks.
_STOPWORD_TEXT = """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its
    itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_WORD = re.compile(r"[^\W_]+")  # letters and digits; punctuation and underscores split words


def words(text: str) -> list[str]:
    """``text`` lowercased and cut into words, punctuation dropped.

    Example::

        words("Error E1043: tray-empty!")   # ['error', 'e1043', 'tray', 'empty']
    """
    return _WORD.findall(text.lower())


def content_terms(question: str) -> frozenset[str]:
    """The question's distinct words that are not stopwords.

    Example::

        content_terms("How long do refunds take?")   # {'long', 'refunds', 'take'}
    """
    return frozenset(word for word in words(question) if word not in STOPWORDS)


def keyword_overlap(terms: frozenset[str], text: str) -> float:
    """The share of ``terms`` found among ``text``'s words (0 when there are no terms)."""
    if not terms:
        return 0.0
    return len(terms & set(words(text))) / len(terms)


def min_max(scores: Sequence[float]) -> list[float]:
    """``scores`` rescaled to [0, 1] over themselves; all equal (or one): 1 each."""
    if not scores:
        return []
    low, high = min(scores), max(scores)
    if high == low:
        return [1.0] * len(scores)
    return [(score - low) / (high - low) for score in scores]


def check_weight(weight: float) -> float:
    """``weight`` when it is within [0, 1].

    Raises:
        ConfigError: naming ``keyword_rerank_weight``.
    """
    if not 0.0 <= weight <= 1.0:
        raise ConfigError(f"keyword_rerank_weight must be between 0 and 1, got {weight!r}")
    return float(weight)


def keyword_rerank_scores(
    question: str, passages: Sequence[str], retrieval_scores: Sequence[float], weight: float
) -> list[float]:
    """Each passage's ``(1 - weight) * min-max(retrieval score) + weight * keyword overlap``,
    in the passages' order.

    Raises:
        ConfigError: ``weight`` outside [0, 1].
        ValueError: not one retrieval score per passage.
    """
    weight = check_weight(weight)
    if len(retrieval_scores) != len(passages):
        raise ValueError(
            f"{len(retrieval_scores)} retrieval scores for {len(passages)} passages; give one each"
        )
    terms = content_terms(question)
    return [
        (1 - weight) * normalised + weight * keyword_overlap(terms, passage)
        for normalised, passage in zip(min_max(retrieval_scores), passages, strict=True)
    ]


class KeywordReranker:
    """``rerank_backend = "keyword"``: a reranker without a model.

    Args:
        weight: ``keyword_rerank_weight``, the keyword overlap's share of the final score.
    """

    name = "keyword"
    kind = "keyword"
    backend = "keyword"

    def __init__(self, weight: float = 0.3) -> None:
        self.weight = check_weight(weight)

    def lookup(self, query: RerankQuery, hits: Sequence[Candidate]) -> None:
        """Nothing to ask the index: the text and the retrieval score are on the hits."""
        return None

    def score(
        self, query: RerankQuery, hits: Sequence[Candidate], answers: object = None
    ) -> list[float]:
        """Each hit's blend of its retrieval score and keyword overlap with ``query.question``."""
        passages = [hit.text or hit.body for hit in hits]
        retrieval = [hit.scores.get("retrieval", 0.0) for hit in hits]
        return self.rerank(query.question, passages, retrieval)

    def rerank(
        self,
        question: str,
        passages: list[str],
        retrieval_scores: Sequence[float] | None = None,
    ) -> list[float]:
        """The final score of each passage, in the passages' order (see the module).

        Raises:
            ValueError: no retrieval scores: this reranker blends them in.
        """
        if retrieval_scores is None:
            raise ValueError("the keyword reranker needs the candidates' retrieval scores")
        return keyword_rerank_scores(question, passages, retrieval_scores, self.weight)
