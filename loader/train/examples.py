"""Training examples of the learned reranker: each judged question searched as users' searches
are, its candidates' features computed by the rerank's own lookup and code.

The search runs with a ``FeatureRecorder`` as its reranker: it asks for the learned reranker's
lookup (``loader.models.rerank.features.feature_lookup``), keeps the feature matrix the search
hands it back, and scores the candidates in their fused order, so nothing about the search
changes and the features are exactly those the trained model will be given.

Example::

    examples = collect_examples(pairs, settings, client, mode="hybrid-rrf", candidates=50)
    examples[0].features.shape, examples[0].labels   # (50, 28), array([0, 2, 0, ...])
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from loader.models.rerank import Candidate, LookupAnswers, RerankQuery
from loader.models.rerank.check import LEARNED
from loader.models.rerank.features import (
    ONE_READER,
    TWO_READERS,
    FeatureSet,
    feature_lookup,
    feature_matrix,
    prior,
)
from loader.train.sources import BY_CHUNK, JudgedQuestion, Source

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

    from loader.settings import Settings

# Seconds between two progress lines while the questions are searched: 400 questions took 11 to
# 14 minutes on a busy 2-core machine, a line every 20 s says it is working, and no more.
PROGRESS_SECONDS = 20.0


@dataclass
class Example:
    """One question's candidates, in their fused order.

    Attributes:
        question_id, source: where the question comes from.
        features: one row per candidate (the columns of the search's ``FeatureSet``:
            ``searched_features``).
        prior: the fused rank's DCG discount per candidate (``features.prior``).
        labels: each candidate's grade (0-2).
        keys: what each candidate is judged by (its chunk id, or its document's source).
        relevant: the question's grades above 0, by key (for nDCG).
        implicit: derived from clicks.
        chunks: each candidate's (tenant, chunk id), to check isolation.
        question: its text (``""`` in examples cached before it was kept).
    """

    question_id: str
    source: str
    features: np.ndarray
    prior: np.ndarray
    labels: np.ndarray
    keys: list[str]
    relevant: dict[str, int]
    implicit: bool
    chunks: list[tuple[str, str]]
    question: str = ""


class FeatureRecorder:
    """A reranker that keeps the candidates' features and leaves their fused order as it is.

    ``candidate_depth``: the search hands it the first this many candidates, as it will hand
    the trained model (``loader.query.search.rerank_depth``): a BEIR folder's search retrieves
    more chunks than that, to keep that many documents after the collapse. ``features``: the
    columns recorded (``searched_features``)."""

    kind = LEARNED
    name = "feature recorder"

    def __init__(
        self, candidate_depth: int | None = None, features: FeatureSet = ONE_READER
    ) -> None:
        self.candidate_depth = candidate_depth
        self.features = features
        self.recorded: tuple[np.ndarray, np.ndarray, list[Any]] | None = None

    def lookup(self, query: RerankQuery, hits: Sequence[Candidate]) -> list[dict[str, Any]]:
        return feature_lookup(query, hits, self.features)

    def score(
        self, query: RerankQuery, hits: Sequence[Candidate], answers: LookupAnswers = None
    ) -> list[float]:
        matrix = feature_matrix(query, hits, answers, self.features)
        self.recorded = (matrix, prior(hits), list(hits))
        return [-float(position) for position in range(len(hits))]


def _example(source: Source, question: JudgedQuestion, recorder: FeatureRecorder) -> Example:
    assert recorder.recorded is not None
    features, prior_values, hits = recorder.recorded
    keys = [hit.chunk_id if question.by == BY_CHUNK else hit.source for hit in hits]
    labels = np.array([max(question.grades.get(key, 0), 0) for key in keys], dtype=float)
    return Example(
        question_id=question.id,
        source=str(source.path),
        features=features,
        prior=prior_values,
        labels=labels,
        keys=keys,
        relevant=question.relevant(),
        implicit=question.implicit,
        chunks=[(hit.tenant, hit.chunk_id) for hit in hits],
        question=question.text,
    )


def searched_features(mode: str, second_reader: str | None) -> FeatureSet:
    """The features a search in ``mode`` gives a model: both readers' in a hybrid mode with a
    second reader (``second_reader``: ``loader.models.readers.second_reader`` of the settings;
    only the hybrid templates search it, and only their searches embed the question with it),
    else the first reader's alone.

    Raises:
        ConfigError: ``mode`` is no search mode.
    """
    from loader.modes import search_mode

    return TWO_READERS if second_reader and search_mode(mode).hybrid else ONE_READER


def _depth(candidates: int, one_per_document: bool) -> int:
    """Chunks retrieved for ``candidates`` candidates: as ``loader eval`` asks when each document
    is kept at its best chunk (``CHUNKS_PER_DOCUMENT`` chunks a document), else as many."""
    from loader.eval.runner import CHUNKS_PER_DOCUMENT
    from loader.query.request import MAX_CANDIDATES

    if not one_per_document:
        return candidates
    return min(candidates * CHUNKS_PER_DOCUMENT, MAX_CANDIDATES)


def collect_examples(
    pairs: Sequence[tuple[Source, JudgedQuestion]],
    settings: Settings,
    client: OpenSearch,
    *,
    mode: str,
    candidates: int,
    on_searched: Callable[[], None] | None = None,
) -> list[Example]:
    """One example per question that finds any candidate, searched in its source's index as
    its source's tenant (``mode``, its first ``candidates`` candidates, each document at its
    best chunk for a BEIR folder as ``loader eval`` searches, no rewrite), each candidate's
    features those of ``searched_features`` (both readers' in a hybrid mode with two);
    ``on_searched`` is called after each search (``SearchProgress``).

    Raises:
        ClusterError: an index is missing or the cluster failed.
    """
    from loader.models.embedding import embedder_for
    from loader.models.readers import second_reader
    from loader.modes import search_mode
    from loader.query.request import SearchRequest
    from loader.query.rewrite import IdentityRewriter
    from loader.query.search import search

    embedder = embedder_for(settings) if search_mode(mode).embeds else None
    second = second_reader(settings.embedding_model, settings.second_embedding_model)
    features = searched_features(mode, second)
    examples = []
    for source, question in pairs:
        recorder = FeatureRecorder(candidates, features)
        wanted = SearchRequest(
            question=question.text,
            tenant=source.tenant,
            mode=mode,
            rerank=True,
            k=candidates,
            candidates=_depth(candidates, source.one_per_document),
            exact_match=settings.exact_match,
            one_per_document=source.one_per_document,
        )
        search(
            wanted,
            settings.replace(index_name=source.index),
            client=client,
            embedder=embedder,
            reranker=recorder,
            rewriter=IdentityRewriter(),
        )
        if recorder.recorded is not None:  # None: the question found no candidate
            examples.append(_example(source, question, recorder))
        if on_searched is not None:
            on_searched()
    return examples


class SearchProgress:
    """Called after each of ``total`` searches: a line to ``notify`` every ``every`` seconds
    (``"searched 120 of 400 questions in 3 min; about 7 min left"``) and one after the last, so
    a long search is never silent; ``what`` names the searches (a question in each of several
    modes: ``searches``); ``clock`` is ``time.monotonic`` but in tests."""

    def __init__(
        self,
        total: int,
        notify: Callable[[str], None],
        *,
        every: float = PROGRESS_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        what: str = "questions",
    ) -> None:
        self.total, self.notify, self.every, self.clock = total, notify, every, clock
        self.what = what
        self.done = 0
        self.started = self.shown = clock()

    def __call__(self) -> None:
        self.done += 1
        now = self.clock()
        if self.done < self.total and now - self.shown < self.every:
            return
        self.shown = now
        elapsed = now - self.started
        line = f"searched {self.done} of {self.total} {self.what} in {_duration(elapsed)}"
        if self.done < self.total:
            left = elapsed / self.done * (self.total - self.done)
            line += f"; about {_duration(left)} left"
        self.notify(line)


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"
