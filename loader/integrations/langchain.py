"""A LangChain retriever over the project's index: ``LoaderRetriever``, a ``BaseRetriever`` of
``langchain-core`` (``pip install 'loader[langchain]'``).

It searches through the stored templates exactly as ``loader search`` does
(``loader.integrations.core.TenantSearch``), for the one tenant it was made for, and returns
``Document`` objects: the chunk's text (title and heading path, then the body) as
``page_content``, the chunk id as ``id``, and ``heading_path``, ``source``, ``chunk_id``,
``score`` and the rest of ``loader.integrations.core.hit_metadata`` as ``metadata``.

Example::

    retriever = LoaderRetriever(tenant="default", k=3)
    docs = retriever.invoke("How long do refunds take?")
    docs = await retriever.ainvoke("How long do refunds take?", filters={"lang": "en"})
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import PrivateAttr

from loader.integrations.core import TenantSearch, hit_metadata, hit_text
from loader.query.result import SearchResult

if TYPE_CHECKING:
    pass

# Keywords LangChain itself passes on to the retriever with the caller's (invoke's ``verbose``).
_LANGCHAIN_KEYWORDS = ("verbose",)


class LoaderRetriever(BaseRetriever):
    """LangChain retriever over one tenant's chunks, searched as ``loader search`` does.

    Args:
        tenant: the only tenant searched; no call can change it (``tenant=`` in ``invoke`` is
            refused, and filters cannot name it).
        settings, config, client, async_client, embedder, reranker, **options: as for
            ``loader.integrations.core.TenantSearch``: the settings (default: resolved like
            the ``loader`` command's), and ``mode``, ``k``, ``candidates``, ``rerank``,
            ``one_per_document``, ``exact_match``, ``filters``, ``expand``, ``merge_adjacent``.
        tags, metadata: LangChain's own, for callbacks and tracing.

    A call (``invoke``, ``ainvoke``, ``batch``) takes the question and, as keywords, ``k`` and
    ``filters`` (``{"lang": "en", "tags": [...], "published_from": "now-1y", ...}``).

    Raises:
        loader.errors.ConfigError: a bad tenant or option when made; an unknown keyword or
            filter when called.
    """

    _search: TenantSearch = PrivateAttr()

    def __init__(
        self,
        tenant: str,
        *,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **options: Any,
    ) -> None:
        super().__init__(tags=tags, metadata=metadata)
        self._search = TenantSearch(tenant, **options)

    @property
    def tenant(self) -> str:
        """The tenant every call searches."""
        return self._search.tenant

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **call: Any
    ) -> list[Document]:
        return _documents(self._search.search(query, **_own(call)))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **call: Any
    ) -> list[Document]:
        return _documents(await self._search.asearch(query, **_own(call)))


def _own(call: dict[str, Any]) -> dict[str, Any]:
    """The caller's keywords, without those LangChain adds itself."""
    return {name: value for name, value in call.items() if name not in _LANGCHAIN_KEYWORDS}


def _documents(result: SearchResult) -> list[Document]:
    return [
        Document(page_content=hit_text(hit), metadata=hit_metadata(hit, result), id=hit.chunk_id)
        for hit in result.hits
    ]
