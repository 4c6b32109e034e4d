"""What every framework retriever shares: ``TenantSearch``, one tenant's search through the
stored templates, exactly as ``loader search`` runs it (``loader.query.search``), and
``hit_metadata``, what a result carries into the framework's document.

The tenant is fixed when a ``TenantSearch`` is made: a call takes a question and at most ``k``
and ``filters`` (``CALL_OPTIONS``); any other keyword, ``tenant`` first of all, is refused with
a ``ConfigError``, and filters are the templates' own (``lang``, ``tags``, dates, recency), which
never widen the tenant filter.

Example::

    searcher = TenantSearch("acme", mode="hybrid-rrf", one_per_document=True)
    result = searcher.search("How long do refunds take?", k=3, filters={"lang": "en"})
    result = await searcher.asearch("How long do refunds take?")
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loader.cluster.client import connect, connect_async, require_cluster, require_cluster_async
from loader.errors import ConfigError
from loader.index.search_params import FILTER_PARAMETERS
from loader.query.request import SearchFilters, SearchRequest
from loader.query.result import SearchHit, SearchResult
from loader.query.search import asearch, search
from loader.resolve import resolve_settings
from loader.settings import Settings

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

    from loader.models.embedding import Embedder
    from loader.models.rerank import Reranker

log = logging.getLogger(__name__)

# What a retriever is made with, besides its tenant: SearchRequest's fields of the same names
# (their defaults are the settings', as for `loader search`).
SEARCH_OPTIONS = (
    "mode",
    "k",
    "candidates",
    "rerank",
    "one_per_document",
    "exact_match",
    "filters",
    "expand",
    "merge_adjacent",
)
# What one call may change. Not the tenant: it is fixed when the retriever is made.
CALL_OPTIONS = ("k", "filters")
# A request stands ready before the first question, so that bad options fail when the
# retriever is made; each call replaces this question.
_NO_QUESTION_YET = "(no question yet)"


def as_filters(value: SearchFilters | Mapping[str, Any] | None) -> SearchFilters:
    """``value`` as ``SearchFilters``: ``None`` for none, or a mapping of the templates' filter
    parameters (``lang``, ``tags``, ``published_from``, ``published_to``, ``decay_scale``).

    Raises:
        ConfigError: any other key (``tenant`` above all: it is not a filter), or a value of
            the wrong kind.
    """
    if value is None:
        return SearchFilters()
    if isinstance(value, SearchFilters):
        return value
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"filters must be a mapping of {', '.join(FILTER_PARAMETERS)}, "
            f"got {type(value).__name__}"
        )
    unknown = sorted(str(key) for key in value if key not in FILTER_PARAMETERS)
    if unknown:
        raise ConfigError(
            f"filters take {', '.join(FILTER_PARAMETERS)}; not {', '.join(unknown)}"
            + (" (the tenant is fixed when the retriever is made)" if "tenant" in unknown else "")
        )
    fields = dict(value)
    tags = fields.get("tags")
    if isinstance(tags, str):
        fields["tags"] = (tags,)
    elif isinstance(tags, list | tuple | set | frozenset):
        fields["tags"] = tuple(tags)
    elif tags is not None:  # tuple() of a number raised TypeError; of a dict took its keys
        raise ConfigError(
            f"filters: tags must be a string or a list of strings, got {type(tags).__name__}"
        )
    return SearchFilters(**fields)


class TenantSearch:
    """One tenant's search through the stored templates, as ``loader search`` runs it.

    Args:
        tenant: the only tenant searched, for the life of this object.
        settings: resolved settings; default: resolved as the ``loader`` command does, from
            ``config`` (or ``loader.toml`` in the working directory) and ``LOADER_*`` / the
            environment.
        config: a ``loader.toml`` to resolve the settings from (not with ``settings``).
        client: an ``OpenSearch`` client to reuse (default: ``connect(settings)``, which
            sends nothing until the first search).
        async_client: an ``AsyncOpenSearch`` of the event loop that calls ``asearch``
            (``connect_async``); default: one per call, closed after it, as aiohttp's
            connections belong to one event loop.
        embedder, reranker: models to reuse (default: the settings', loaded once per process).
        **options: ``SEARCH_OPTIONS``, as ``loader search``'s options: ``mode``, ``k``,
            ``candidates``, ``rerank``, ``one_per_document``, ``exact_match``, ``filters`` (a
            mapping, see ``as_filters``), ``expand``, ``merge_adjacent``; ``None`` for the
            settings' default. A learned rerank is the tenant's own model, or none
            (``loader.models.rerank.tenants``), and its mode and depth are the model's unless
            given here.

    Raises:
        ConfigError: an unknown option, a bad tenant or option value (named), unreadable
            settings; at once, before any question.
    """

    def __init__(
        self,
        tenant: str,
        *,
        settings: Settings | None = None,
        config: str | Path | None = None,
        client: OpenSearch | None = None,
        async_client: Any = None,
        embedder: Embedder | None = None,
        reranker: Reranker | None = None,
        **options: Any,
    ) -> None:
        unknown = sorted(set(options) - set(SEARCH_OPTIONS))
        if unknown:
            raise ConfigError(
                f"unknown search option {', '.join(unknown)}; the options are "
                f"{', '.join(SEARCH_OPTIONS)}"
            )
        if not isinstance(tenant, str):  # None would reach SearchRequest as no tenant at all
            raise ConfigError(
                f"tenant is required: the one tenant this retriever searches, got {tenant!r:.40}"
            )
        if settings is not None and config is not None:
            raise ConfigError("give settings or config, not both")
        self.settings = settings if settings is not None else resolve_settings(config)[0]
        self.options = {name: value for name, value in options.items() if value is not None}
        given = dict(self.options, filters=as_filters(self.options.get("filters")))
        self._request = SearchRequest.from_settings(
            self.settings, _NO_QUESTION_YET, tenant=tenant, **given
        )
        self._client = client if client is not None else connect(self.settings)  # no request yet
        self._async_client = async_client
        self._embedder, self._reranker = embedder, reranker
        self._cluster_checked = client is not None
        self._warned: set[str] = set()

    @property
    def tenant(self) -> str:
        """The tenant every search of this object is for."""
        return self._request.tenant

    def request(self, question: str, **call: Any) -> SearchRequest:
        """The request of one call: the question, ``k`` and ``filters`` (each filter given
        replaces the retriever's of the same name).

        Raises:
            ConfigError: an option other than ``CALL_OPTIONS`` (``tenant``: it is fixed), or a
                bad value.
        """
        unknown = sorted(set(call) - set(CALL_OPTIONS))
        if unknown:
            fixed = f" (tenant {self.tenant!r} is fixed when the retriever is made)"
            raise ConfigError(
                f"unknown search option {', '.join(unknown)} for one call; a call takes "
                f"{', '.join(CALL_OPTIONS)}" + (fixed if "tenant" in unknown else "")
            )
        changes: dict[str, Any] = {"question": question}
        if call.get("k") is not None:
            changes["k"] = call["k"]
        if call.get("filters") is not None:
            given = as_filters(call["filters"])
            overrides = {
                field.name: getattr(given, field.name)
                for field in dataclasses.fields(given)
                if getattr(given, field.name) not in (None, ())
            }
            changes["filters"] = dataclasses.replace(self._request.filters, **overrides)
        return self._request.replace(**changes)

    def search(self, question: str, **call: Any) -> SearchResult:
        """``loader.query.search.search`` of ``question`` for this tenant (see ``request``)."""
        request = self.request(question, **call)
        if not self._cluster_checked:
            require_cluster(self._client, self.settings)  # before the first model loads
            self._cluster_checked = True
        result = search(
            request,
            self.settings,
            client=self._client,
            embedder=self._embedder,
            reranker=self._reranker,
        )
        return self._warn(result)

    async def asearch(self, question: str, **call: Any) -> SearchResult:
        """``search`` on asyncio (``loader.query.search.asearch``): the OpenSearch calls on the
        async client, the model work in a worker thread."""
        request = self.request(question, **call)
        client = self._async_client or connect_async(self.settings)
        try:
            if not self._cluster_checked:
                await require_cluster_async(client, self.settings)
                self._cluster_checked = True
            result = await asearch(
                request,
                self.settings,
                client=client,
                embedder=self._embedder,
                reranker=self._reranker,
            )
        finally:
            if client is not self._async_client:
                await client.close()
        return self._warn(result)

    def _warn(self, result: SearchResult) -> SearchResult:
        """Each warning of the results logged once (``rerank = auto`` without a cross-encoder
        would otherwise repeat on every call)."""
        for warning in result.warnings:
            if warning not in self._warned:
                self._warned.add(warning)
                log.warning("%s", warning)
        return result


def hit_metadata(hit: SearchHit, result: SearchResult) -> dict[str, Any]:
    """What a framework document carries besides the text: the chunk's identity and place
    (``chunk_id``, ``doc_id``, ``source``, ``title``, ``heading_path`` as a list and ``heading``
    as ``Title > Section > ...``), its fields (tenant, collection, lang, tags, published, page),
    ``score`` (``SearchHit.final_score``) and every stage's ``scores`` and ``ranks``, and the search
    ``mode``."""
    return {
        "chunk_id": hit.chunk_id,
        "doc_id": hit.doc_id,
        "source": hit.source,
        "title": hit.title,
        "heading_path": list(hit.heading_path),
        "heading": hit.heading,
        "tenant": hit.tenant,
        "collection": hit.collection,
        "lang": hit.lang,
        "tags": list(hit.tags),
        "published": hit.published,
        "page": hit.page,
        "score": hit.final_score,
        "scores": dict(hit.scores),
        "ranks": dict(hit.ranks),
        "mode": result.mode,
    }


def hit_text(hit: SearchHit) -> str:
    """The chunk's text as indexed: its title and heading path, then its body (after context
    expansion or merging, theirs)."""
    return hit.text or hit.body
