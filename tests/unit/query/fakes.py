"""Fakes for the query path without a cluster: a client that answers like ``_search/template``,
an embedder, a reranker, a rewriter, and a small corpus."""

from __future__ import annotations

from typing import Any

import numpy as np

from loader.query.request import SearchRequest
from loader.query.search import search
from loader.settings import Settings

# rerank on: the tests give a FakeReranker (auto would find no cross-encoder on disk).
SETTINGS = Settings(index_name="docs", rerank="on")


def chunk(chunk_id: str, body: str, **extra: Any) -> dict[str, Any]:
    source = {
        "chunk_id": chunk_id,
        "doc_id": extra.pop("doc_id", chunk_id.split("-")[0]),
        "source": f"{chunk_id}.md",
        "title": "Guide",
        "heading_path": "Part > Section",
        "content": f"Guide > Part > Section\n\n{body}",
        "body": body,
        "tenant": "A",
        "position": 0,
    }
    return source | extra


class FakeClient:
    """Answers search_template from a table: query_text -> ranked chunks; records each call."""

    def __init__(self, answers: dict[str, list[dict[str, Any]]]) -> None:
        self.answers = answers
        self.calls: list[dict[str, Any]] = []

    def search_template(self, *, index: str, body: dict, params: dict | None = None) -> dict:
        self.calls.append({"index": index, "body": body, "params": params or {}})
        ranked = self.answers.get(body["params"]["query_text"], [])
        size = int(body["params"]["size"])
        hits = [
            {"_id": doc["chunk_id"], "_score": 10.0 - rank, "_source": doc}
            for rank, doc in enumerate(ranked[:size])
        ]
        return {"hits": {"hits": hits}}


class FakeEmbedder:
    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.texts.extend(texts)
        return np.ones((len(texts), 3), dtype=np.float32)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self.embed(texts)


class FakeReranker:
    """Scores a passage by the number of times it contains the letter "z" (the
    ``loader.models.rerank.Reranker`` protocol: no lookup, the hits' text)."""

    name = kind = "fake"

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    def lookup(self, query: Any, hits: Any) -> None:
        return None

    def score(self, query: Any, hits: Any, answers: Any = None) -> list[float]:
        return self.rerank(query.question, [hit.text or hit.body for hit in hits])

    def rerank(self, question: str, passages: list[str]) -> list[float]:
        self.calls.append((question, passages))
        return [float(p.count("z")) for p in passages]


class FakeRewriter:
    def __init__(self, queries: list[str]) -> None:
        self.queries = queries
        self.seen: list[tuple[list, str]] = []

    def rewrite(self, history: list, message: str) -> list[str]:
        self.seen.append((history, message))
        return self.queries


CORPUS = [chunk("a-0", "alpha"), chunk("b-0", "bravo zz"), chunk("c-0", "charlie z")]


def run(question: Any = "q", client: FakeClient | None = None, **kwargs: Any):
    """``search`` of a request built from ``SETTINGS`` and ``kwargs`` (tenant "A", fake models)."""
    client = client or FakeClient({"q": CORPUS})
    kwargs.setdefault("tenant", "A")
    models = {
        "embedder": kwargs.pop("embedder", FakeEmbedder()),
        "reranker": kwargs.pop("reranker", FakeReranker()),
        "rewriter": kwargs.pop("rewriter", None),
    }
    request = SearchRequest.from_settings(SETTINGS, question, **kwargs)
    return search(request, SETTINGS, client=client, **models)


class FakeAsyncClient(FakeClient):
    """``FakeClient`` for ``asearch``: the same answers, awaited."""

    async def search_template(self, *, index: str, body: dict, params: dict | None = None) -> dict:
        return FakeClient.search_template(self, index=index, body=body, params=params)
