"""The query path without a cluster: query bounding, fusion, rerank order and context steps,
against a fake client that answers like ``_search/template`` (the request's checks are in
test_request.py)."""

from __future__ import annotations

from typing import Any

import opensearchpy
import pytest

from loader.errors import ClusterError, QueryError
from loader.query.request import MAX_QUESTION_CHARS, SearchFilters, SearchRequest
from loader.query.result import format_result
from loader.query.rewrite import MAX_QUERIES
from loader.query.search import MAX_BM25_TERMS, bm25_text, search
from tests.unit.query.fakes import (
    CORPUS,
    SETTINGS,
    FakeClient,
    FakeEmbedder,
    FakeReranker,
    FakeRewriter,
    chunk,
    run,
)


def test_bm25_text_bounds_terms() -> None:
    assert bm25_text("refund for order E1043, please", max_terms=3) == "refund for order"
    assert bm25_text("a b") == "a b"
    text = " ".join(f"w{n}" for n in range(1000))
    assert len(bm25_text(text).split()) == MAX_BM25_TERMS
    # CJK and emoji: one term per character
    assert bm25_text("退款政策说明", max_terms=2) == "退款"
    assert bm25_text("🙂🙂🙂", max_terms=2) == "🙂🙂"
    assert bm25_text("?!?!...", max_terms=1) == "?!?!..."  # ASCII punctuation makes no term


def test_template_pipeline_and_params_per_mode() -> None:
    expected = {
        "bm25": ("docs-bm25", {}),
        "vector": ("docs-vector", {}),
        "hybrid-rrf": ("docs-hybrid", {"search_pipeline": "docs-rrf"}),
        "hybrid-minmax": ("docs-hybrid", {"search_pipeline": "docs-minmax"}),
    }
    for mode, (template, url_params) in expected.items():
        client, embedder = FakeClient({"q": CORPUS}), FakeEmbedder()
        filters = SearchFilters(lang="en", tags=("x",), published_from="2024-01-01")
        run(client=client, mode=mode, embedder=embedder, filters=filters, candidates=7, k=2)
        (call,) = client.calls
        assert call["index"] == "docs"
        assert call["body"]["id"] == template
        assert call["params"] == url_params
        params = call["body"]["params"]
        assert params["tenant"] == "A" and params["size"] == 7 and params["k"] == 7
        assert params["lang"] == "en" and params["tags"] == ["x"]
        assert params["published_from"] == "2024-01-01" and "decay_scale" not in params
        assert ("query_vector" in params) == (mode != "bm25")
        assert embedder.texts == ([] if mode == "bm25" else ["q"])


def test_rerank_orders_by_score_and_keeps_k() -> None:
    result = run(k=2)
    assert [hit.chunk_id for hit in result.hits] == ["b-0", "c-0"]
    assert [hit.ranks for hit in result.hits] == [
        {"retrieval": 2, "rerank": 1},
        {"retrieval": 3, "rerank": 2},
    ]
    assert result.hits[0].scores == {"retrieval": 9.0, "rerank": 2.0}
    assert result.reranked and result.rerank_query == "q" and result.candidates == 3
    assert set(result.timings) == {
        "rewrite_ms",
        "embed_ms",
        "retrieve_ms",
        "rerank_ms",
        "context_ms",
        "total_ms",
    }


def test_without_rerank_retrieval_order_is_kept() -> None:
    reranker = FakeReranker()
    result = run(rerank=False, reranker=reranker, k=2)
    assert [hit.chunk_id for hit in result.hits] == ["a-0", "b-0"]
    assert reranker.calls == [] and not result.reranked and result.timings["rerank_ms"] == 0.0


