"""`loader.query.search.search` on a fixture corpus pushed with `loader push` into a unique index:
each mode finds the expected chunks, rerank follows the cross-encoder, tenants and filters hold
against injection, rewritten queries are fused, context steps work, and abusive input gives a
clear error or a normal result. The corpus and the models are in search_corpus.py.
"""

from __future__ import annotations

import re

import pytest

from loader.errors import ClusterError, ConfigError, LoaderError, ModelError
from loader.models.rerank import load_reranker
from loader.models.rerank.keyword import STOPWORDS
from loader.modes import HYBRID_MODES
from loader.query.request import MAX_QUESTION_CHARS, SearchFilters, SearchRequest
from loader.query.search import search
from loader.settings import SEARCH_MODES
from tests.conftest import cleanup_owned
from tests.integration.query.search_corpus import (
    INJECTIONS,
    RETURNS,
    SHIPPING,
    TENANT_A,
    build_corpus,
)


@pytest.fixture(scope="module")
def settings(client, base_settings, tmp_path_factory, embedder, cross_encoder_path):
    root = tmp_path_factory.mktemp("search-corpus")
    built = None
    try:
        built = build_corpus(client, base_settings, root, embedder)
        yield built.replace(reranker_model=cross_encoder_path)
    finally:
        if built is not None:
            cleanup_owned(client, built.index_name)


@pytest.fixture(scope="module")
def reranker(settings):
    return load_reranker(settings)


def run(question, settings, client, embedder, reranker, *, rewriter=None, **kwargs):
    kwargs.setdefault("tenant", "A")
    kwargs.setdefault("rerank", False)
    request = SearchRequest.from_settings(settings, question, **kwargs)
    return search(
        request, settings, client=client, embedder=embedder, reranker=reranker, rewriter=rewriter
    )


def test_identifier_is_found_by_bm25_and_hybrid(settings, client, embedder, reranker):
    for mode in ("bm25", *HYBRID_MODES):
        result = run("E1043", settings, client, embedder, reranker, mode=mode)
        top = result.hits[0]
        assert (top.source, top.heading_path, top.tenant) == (
            "printer.md",
            ("Error codes",),
            "A",
        ), mode
        assert top.title == "Printer manual" and "E1043" in top.body
        assert top.ranks == {"retrieval": 1} and top.scores["retrieval"] > 0
    bm25 = run("E1043", settings, client, embedder, reranker, mode="bm25")
    assert [hit.source for hit in bm25.hits] == ["printer.md"]  # no other chunk has the term
    assert bm25.timings["embed_ms"] == 0.0


def test_paraphrase_is_found_by_vector_and_hybrid(settings, client, embedder, reranker):
    question = "my food came really late, can I get my money back?"
    for mode in ("vector", *HYBRID_MODES):
        result = run(question, settings, client, embedder, reranker, mode=mode, k=3)
        assert result.hits[0].source == "refunds.md", (mode, [h.source for h in result.hits])
        assert result.hits[0].heading == "Refund policy > Late deliveries"
        assert result.timings["embed_ms"] > 0 and result.timings["retrieve_ms"] > 0
        assert result.timings["total_ms"] >= result.timings["retrieve_ms"]


def test_rerank_orders_candidates_by_cross_encoder_score(
    settings, client, embedder, reranker, cross_encoder_path
):
    from sentence_transformers import CrossEncoder

    independent = CrossEncoder(cross_encoder_path, max_length=settings.rerank_max_tokens)
    question = "refund for a late order, a printer tray error or a password reset"
    for mode in SEARCH_MODES:
        plain = run(question, settings, client, embedder, reranker, mode=mode, k=50)
        candidates = plain.hits
        assert len(candidates) >= 3, mode
        scores = independent.predict([(question, hit.text) for hit in candidates]).tolist()
        expected = [
            hit.chunk_id
            for _, hit in sorted(zip(scores, candidates, strict=True), key=lambda pair: -pair[0])
        ]
        result = run(question, settings, client, embedder, reranker, mode=mode, rerank=True, k=3)
        assert [hit.chunk_id for hit in result.hits] == expected[:3], mode
        assert len(result.hits) == 3 and result.reranked and result.candidates == len(candidates)
        assert [hit.ranks["rerank"] for hit in result.hits] == [1, 2, 3]
        by_id = dict(zip((h.chunk_id for h in candidates), scores, strict=True))
        for hit in result.hits:
            assert hit.scores["rerank"] == pytest.approx(by_id[hit.chunk_id], abs=1e-4)
            assert hit.ranks["retrieval"] == next(
                c.ranks["retrieval"] for c in candidates if c.chunk_id == hit.chunk_id
            )
        assert result.timings["rerank_ms"] > 0
    # the random head disagrees with retrieval somewhere: the reorder is real
    assert expected != [hit.chunk_id for hit in candidates]


