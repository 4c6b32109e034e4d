"""The three retrievers behind one face for the tests: make one, ask it, read its chunk ids and
metadata, sync or async."""

from __future__ import annotations

from typing import Any

FRAMEWORKS = ("langchain", "llamaindex", "haystack")


def make(framework: str, tenant: str, **options: Any) -> Any:
    """The framework's ``LoaderRetriever``; ``k`` is Haystack's ``top_k``."""
    if framework == "langchain":
        from loader.integrations.langchain import LoaderRetriever

        return LoaderRetriever(tenant, **options)
    if framework == "llamaindex":
        from loader.integrations.llamaindex import LoaderRetriever

        return LoaderRetriever(tenant, **options)
    from loader.integrations.haystack import LoaderRetriever

    if "k" in options:
        options["top_k"] = options.pop("k")
    return LoaderRetriever(tenant, **options)


def results(framework: str, retriever: Any, question: str) -> list[dict[str, Any]]:
    """Each result's metadata, its text as ``text`` and its score as ``framework_score``."""
    if framework == "langchain":
        return [_row(doc.metadata, doc.page_content, None) for doc in retriever.invoke(question)]
    if framework == "llamaindex":
        return [
            _row(node.node.metadata, node.node.get_content(), node.score)
            for node in retriever.retrieve(question)
        ]
    documents = retriever.run(query=question)["documents"]
    return [_row(doc.meta, doc.content, doc.score) for doc in documents]


async def aresults(framework: str, retriever: Any, question: str) -> list[dict[str, Any]]:
    """``results`` through the framework's async entry point."""
    if framework == "langchain":
        docs = await retriever.ainvoke(question)
        return [_row(doc.metadata, doc.page_content, None) for doc in docs]
    if framework == "llamaindex":
        nodes = await retriever.aretrieve(question)
        return [_row(node.node.metadata, node.node.get_content(), node.score) for node in nodes]
    documents = (await retriever.run_async(query=question))["documents"]
    return [_row(doc.meta, doc.content, doc.score) for doc in documents]


def _row(metadata: dict[str, Any], text: str, score: float | None) -> dict[str, Any]:
    return {**metadata, "text": text, "framework_score": score}


def chunk_ids(rows: list[dict[str, Any]]) -> list[str]:
    return [row["chunk_id"] for row in rows]