def test_rewritten_queries_are_fused_and_the_first_is_reranked_against() -> None:
    client = FakeClient({"one": [CORPUS[0], CORPUS[1]], "two": [CORPUS[2], CORPUS[1]]})
    rewriter = FakeRewriter(["one", "two", "ONE", " "])
    reranker = FakeReranker()
    history = [{"role": "user", "content": "earlier"}]
    result = run("latest", client=client, rewriter=rewriter, history=history, reranker=reranker)
    assert rewriter.seen == [(history, "latest")]
    assert result.queries == ["one", "two"]  # duplicates and blanks dropped
    assert [c["body"]["params"]["query_text"] for c in client.calls] == ["one", "two"]
    assert reranker.calls[0][0] == "one"
    by_id = {hit.chunk_id: hit for hit in result.hits}
    assert set(by_id) == {"a-0", "b-0", "c-0"}
    assert by_id["b-0"].ranks["retrieval"] == 1  # in both lists: fused first
    assert by_id["b-0"].ranks["query_1"] == 2 and by_id["b-0"].ranks["query_2"] == 2
    assert by_id["b-0"].scores["retrieval"] == pytest.approx(2 / 62)


def test_rewriter_queries_are_capped_and_an_empty_answer_falls_back() -> None:
    many = [f"q{n}" for n in range(10)]
    client = FakeClient({})
    result = run("latest", client=client, rewriter=FakeRewriter(many), rerank=False)
    assert result.queries == many[:MAX_QUERIES]
    assert run("latest", rewriter=FakeRewriter([]), rerank=False).queries == ["latest"]


def test_long_question_is_truncated_for_every_stage() -> None:
    client, embedder, reranker = FakeClient({}), FakeEmbedder(), FakeReranker()
    question = "refund " * 3000
    result = run(question, client=client, embedder=embedder, reranker=reranker)
    assert result.truncated and len(result.question) <= MAX_QUESTION_CHARS
    assert embedder.texts == [result.question]
    query_text = client.calls[0]["body"]["params"]["query_text"]
    assert len(query_text.split()) == MAX_BM25_TERMS


def test_context_steps_and_prompt_order() -> None:
    doc = [
        chunk("d-0", "One. Two.", doc_id="d", position=0, section_id="s", parent_text="P"),
        chunk("d-1", "Two. Three.", doc_id="d", position=1, section_id="s", parent_text="P"),
        chunk("e-0", "Other.", doc_id="e", position=0, window="Before. Other. After."),
    ]
    client = FakeClient({"q": doc})
    parents = run(client=client, rerank=False, expand="parent")
    assert [(hit.chunk_id, hit.body) for hit in parents.hits] == [("d-0", "P"), ("e-0", "Other.")]
    windows = run(client=client, rerank=False, expand="window")
    assert windows.hits[2].body == "Before. Other. After."
    merged = run(client=client, rerank=False, merge_adjacent=True)
    assert [hit.body for hit in merged.hits] == ["One. Two. Three.", "Other."]
    ordered = run(client=FakeClient({"q": CORPUS}), rerank=False, prompt_order=True)
    assert [hit.chunk_id for hit in ordered.hits] == ["a-0", "c-0", "b-0"]


def test_result_to_dict_is_json_ready() -> None:
    import json

    data = run(k=1).to_dict()
    json.dumps(data)
    (hit,) = data["hits"]
    assert hit["heading_path"] == ["Part", "Section"] and hit["chunk_id"] == "b-0"
    assert hit["scores"]["rerank"] == 2.0 and hit["ranks"]["rerank"] == 1


def test_format_result_lines() -> None:
    result = run(k=2)
    result.timings = dict.fromkeys(result.timings, 1.0)
    assert format_result(result, snippet_chars=5) == [
        "1. Guide > Part > Section  (b-0.md)",
        "   chunk b-0 | retrieval #2 9.0000 | rerank #1 2.0000",
        "   bravo…",
        "2. Guide > Part > Section  (c-0.md)",
        "   chunk c-0 | retrieval #3 8.0000 | rerank #2 1.0000",
        "   charl…",
        "2 results of 3 candidates for tenant 'A' (hybrid-rrf, reranked by fake) in 1.0 ms: "
        "embed 1.0 ms, retrieve 1.0 ms, rerank 1.0 ms",
    ]
    # The summary names the reranker that ran, as --json's reranker does: "reranked" alone
    # did not say whether a cross-encoder or which tenant's learned model reordered the hits.
    result.reranker = {"kind": "learned", "model": "models/learned/acme"}
    assert "(hybrid-rrf, reranked by learned models/learned/acme) in" in format_result(result)[-1]
    result.reranker = {"kind": "cross-encoder", "model": "cross-encoder/ms-marco-MiniLM-L-6-v2"}
    assert (
        "reranked by cross-encoder cross-encoder/ms-marco-MiniLM-L-6-v2)"
        in (format_result(result)[-1])
    )
    fused = run("latest", rewriter=FakeRewriter(["q", "other"]), rerank=False, k=1)
    lines = format_result(fused)
    assert lines[0] == "queries: q | other"
    assert lines[2].startswith("   chunk a-0 | retrieval #1 0.0164 | query_1 #1 10.0000")
    long = run("word " * 1000, client=FakeClient({}))
    assert format_result(long)[0].startswith("! the question was cut to ")