def _keyword_final(question, hits, weight):
    """The keyword reranker's formula, written again here: (1 - weight) x the retrieval score
    min-max normalised over the candidates + weight x the share of the question's distinct
    non-stopword words found among the chunk text's words."""
    tokens = lambda text: set(re.findall(r"[^\W_]+", text.lower()))  # noqa: E731
    terms = tokens(question) - STOPWORDS
    scores = [hit.scores["retrieval"] for hit in hits]
    low, high = min(scores), max(scores)
    return {
        hit.chunk_id: (1 - weight) * (score - low) / (high - low)
        + weight * len(terms & tokens(hit.text)) / len(terms)
        for hit, score in zip(hits, scores, strict=True)
    }


@pytest.mark.parametrize("weight", [0.3, 0.7])
def test_keyword_rerank_orders_candidates_by_the_formula(settings, client, embedder, weight):
    keyword = settings.replace(rerank_backend="keyword", keyword_rerank_weight=weight)
    # The identifier puts the printer's error codes first; the refund policy holds the words.
    question = "E1043 late delivery refund of the full order value to the original payment method"
    request = SearchRequest.from_settings(keyword, question, tenant="A", mode="hybrid-rrf", k=50)
    assert request.rerank  # rerank = auto: the keyword reranker needs no model
    plain = search(request.replace(rerank=False), keyword, client=client, embedder=embedder).hits
    assert len(plain) >= 4
    final = _keyword_final(question, plain, weight)
    expected = sorted(final, key=lambda chunk_id: -final[chunk_id])  # stable: retrieval order
    result = search(request.replace(k=4), keyword, client=client, embedder=embedder)
    assert result.reranked and [hit.chunk_id for hit in result.hits] == expected[:4]
    for hit in result.hits:
        assert hit.scores["rerank"] == pytest.approx(final[hit.chunk_id])
    assert plain[0].source == "printer.md"
    # At 0.7 the words outweigh the fusion's order: the refund policy comes first.
    assert result.hits[0].source == ("refunds.md" if weight == 0.7 else "printer.md")


def test_tenants_are_isolated_in_every_mode(settings, client, embedder, reranker):
    for mode in SEARCH_MODES:
        for question in ("E1043", "refund for a late order", "secret"):
            for tenant in ("A", "B"):
                result = run(
                    question, settings, client, embedder, reranker, mode=mode, tenant=tenant, k=50
                )
                assert {hit.tenant for hit in result.hits} <= {tenant}, (mode, question, tenant)
                if tenant == "A":
                    assert all("Tenant B" not in hit.text for hit in result.hits)
    secret = run("Tenant B secret", settings, client, embedder, reranker, mode="bm25", tenant="B")
    assert {hit.source for hit in secret.hits} == {"refunds.md", "printer.md"}
    assert (
        run("nothing", settings, client, embedder, reranker, tenant="Z", mode="vector").hits == []
    )


def _outcome(settings, client, embedder, reranker, question="refund", **kwargs):
    """The hits' tenants, or None when the search was refused with a clear error."""
    try:
        result = run(question, settings, client, embedder, reranker, k=50, **kwargs)
    except (ConfigError, ClusterError) as error:
        assert str(error)
        return None
    return {hit.tenant for hit in result.hits}


def test_injection_in_every_parameter_never_crosses_tenants(settings, client, embedder, reranker):
    refused = 0
    for mode in SEARCH_MODES:
        for payload in INJECTIONS:
            outcomes = [
                _outcome(settings, client, embedder, reranker, payload, mode=mode, tenant="B"),
                _outcome(settings, client, embedder, reranker, mode=mode, tenant=payload),
                _outcome(settings, client, embedder, reranker, mode=mode, tenant="B" + payload),
            ]
            for name in ("lang", "published_from", "published_to", "decay_scale"):
                filters = SearchFilters(**{name: payload})
                outcomes.append(
                    _outcome(
                        settings, client, embedder, reranker, mode=mode, tenant="B", filters=filters
                    )
                )
            for tags in ((payload,), ("billing", payload)):
                outcomes.append(
                    _outcome(
                        settings,
                        client,
                        embedder,
                        reranker,
                        mode=mode,
                        tenant="B",
                        filters=SearchFilters(tags=tags),
                    )
                )
            for tenants in outcomes:
                if tenants is None:
                    refused += 1
                    continue
                assert tenants <= {"B"}, (mode, payload, tenants)
    assert refused > 0  # malformed dates and decay scales are refused before any request


def test_filters(settings, client, embedder, reranker):
    def sources(mode, **filters):
        result = run(
            "refund policy for late delivery",
            settings,
            client,
            embedder,
            reranker,
            mode=mode,
            k=50,
            filters=SearchFilters(**filters),
        )
        return {hit.source for hit in result.hits}

    for mode in SEARCH_MODES:
        assert sources(mode, lang="fr") <= {"remboursement.md"}
        assert sources(mode, tags=("support",)) <= {"printer.md"}
        assert sources(mode, tags=("nope",)) == set()
        assert sources(mode, tags=("account", "support")) <= {"security.md", "printer.md"}
        assert "printer.md" not in sources(mode, published_from="2024-01-01")
        assert sources(mode, published_to="2020-01-01") <= {"printer.md"}
        assert sources(mode, published_from="2024-01-01", published_to="2024-12-31") <= {
            "remboursement.md"
        }
        assert sources(mode, decay_scale="180d") <= set(TENANT_A)
    # vector search always has neighbours: the filters decide what comes back
    assert sources("vector", lang="fr") == {"remboursement.md"}
    assert sources("vector", tags=("support",)) == {"printer.md"}
    assert sources("vector", published_to="2020-01-01") == {"printer.md"}


