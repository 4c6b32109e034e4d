"""What the routes of ``loader serve`` share: ``SearchService`` holds the settings, the client,
the embedding model and the reranker (loaded at startup, or at the first request that asks for
one), and answers ``/health`` and ``/search``.
"""

from __future__ import annotations

import functools
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
        shared = rerank_check.choose_reranker(settings).kind != rerank_check.LEARNED
        if settings.rerank == "auto" and shared:
            self._shared_default()  # the shared reranker loads now; a learned one per tenant

    def default_rerank(self, tenant: str) -> tuple[bool, tuple[str, ...]]:
        """Whether a request of ``tenant`` that leaves ``rerank`` out reranks, and the warnings
        its answer then carries: the rerank setting; with ``auto``, whether the tenant's
        reranker loads (its own learned model, or the shared cross-encoder or keyword one; a
        warning on the log says why not, and each such answer says there is none)."""
        if self.settings.rerank != "auto":
            return self.settings.rerank == "on", ()
        choice = rerank_check.choose_reranker(self.settings, tenant)
        if choice.kind == rerank_check.LEARNED:
            if self._learned(choice.model) is not None:
                return True, ()
            problem = f"the learned reranker {choice.model} cannot be loaded"
        elif choice.kind:
            return self._shared_default()
        else:
            problem = str(choice.problem)
        _log_once(scrub_secrets(f"no rerank (rerank = auto): {problem}", self.secrets))
        if not self.settings.learned_reranker:
            return False, self._no_cross_encoder
        return False, (
            "no rerank: rerank is auto and neither a cross-encoder nor a learned reranker of "
            "this tenant is available on this server (its log says why)",
        )

    @property
    def _no_cross_encoder(self) -> tuple[str, ...]:
        return (
            f"no rerank: rerank is auto and reranker_model {self.settings.reranker_model!r} "
            "is not a cross-encoder on this server (its log says why)",
        )

    def _shared_default(self) -> tuple[bool, tuple[str, ...]]:
        """``default_rerank`` for the reranker every tenant shares (a cross-encoder, the keyword
        one): decided once, on whether it loads."""
        with self._reranker_lock:
            decided = self._default_rerank
        if decided is not None:
            return decided
        rerank, problem = True, None
        if self.get_reranker() is None:
            rerank, problem = False, str(self._reranker_failure)
        warnings: tuple[str, ...] = ()
        if not rerank:
            log.warning("%s", scrub_secrets(str(problem), self.secrets))
            warnings = self._no_cross_encoder
        with self._reranker_lock:
            self._default_rerank = (rerank, warnings)
        return rerank, warnings

    def reranker_for(self, tenant: str) -> tuple[Any, LoaderError | None]:
        """The reranker of ``tenant``'s searches and, when there is none, the error a request
        that asks for a rerank gets: the tenant's own learned model (or the one
        ``learned_reranker_tenants`` lends it), else the reranker every tenant shares."""
        choice = rerank_check.choose_reranker(self.settings, tenant)
        if choice.kind == rerank_check.LEARNED:
            learned = self._learned(choice.model)
            return learned, None if learned is not None else _unloadable(choice.model)
        if not choice.kind:
            try:
                choice.require()
            except RerankerUnavailableError as exc:
                return None, exc
        shared = self.get_reranker()
        return shared, self._reranker_failure

    def _learned(self, folder: str) -> Any:
        """The learned model of ``folder`` (read once per process and file), or ``None`` when it
        cannot be loaded (the log says why; tried again at the next request: it may be
        retrained)."""
        from loader.models.rerank.learned import load_learned

        try:
            return load_learned(folder)
        except (ModelError, ConfigError) as exc:
            _log_once(scrub_secrets(f"learned reranker {folder}: {exc}", self.secrets))
            return None

    def get_reranker(self) -> Any:
        """The reranker every tenant shares (a cross-encoder, the keyword one), loaded at the
        first call; ``None`` (once and for all) if it cannot be."""
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
                    self._reranker_failure = _unloadable(str(exc))
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
        warnings: tuple[str, ...] = ()
        if body.rerank is None:  # the server's default, and its warning (no server paths)
            rerank, warnings = self.default_rerank(tenant)
            body = body.model_copy(update={"rerank": rerank})
        try:
            request = body.to_request(self.settings, tenant)
        except LoaderError as exc:
            return loader_error(exc, self.secrets)
        request = request.replace(warnings=(*warnings, *request.warnings))
        reranker, failure = self.reranker_for(tenant) if request.rerank else (None, None)
        if request.rerank and reranker is None:
            assert failure is not None
            return loader_error(failure, self.secrets)
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


def _unloadable(reason: str) -> ModelError:
    """A rerank asked for whose reranker cannot be loaded: a 503 naming the settings, never the
    server's folders (the log has the reason)."""
    return ModelError(
        f"no reranker available: {reason}",
        public_reason="no reranker available: the one the server's settings name "
        "(reranker_model, learned_reranker) cannot be loaded (the server's log has the "
        'reason); send "rerank": false, or set rerank=off or those settings on the server',
    )


@functools.lru_cache(maxsize=256)
def _log_once(line: str) -> None:
    """A warning logged once per process (a tenant without a model asks again and again)."""
    log.warning("%s", line)
