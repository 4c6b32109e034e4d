"""What the routes of ``loader serve`` share: ``SearchService`` holds the settings, the client,
the embedding model and the reranker (loaded at startup, or at the first request that asks for
one), and answers ``/health`` and ``/search``.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from fastapi.responses import JSONResponse

from loader.cluster.client import cluster_errors, connect, require_cluster
from loader.errors import (
    ClusterError,
    ConfigError,
    LoaderError,
    ModelError,
    RerankerUnavailableError,
)
from loader.models.rerank import check as rerank_check
from loader.query.request import MAX_QUESTION_CHARS
from loader.query.rewriters import rewriter_from_settings
from loader.query.search import search
from loader.redact import scrub_secrets
from loader.serve.body import SearchRequest
from loader.serve.responses import error_response, loader_error
from loader.settings import Settings, secret_values

log = logging.getLogger(__name__)

# Searches run in the worker threads of Starlette's thread pool (anyio's default: 40), all on one
# client: a connection pool as large, or urllib3 discards connections under load (and says so).
SEARCH_THREADS = 40


class SearchService:
    """What the handlers share: the settings, the client, the embedder, and the reranker, which
    loads at startup (unless the ``rerank`` setting is off) or at the first request that asks
    for one."""

    def __init__(self, settings: Settings, client: Any, embedder: Any, reranker: Any) -> None:
        self.settings = settings
        self.secrets = secret_values(settings)  # masked in every error body and log line
        self.rewriter = rewriter_from_settings(settings)  # a bad rewrite setting stops startup
        self.client = client
        self.embedder = embedder
        self.reranker = reranker
        self._reranker_lock = threading.Lock()
        self._reranker_failure: ModelError | None = None
        self._default_rerank: tuple[bool, tuple[str, ...]] | None = None

    def start(self, load_models: bool) -> None:
        """Connect, and with ``load_models`` make sure the cluster answers (before any model
        loads: a cluster that is down is what to fix first), then load (and warm up) the models.

        Raises:
            ClusterError: the cluster does not answer, or not as OpenSearch.
            RerankerUnavailableError: ``rerank = on`` and reranker_model is no cross-encoder here.
        """
        settings = self.settings
        if settings.rerank == "on" and self.reranker is None:
            rerank_check.require_rerank(settings)  # asked for: refused at once
        if self.client is None:
            self.client = connect(settings, connections=SEARCH_THREADS)
            if load_models:  # without models the server starts, and answers 503 until it is up
                require_cluster(self.client, settings)
        if not load_models:
            return
        if self.embedder is None:
            from loader.models.embedding import embedder_for

            self.embedder = embedder_for(settings)  # model, backend, instructions
            self.embedder.embed_queries(["warm up"])  # the model loads lazily
            from loader.models.readers import second_embedder_for

            second = second_embedder_for(settings)  # the hybrid modes' second reader, if any
            if second is not None:
                second.embed_queries(["warm up"])
        self.default_rerank()

    def default_rerank(self) -> tuple[bool, tuple[str, ...]]:
        """Whether a request that leaves ``rerank`` out reranks, and the warnings its answer
        then carries: the rerank setting; ``auto`` is decided once, on whether the reranker
        loads (a warning on the log says why not, and each such answer says there is none)."""
        with self._reranker_lock:
            decided = self._default_rerank
        if decided is not None:
            return decided
        rerank, problem = rerank_check.default_rerank(self.settings)
        if self.settings.rerank == "auto" and rerank and self.get_reranker() is None:
            rerank, problem = False, str(self._reranker_failure)
        warnings: tuple[str, ...] = ()
        if self.settings.rerank == "auto" and not rerank:
            log.warning("%s", scrub_secrets(str(problem), self.secrets))
            warnings = (
                f"no rerank: rerank is auto and reranker_model {self.settings.reranker_model!r} "
                "is not a cross-encoder on this server (its log says why)",
            )
        with self._reranker_lock:
            self._default_rerank = (rerank, warnings)
        return rerank, warnings

    def get_reranker(self) -> Any:
        """The reranker, loaded at the first call; ``None`` (once and for all) if it cannot be."""
        with self._reranker_lock:
            if self.reranker is None and self._reranker_failure is None:
                from loader.models.rerank import load_reranker

                try:
                    self.reranker = load_reranker(self.settings)
                except RerankerUnavailableError as exc:  # no such model here: the request's 4xx
                    log.warning("%s", scrub_secrets(str(exc), self.secrets))
                    self._reranker_failure = exc
                except (ModelError, ConfigError) as exc:
                    log.warning(
                        "no reranker available, rerank requests answer 503: %s",
                        scrub_secrets(str(exc), self.secrets),
                    )
                    # The cross-encoder or the learned model the settings choose: name both
                    # settings, never the server's folders.
                    self._reranker_failure = ModelError(
                        f"no reranker available: {exc}",
                        public_reason="no reranker available: the one the server's settings "
                        "name (reranker_model, learned_reranker) cannot be loaded (the server's "
                        'log has the reason); send "rerank": false, or set rerank=off or those '
                        "settings on the server",
                    )
            return self.reranker

    def health(self) -> JSONResponse:
        """200 with the cluster's status, or 503 whatever the cluster's failure."""
        try:
            with cluster_errors(self.settings, "checking the cluster's health"):
                answer = self.client.cluster.health()
        except ClusterError as exc:
            return loader_error(exc, self.secrets, status=503, action="health check")
        return JSONResponse(
            {"status": "ok", "cluster": answer.get("status"), "index": self.settings.index_name}
        )

    def search(self, body: SearchRequest, tenant: str) -> JSONResponse:
        """The answer to one search body, for ``tenant``; bad input is a 4xx even when the server
        lacks a model."""
        if len(body.question) > MAX_QUESTION_CHARS:
            return error_response(
                413,
                f"question: {len(body.question)} characters, more than the limit of "
                f"{MAX_QUESTION_CHARS}",
            )
        try:
            request = body.to_request(self.settings, tenant)
        except LoaderError as exc:
            return loader_error(exc, self.secrets)
        if body.rerank is None:  # the server's default, and its warning (no server paths)
            rerank, warnings = self.default_rerank()
            request = request.replace(rerank=rerank, warnings=warnings)
        reranker = self.get_reranker() if request.rerank else None
        if request.rerank and reranker is None:
            assert self._reranker_failure is not None
            return loader_error(self._reranker_failure, self.secrets)
        try:
            result = search(
                request,
                self.settings,
                client=self.client,
                embedder=self.embedder,
                reranker=reranker,
                rewriter=self.rewriter,
            )
        except LoaderError as exc:
            return loader_error(exc, self.secrets)
        return JSONResponse(result.to_dict())