def test_rerank_default_is_the_setting() -> None:
    reranker = FakeReranker()
    settings = SETTINGS.replace(rerank=False)
    request = SearchRequest.from_settings(settings, "q", tenant="A")
    result = search(request, settings, client=FakeClient({"q": CORPUS}), reranker=reranker)
    assert not result.reranked and reranker.calls == []
    request = SearchRequest.from_settings(settings, "q", tenant="A", rerank=True)
    result = search(request, settings, client=FakeClient({"q": CORPUS}), reranker=reranker)
    assert result.reranked and len(reranker.calls) == 1
    assert run().reranked  # the default setting is on


class RefusingClient:
    """Answers every search like OpenSearch answers a parameter it cannot parse (HTTP 400)."""

    def search_template(self, **_kwargs: Any) -> dict:
        info = {
            "error": {
                "root_cause": [
                    {
                        "type": "parse_exception",
                        "reason": "failed to parse date field [x]\nwith format [y]",
                        "index": "docs-v1",
                    }
                ],
                "type": "search_phase_execution_exception",
            },
            "status": 400,
        }
        raise opensearchpy.RequestError(400, "search_phase_execution_exception", info)


def test_a_bad_request_from_opensearch_is_a_query_error_without_the_url() -> None:
    settings = SETTINGS.replace(opensearch_url="http://admin:s3cret@10.1.2.3:9200")
    with pytest.raises(QueryError) as raised:
        request = SearchRequest.from_settings(settings, "q", tenant="A", mode="bm25", rerank=False)
        search(request, settings, client=RefusingClient())
    message = str(raised.value)
    assert message == (
        "OpenSearch refused the search as a bad request: parse_exception: failed to parse date "
        "field [x] with format [y]"
    )
    assert not isinstance(raised.value, ClusterError) and QueryError.exit_code == 11


def test_the_result_names_the_reranker_that_ran_or_why_none_did(tmp_path) -> None:
    """Issue #52: which reranker ran was only a stderr line; the result (``loader search
    --json``, serve's answer, the query log) names its kind and model, or says why none ran."""
    from loader.models.rerank import load_reranker

    keyword = load_reranker(SETTINGS.replace(rerank_backend="keyword"))
    ran = run(reranker=keyword)
    assert ran.reranker == {"kind": "keyword", "model": "keyword"} and ran.rerank_skipped == ""
    assert run().to_dict()["reranker"] == {"kind": "fake", "model": "fake"}

    off = run(rerank=False).to_dict()
    assert (off["reranker"], off["rerank_skipped"]) == (None, "off")
    nothing = run(client=FakeClient({}))
    assert (nothing.reranker, nothing.rerank_skipped) == (None, "nothing to rerank")

    # rerank = auto and no reranker on this machine: off, and the result says it was unavailable
    auto = SETTINGS.replace(rerank="auto", reranker_model=str(tmp_path / "no-such-model"))
    request = SearchRequest.from_settings(auto, "q", tenant="A")
    result = search(request, auto, client=FakeClient({"q": CORPUS}), embedder=FakeEmbedder())
    assert (result.reranker, result.rerank_skipped) == (None, "unavailable")
    assert result.warnings[0].startswith("no rerank (rerank = auto): ")
