"""A Haystack retriever over the project's index: ``LoaderRetriever``, a ``@component`` of
``haystack-ai`` (``pip install 'loader[haystack]'``) with ``run`` and ``run_async``.

It searches through the stored templates exactly as ``loader search`` does
(``loader.integrations.core.TenantSearch``), for the one tenant it was made for, and returns
``{"documents": [Document, ...]}``: the chunk id as ``id``, the chunk's text (title and heading
path, then the body) as ``content``, the score the hit was ranked by as ``score``, and
``loader.integrations.core.hit_metadata`` (``heading_path``, ``source``, ``chunk_id``,
``score``, ...) as ``meta``.

Example::

    retriever = LoaderRetriever(tenant="default", top_k=3)
    retriever.run(query="How long do refunds take?")["documents"]
    pipeline.add_component("retriever", retriever)   # query, top_k, filters as inputs
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from haystack import Document, component, default_from_dict, default_to_dict

from loader.errors import ConfigError
from loader.integrations.core import TenantSearch, hit_metadata, hit_text
from loader.query.result import SearchResult
from loader.settings import Settings

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

    from loader.models.embedding import Embedder
    from loader.models.rerank import Reranker


@component
class LoaderRetriever:
    """Haystack retriever over one tenant's chunks, searched as ``loader search`` does.

    Args:
        tenant: the only tenant searched; no input of ``run`` can change it.
        top_k: results per query (default: the ``top_k`` setting); ``run``'s ``top_k`` wins.
        config: a ``loader.toml`` to resolve the settings from (default: resolved like the
            ``loader`` command's, from ``loader.toml`` in the working directory and the
            environment); kept by ``to_dict``.
        settings, client, async_client, embedder, reranker: objects to reuse, as for
            ``loader.integrations.core.TenantSearch``; a retriever made with one of them
            cannot be serialized (``to_dict``).
        **options: ``mode``, ``candidates``, ``rerank``, ``one_per_document``, ``exact_match``,
            ``filters``, ``expand``, ``merge_adjacent``, as for ``loader search``.

    Inputs of ``run`` / ``run_async``: ``query``, and optionally ``top_k`` and ``filters``: the
    templates' own (``{"lang": "en", "tags": [...], "published_from": "now-1y", ...}``), which
    replace the retriever's of the same name; Haystack's filter syntax is not read.

    Raises:
        loader.errors.ConfigError: a bad tenant or option when made; an unknown filter when run.
    """

    def __init__(
        self,
        tenant: str,
        *,
        top_k: int | None = None,
        config: str | None = None,
        settings: Settings | None = None,
        client: OpenSearch | None = None,
        async_client: Any = None,
        embedder: Embedder | None = None,
        reranker: Reranker | None = None,
        **options: Any,
    ) -> None:
        self._init_parameters = {"tenant": tenant, "top_k": top_k, "config": config, **options}
        self._objects = [
            name
            for name, value in (
                ("settings", settings),
                ("client", client),
                ("async_client", async_client),
                ("embedder", embedder),
                ("reranker", reranker),
            )
            if value is not None
        ]
        self._search = TenantSearch(
            tenant,
            settings=settings,
            config=Path(config) if config is not None else None,
            client=client,
            async_client=async_client,
            embedder=embedder,
            reranker=reranker,
            k=top_k,
            **options,
        )

    @property
    def tenant(self) -> str:
        """The tenant every run searches."""
        return self._search.tenant

    def to_dict(self) -> dict[str, Any]:
        """The component as Haystack serializes it: its init parameters (the settings are
        resolved again where it is loaded, from ``config`` and that environment: no password
        is written).

        Raises:
            ConfigError: it was made with an object (``settings``, a client, a model).
        """
        if self._objects:
            raise ConfigError(
                f"a LoaderRetriever made with {', '.join(self._objects)} cannot be serialized; "
                "give config= (a loader.toml) and the environment instead"
            )
        return default_to_dict(self, **self._init_parameters)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LoaderRetriever:
        """The component ``to_dict`` described."""
        return default_from_dict(cls, data)

    @component.output_types(documents=list[Document])
    def run(
        self, query: str, top_k: int | None = None, filters: dict[str, Any] | None = None
    ) -> dict[str, list[Document]]:
        """The chunks of this tenant that ``loader search`` finds for ``query``."""
        return {"documents": _documents(self._search.search(query, k=top_k, filters=filters))}

    @component.output_types(documents=list[Document])
    async def run_async(
        self, query: str, top_k: int | None = None, filters: dict[str, Any] | None = None
    ) -> dict[str, list[Document]]:
        """``run`` on asyncio: the OpenSearch calls on the async client."""
        result = await self._search.asearch(query, k=top_k, filters=filters)
        return {"documents": _documents(result)}


def _documents(result: SearchResult) -> list[Document]:
    return [
        Document(
            id=hit.chunk_id,
            content=hit_text(hit),
            meta=hit_metadata(hit, result),
            score=hit.final_score,
        )
        for hit in result.hits
    ]
