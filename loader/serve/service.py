"""What the routes of ``loader serve`` share: ``SearchService`` holds the settings, the client,
the embedding model and the reranker (loaded at startup, or at the first request that asks for
one; a learned model is looked up at each such request, and read again when its files change),
and answers ``/health`` and ``/search``.
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
from loader.settings import LEARNED_RERANK, Settings, secret_values

log = logging.getLogger(__name__)

# Searches run in the worker threads of Starlette's thread pool (anyio's default: 40), all on one
# client: a connection pool as large, or urllib3 discards connections under load (and says so).
SEARCH_THREADS = 40
# The warning of an answer that rerank = auto left without its learned model.
NO_LEARNED = (
    "no rerank: rerank is auto and the learned reranker the server's settings name cannot be "
    "used (its log says why)"
)
# The models whose last failure is remembered (logged once per reason): one per tenant.
MAX_FAILURES_KEPT = 1024


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
        # A reranker given here (an app's, a test's) reranks every tenant's searches.
        self._given_reranker = reranker is not None
        self._reranker_lock = threading.Lock()
        self._reranker_failure: LoaderError | None = None  # the shared one's, for good
        self._failure_lock = threading.Lock()
        self._said_failure: dict[str, str] = {}  # the model ("" the shared one): last logged
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
        shared = rerank_check.choose_reranker(settings).kind != rerank_check.LEARNED
        if settings.rerank == "auto" and shared:
            self.default_rerank(None)  # the shared reranker loads now; a learned one per tenant

    def default_rerank(self, tenant: str | None) -> tuple[bool, tuple[str, ...]]:
        """Whether a request of ``tenant`` that leaves ``rerank`` out reranks, and the warnings
        its answer then carries: the rerank setting; with ``auto``, whether the tenant has a
        reranker. The tenant's own learned model (or the one ``learned_reranker_tenants`` lends
        it) reranks whenever its files pass their checks (``search`` answers without rerank,
        saying so, while they do not); the reranker every tenant shares (a cross-encoder, the
        keyword one) is decided once, on whether it loads. When there is none, a warning on the
        log says why and each such answer says there is none."""
        if self.settings.rerank != "auto":
            return self.settings.rerank == "on", ()
        choice = rerank_check.choose_reranker(self.settings, tenant)
        if choice.kind == rerank_check.LEARNED or self._given_reranker:
            return True, ()
        if choice.kind and not choice.problem:
            return self._shared_default(tenant)
        # Judged from the files (a cross-encoder that is not on this machine): nothing to load.
        _log_once(scrub_secrets(f"no rerank (rerank = auto): {choice.problem}", self.secrets))
        return False, (f"no rerank: rerank is auto and {self._no_reranker()} (its log says why)",)

    def _shared_default(self, tenant: str | None) -> tuple[bool, tuple[str, ...]]:
        """``default_rerank`` for the reranker every tenant shares: decided once, on whether
        it loads (loaded now: the first answer is fast)."""
        with self._reranker_lock:
            decided = self._default_rerank
        if decided is not None:
            return decided
        rerank, problem = True, None
        if self._shared_reranker(tenant)[0] is None:
            rerank, problem = False, str(self._reranker_failure)
        warnings: tuple[str, ...] = ()
        if not rerank:
            log.warning("%s", scrub_secrets(str(problem), self.secrets))
            warnings = (f"no rerank: rerank is auto and {self._no_reranker()} (its log says why)",)
        with self._reranker_lock:
            self._default_rerank = (rerank, warnings)
        return rerank, warnings

    def _no_reranker(self) -> str:
        """Which reranker the settings name is not here, by its setting (never a folder)."""
        settings = self.settings
        if settings.learned_reranker or settings.rerank_backend == LEARNED_RERANK:
            return (
                "neither a cross-encoder nor a learned reranker of this tenant is available on "
                "this server (reranker_model, learned_reranker)"
            )
        return f"reranker_model {settings.reranker_model!r} is not a cross-encoder on this server"

    def reranker_for(self, tenant: str) -> tuple[Any, LoaderError | None]:
        """The reranker of ``tenant``'s searches, or ``None`` and why it cannot be used (the
        error a request that asked for a rerank answers with): the tenant's own learned model
        (or the one ``learned_reranker_tenants`` lends it), else the reranker every tenant
        shares (a cross-encoder or the keyword one, loaded at the first call, once and for
        all). A learned model is looked up at every call (``load_learned``: two ``stat`` calls
        when nothing changed): read again when its files change, the model read before serving
        until new files pass their checks; files refused are each rerank request's error (503)
        until they change, and the server answers everything else."""
        if self._given_reranker:
            return self.reranker, None
        choice = rerank_check.choose_reranker(self.settings, tenant)
        if choice.kind == rerank_check.LEARNED:
            from loader.models.rerank.learned import load_learned

            try:
                return load_learned(choice.model), None
            except (ModelError, ConfigError) as exc:
                return None, self._unusable(exc, choice.model)
        if not choice.kind:
            try:
                choice.require()
            except RerankerUnavailableError as exc:  # no such model here: the request's 4xx
                return None, exc
        return self._shared_reranker(tenant)

    def _shared_reranker(self, tenant: str | None) -> tuple[Any, LoaderError | None]:
        """The reranker every tenant shares, loaded at the first call (once and for all)."""
        with self._reranker_lock:
            if self.reranker is None and self._reranker_failure is None:
                from loader.models.rerank import load_reranker

                try:
                    self.reranker = load_reranker(self.settings, tenant)
                except RerankerUnavailableError as exc:  # no such model here: the 4xx
                    log.warning("%s", scrub_secrets(str(exc), self.secrets))
                    self._reranker_failure = exc
                except (ModelError, ConfigError) as exc:
                    self._reranker_failure = self._unusable(exc, "")
            return self.reranker, self._reranker_failure

    def _unusable(self, exc: LoaderError, folder: str) -> ModelError:
        """The 503 of a reranker that cannot be loaded, logged once per reason and model (a
        learned ``folder``, else ``""``): the public reason names both settings, never the
        server's folders."""
        reason = scrub_secrets(str(exc), self.secrets)
        with self._failure_lock:
            said = self._said_failure.get(folder)
            if said is None and len(self._said_failure) >= MAX_FAILURES_KEPT:
                self._said_failure.pop(next(iter(self._said_failure)))
            self._said_failure[folder] = reason
        if said != reason:
            log.warning(
                "the reranker cannot be used: requests that ask for a rerank answer 503, the "
                "others are served%s: %s",
                " (tried again when its files change)" if folder else "",
                reason,
            )
        return ModelError(
            f"no reranker available: {exc}",
            public_reason="no reranker available: the one the server's settings name "
            "(reranker_model, learned_reranker) cannot be loaded (the server's log has the "
            'reason); send "rerank": false, or set rerank=off or those settings on the server',
        )

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
        asked = body.rerank is not None
        if not asked:  # the server's default, and its warning (no server paths)
            rerank, warnings = self.default_rerank(tenant)
            body = body.model_copy(update={"rerank": rerank})
        try:
            request = body.to_request(self.settings, tenant)
        except LoaderError as exc:
            return loader_error(exc, self.secrets)
        request = request.replace(
            warnings=(*warnings, *request.warnings),
            rerank_unavailable=request.rerank_unavailable or bool(warnings),
        )
        reranker, failure = self.reranker_for(tenant) if request.rerank else (None, None)
        if request.rerank and reranker is None:
            assert failure is not None
            if asked or self.settings.rerank != "auto":
                return loader_error(failure, self.secrets)
            # auto with a learned model whose files fail their checks: fusion, saying so.
            request = request.replace(
                rerank=False, warnings=(*request.warnings, NO_LEARNED), rerank_unavailable=True
            )
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


@functools.lru_cache(maxsize=256)
def _log_once(line: str) -> None:
    """A warning logged once per process (a tenant without a model asks again and again)."""
    log.warning("%s", line)