def test_rewritten_queries_are_fused(settings, client, embedder, reranker):
    class TwoQueries:
        def rewrite(self, history, message):
            return ["E1043 paper tray", "reset my password"]

    history = [{"role": "user", "content": "I have two problems."}]
    for mode in SEARCH_MODES:
        for rerank in (False, True):
            result = run(
                "and both of those?",
                settings,
                client,
                embedder,
                reranker,
                mode=mode,
                k=5,
                rerank=rerank,
                rewriter=TwoQueries(),
                history=history,
            )
            sources = [hit.source for hit in result.hits]
            assert {"printer.md", "security.md"} <= set(sources), (mode, rerank, sources)
            assert result.queries == ["E1043 paper tray", "reset my password"]
            assert result.rerank_query == ("E1043 paper tray" if rerank else "")
            assert {"query_1", "query_2"} & set(result.hits[0].ranks)


def test_context_expansion_merge_and_prompt_order(settings, client, embedder, reranker):
    def hits(tenant, **kwargs):
        kwargs.setdefault("k", 10)
        return run("returns", settings, client, embedder, reranker, mode="vector",
                   tenant=tenant, **kwargs).hits  # fmt: skip

    children = hits("C")
    assert len(children) > 2 and all(len(h.body) < len(" ".join(RETURNS)) for h in children)
    parents = hits("C", expand="parent")
    assert sorted(hit.body for hit in parents) == sorted([" ".join(RETURNS), " ".join(SHIPPING)])

    sentences = hits("D")
    assert {hit.body for hit in sentences} == set(RETURNS + SHIPPING)
    windows = hits("D", expand="window")
    # windows overlap: one contained in a better one is dropped, every sentence is still there
    assert len({hit.body for hit in windows}) == len(windows) < len(sentences)
    assert all(any(s.body in w.body for w in windows) for s in sentences)
    assert all(len(w.body) > max(map(len, RETURNS + SHIPPING)) for w in windows)

    merged = hits("D", merge_adjacent=True)
    # every sentence retrieved: positions run on through the document, so all merge into one
    (whole,) = merged
    assert all(sentence in whole.body for sentence in RETURNS + SHIPPING)
    assert whole.chunk_id == sentences[0].chunk_id and whole.scores == sentences[0].scores

    best_first = hits("D", k=5)
    in_prompt_order = hits("D", k=5, prompt_order=True)
    assert [h.chunk_id for h in in_prompt_order] == [
        best_first[i].chunk_id for i in (0, 2, 4, 3, 1)
    ]


def test_abusive_questions_give_a_result_or_a_clear_error(settings, client, embedder, reranker):
    long_english = ("why is my refund for order E1043 late " * 300)[:10_000]
    long_cjk = "退款政策说明" * 1700
    long_emoji = "🙂" * 10_000
    punctuation = "?!.,;:-_()[]{}<>\"'`~@#$%^&*+=|\\/" * 10
    questions = [
        long_english,
        long_cjk,
        long_emoji,
        punctuation,
        "??",
        "Как вернуть деньги за опоздание?",
        "كيف أسترد أموالي",
        "退款",
        *INJECTIONS,
        "\u0000",
    ]
    for mode in SEARCH_MODES:
        for question in questions:
            try:
                result = run(question, settings, client, embedder, reranker, mode=mode, k=5)
            except ConfigError as error:
                assert "question" in str(error)  # only blank questions are refused
                assert not question.replace("\u0000", "").strip()
                continue
            assert len(result.question) <= MAX_QUESTION_CHARS
            assert result.truncated == (len(question.strip()) > MAX_QUESTION_CHARS)
            assert {hit.tenant for hit in result.hits} <= {"A"}
        with pytest.raises(ConfigError, match="question"):
            run("", settings, client, embedder, reranker, mode=mode)
        with pytest.raises(ConfigError, match="tenant"):
            run("refund", settings, client, embedder, reranker, mode=mode, tenant="")
    reranked = run(long_english, settings, client, embedder, reranker, rerank=True)
    assert reranked.truncated and reranked.hits[0].scores.get("rerank") is not None


def test_missing_index_and_unloadable_reranker_are_clear_errors(
    settings, client, embedder, reranker, tmp_path
):
    missing = settings.replace(index_name=f"{settings.index_name}-missing")
    with pytest.raises(ClusterError, match="loader apply"):
        run("refund", missing, client, embedder, reranker, mode="bm25")
    broken = settings.replace(reranker_model=str(tmp_path / "no-such-cross-encoder"))
    with pytest.raises(ModelError, match="no-such-cross-encoder"):
        request = SearchRequest.from_settings(broken, "refund", tenant="A", rerank=True)
        search(request, broken, client=client, embedder=embedder)
    assert issubclass(ModelError, LoaderError)
