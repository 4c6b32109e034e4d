"""Retrievers for Python RAG frameworks over the project's index, one module per framework:
``langchain`` (a LangChain ``BaseRetriever``), ``llamaindex`` (a LlamaIndex ``BaseRetriever``)
and ``haystack`` (a Haystack ``@component``), each installed with the extra of the same name
(``pip install 'loader[langchain]'``).

All three search through the stored templates exactly as ``loader search`` does, through the
one core in ``core`` (``TenantSearch`` over ``loader.query.search``): the mode, identifiers
first, one result per document, filters, recency and the rerank; the tenant fixed when the
retriever is made. Each module imports its framework; nothing else in ``loader`` imports this
package, so ``import loader`` and the base install need no framework.

A top layer, like ``loader.eval``: it may import ``loader.query``, ``loader.cluster``,
``loader.index.search_params`` and the shared modules.
"""
