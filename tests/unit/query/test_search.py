"""The query path without a cluster: argument checks, query bounding, fusion, rerank order and
context steps, against a fake client that answers like ``_search/template``."""

from __future__ import annotations

import datetime
from typing import Any

import numpy as np
import opensearchpy
import pytest

from loader.errors import ClusterError, ConfigError, QueryError
from loader.query.search import (
    MAX_BM25_TERMS,
    MAX_QUERIES,
    MAX_QUESTION_CHARS,
    SearchFilters,
    bm25_text,
    check_date,
    check_time_value,
    search,
    truncate_question,
)
from loader.settings import Settings

SETTINGS = Settings(index_name="docs")


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


class FakeReranker:
    """Scores a passage by the number of times it contains the letter "z"."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

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


def run(question: str = "q", client: FakeClient | None = None, **kwargs: Any):
    client = client or FakeClient({"q": CORPUS})
    kwargs.setdefault("tenant", "A")
    kwargs.setdefault("embedder", FakeEmbedder())
    kwargs.setdefault("reranker", FakeReranker())
    return search(question, SETTINGS, client=client, **kwargs)


def test_truncate_question_cuts_at_a_word() -> None:
    assert truncate_question("short") == "short"
    long = "word " * 1000
    cut = truncate_question(long)
    assert len(cut) <= MAX_QUESTION_CHARS and cut.endswith("word")
    assert len(truncate_question("x" * 5000)) == MAX_QUESTION_CHARS


def test_bm25_text_bounds_terms() -> None:
    assert bm25_text("refund for order E1043, please", max_terms=3) == "refund for order"
    assert bm25_text("a b") == "a b"
    text = " ".join(f"w{n}" for n in range(1000))
    assert len(bm25_text(text).split()) == MAX_BM25_TERMS
    # CJK and emoji: one term per character
    assert bm25_text("退款政策说明", max_terms=2) == "退款"
    assert bm25_text("🙂🙂🙂", max_terms=2) == "🙂🙂"
    assert bm25_text("?!?!...", max_terms=1) == "?!?!..."  # ASCII punctuation makes no term


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"question": ""}, "question"),
        ({"question": "  \n"}, "question"),
        ({"tenant": ""}, "tenant"),
        ({"tenant": "  "}, "tenant"),
        ({"mode": "fuzzy"}, "mode"),
        ({"k": 0}, "k"),
        ({"candidates": -1}, "candidates"),
        ({"candidates": 10**6}, "candidates"),
        ({"expand": "document"}, "expand"),
        ({"filters": SearchFilters(published_from="yesterday")}, "published_from"),
        ({"filters": SearchFilters(published_to='2020"}')}, "published_to"),
        ({"filters": SearchFilters(decay_scale="180 days")}, "decay_scale"),
    ],
)
def test_bad_arguments_are_config_errors_naming_the_parameter(kwargs: dict, named: str) -> None:
    client = FakeClient({})
    with pytest.raises(ConfigError, match=named):
        run(client=client, **kwargs)
    assert client.calls == []  # refused before any request


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
    from loader.query.search import format_result

    result = run(k=2)
    result.timings = dict.fromkeys(result.timings, 1.0)
    assert format_result(result, snippet_chars=5) == [
        "1. Guide > Part > Section  (b-0.md)",
        "   chunk b-0 | retrieval #2 9.0000 | rerank #1 2.0000",
        "   bravo…",
        "2. Guide > Part > Section  (c-0.md)",
        "   chunk c-0 | retrieval #3 8.0000 | rerank #2 1.0000",
        "   charl…",
        "2 results of 3 candidates for tenant 'A' (hybrid-rrf, reranked) in 1.0 ms: embed 1.0 ms, "
        "retrieve 1.0 ms, rerank 1.0 ms",
    ]
    fused = run("latest", rewriter=FakeRewriter(["q", "other"]), rerank=False, k=1)
    lines = format_result(fused)
    assert lines[0] == "queries: q | other"
    assert lines[2].startswith("   chunk a-0 | retrieval #1 0.0164 | query_1 #1 10.0000")
    long = run("word " * 1000, client=FakeClient({}))
    assert format_result(long)[0].startswith("! the question was cut to ")


@pytest.mark.parametrize(
    "value",
    [
        "2024",
        "2024-05",
        "2024-05-01",
        "2024-02-29",
        "2024-05-01T10",
        "2024-05-01T10:30",
        "2024-05-01T10:30:00Z",
        "2024-05-01T10:30:00.123456789+02:00",
        "2024-05-01T23:59:59-0530",
        "2024-05-01T10:30:00+18:00",
        "now",
        "now-1y",
        "now-30d/d",
        "now+1h-5m",
        "now-999999y-999999y-999999y-999999y",
    ],
)
def test_dates_opensearch_accepts_pass(value: str) -> None:
    assert check_date("published_from", value) == value


def test_date_objects_pass_as_iso_text() -> None:
    assert check_date("published_to", datetime.date(2024, 5, 1)) == "2024-05-01"
    stamp = datetime.datetime(2024, 5, 1, 10, 30, tzinfo=datetime.UTC)
    assert check_date("published_to", stamp) == "2024-05-01T10:30:00+00:00"


@pytest.mark.parametrize(
    "value",
    [
        "2020-13-45",  # OpenSearch: 400 parse_exception
        "2023-02-29",
        "2024-00-10",
        "2024-05-00",
        "0000-01-01",
        "2024-05-01T24:00",
        "2024-05-01T10:60",
        "2024-05-01T10:30:61",
        "2024-05-01T10:30:00+19:00",  # OpenSearch: 400
        "2024-05-01 10:30",  # OpenSearch: 400 (strict_date_optional_time wants the T)
        "2024-05-01\n",
        "٢٠٢٤-٠٥-٠١",  # Arabic-Indic digits
        "now-99999999999y",  # OpenSearch: 400 number_format_exception
        "now-1y-1y-1y-1y-1y",
        "now-1x",
        "yesterday",
        "1714521600000",
        "",
        2024,
        None,
        ["2024-05-01"],
    ],
)
def test_dates_opensearch_refuses_are_config_errors(value: object) -> None:
    with pytest.raises(ConfigError, match=r"^published_from .* is not a date; give an ISO date"):
        check_date("published_from", value)


@pytest.mark.parametrize("value", ["180d", "12h", "1ms", "1000micros", "1000000nanos", "10000d"])
def test_time_values_opensearch_accepts_pass(value: str) -> None:
    assert check_time_value("decay_scale", value) == value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0d", "out of range"),  # OpenSearch: 400 "scale must be > 0.0"
        ("0ms", "out of range"),
        ("999micros", "out of range"),  # less than 1 ms: 0 on the server
        ("1nanos", "out of range"),
        ("10001d", "out of range"),
        ("1.5d", "not a time value"),  # OpenSearch: 400 "fractional time values"
        ("-1d", "not a time value"),
        ("180 days", "not a time value"),
        ("180", "not a time value"),
        ("d", "not a time value"),
        ("1234567890123456d", "not a time value"),
        ("180d\n", "not a time value"),
        (180, "not a time value"),
    ],
)
def test_bad_time_values_are_config_errors(value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=rf"^decay_scale .* {message}"):
        check_time_value("decay_scale", value)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"k": 0}, "k must be a positive whole number, got 0"),
        ({"candidates": 0}, "candidates must be a positive whole number, got 0"),
        ({"k": 2.0}, "k must be a positive whole number, got 2.0"),
        ({"k": True}, "k must be a positive whole number, got True"),
        ({"k": "5"}, "k must be a positive whole number, got '5'"),
        ({"k": 10**6}, "k must be at most 10000, got 1000000"),
        (
            {"question": ["refund", "late"]},
            "question must be a string, got list ['refund', 'late']",
        ),
        ({"question": {"a": "refund"}}, "question must be a string, got dict {'a': 'refund'}"),
        ({"question": 5}, "question must be a string, got int 5"),
        ({"tenant": ["A", "B"]}, "tenant must be a string, got list ['A', 'B']"),
        (
            {"filters": SearchFilters(published_from="2020-13-45")},
            "published_from '2020-13-45' is not a date",
        ),
        ({"filters": SearchFilters(decay_scale="0d")}, "decay_scale '0d' is out of range"),
    ],
)
def test_hostile_arguments_get_exact_messages(kwargs: dict, message: str) -> None:
    client = FakeClient({})
    with pytest.raises(ConfigError) as raised:
        run(client=client, **kwargs)
    assert str(raised.value).startswith(message), str(raised.value)
    assert client.calls == []


def test_rerank_default_is_the_setting() -> None:
    reranker = FakeReranker()
    settings = SETTINGS.replace(rerank=False)
    result = search("q", settings, tenant="A", client=FakeClient({"q": CORPUS}), reranker=reranker)
    assert not result.reranked and reranker.calls == []
    result = search(
        "q", settings, tenant="A", client=FakeClient({"q": CORPUS}), reranker=reranker, rerank=True
    )
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
        search("q", settings, tenant="A", mode="bm25", rerank=False, client=RefusingClient())
    message = str(raised.value)
    assert message == (
        "OpenSearch refused the search as a bad request: parse_exception: failed to parse date "
        "field [x] with format [y]"
    )
    assert not isinstance(raised.value, ClusterError) and QueryError.exit_code == 11
