"""A LlamaIndex retriever over the project's index: ``LoaderRetriever``, a ``BaseRetriever`` of
``llama-index-core`` (``pip install 'loader[llamaindex]'``).

It searches through the stored templates exactly as ``loader search`` does
(``loader.integrations.core.TenantSearch``), for the one tenant it was made for, and returns
``NodeWithScore`` objects: a ``TextNode`` whose id is the chunk id, whose text is the chunk's
(title and heading path, then the body), whose source node is the document, and whose metadata
is ``loader.integrations.core.hit_metadata`` (``heading_path``, ``source``, ``chunk_id``,
``score``, ...), with the score the hit was ranked by.

Only ``source`` of the metadata reaches the LLM's prompt (for citing); the text already starts
with the title and heading path, and the scores and ranks would be noise there.

Example::

    retriever = LoaderRetriever(tenant="default", k=3)
    nodes = retriever.retrieve("How long do refunds take?")
    engine = RetrieverQueryEngine.from_args(retriever, llm=llm)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llama_index.core.callbacks import CallbackManager
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import (
    NodeRelationship,
    NodeWithScore,
    QueryBundle,
    RelatedNodeInfo,
    TextNode,
)

from loader.integrations.core import TenantSearch, hit_metadata, hit_text
from loader.query.result import SearchResult

if TYPE_CHECKING:
    pass

# The metadata an LLM sees with each node's text (LlamaIndex puts metadata in the prompt).
LLM_METADATA = ("source",)


class LoaderRetriever(BaseRetriever):
    """LlamaIndex retriever over one tenant's chunks, searched as ``loader search`` does.

    Args:
        tenant: the only tenant searched; nothing of a query can change it.
        settings, config, client, async_client, embedder, reranker, **options: as for
            ``loader.integrations.core.TenantSearch``: the settings (default: resolved like
            the ``loader`` command's), and ``mode``, ``k``, ``candidates``, ``rerank``,
            ``one_per_document``, ``exact_match``, ``filters``, ``expand``, ``merge_adjacent``.
        callback_manager, verbose: LlamaIndex's own.

    Raises:
        loader.errors.ConfigError: a bad tenant or option.
    """

    def __init__(
        self,
        tenant: str,
        *,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
        **options: Any,
    ) -> None:
        self._search = TenantSearch(tenant, **options)
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    @property
    def tenant(self) -> str:
        """The tenant every query searches."""
        return self._search.tenant

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return _nodes(self._search.search(query_bundle.query_str))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return _nodes(await self._search.asearch(query_bundle.query_str))


def _nodes(result: SearchResult) -> list[NodeWithScore]:
    nodes = []
    for hit in result.hits:
        metadata = hit_metadata(hit, result)
        node = TextNode(
            id_=hit.chunk_id,
            text=hit_text(hit),
            metadata=metadata,
            relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=hit.doc_id)},
            excluded_llm_metadata_keys=[key for key in metadata if key not in LLM_METADATA],
            excluded_embed_metadata_keys=list(metadata),
        )
        nodes.append(NodeWithScore(node=node, score=hit.final_score))
    return nodes
