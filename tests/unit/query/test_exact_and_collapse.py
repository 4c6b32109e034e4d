"""exact_match and one_per_document: checked by the request, sent as the templates' exact_terms
and collapse_doc parameters, and kept one per document when several queries are fused."""

from __future__ import annotations

import pytest

from loader.errors import ConfigError
from loader.query.request import SearchRequest
from tests.unit.query.fakes import SETTINGS, FakeClient, FakeRewriter, chunk, run


def test_exact_match_defaults_to_the_setting_and_one_per_document_to_off() -> None:
    request = SearchRequest.from_settings(SETTINGS, "E1043", tenant="A")
    assert request.exact_match is True and request.one_per_document is False
    off = SETTINGS.replace(exact_match=False)
    assert SearchRequest.from_settings(off, "E1043", tenant="A").exact_match is False
    assert SearchRequest.from_settings(off, "E1043", tenant="A", exact_match=True).exact_match


@pytest.mark.parametrize("field", ["exact_match", "one_per_document"])
def test_the_flags_must_be_booleans(field: str) -> None:
    with pytest.raises(ConfigError, match=f"{field} must be true or false, got 'yes'"):
        SearchRequest.from_settings(SETTINGS, "q", tenant="A", **{field: "yes"})


def test_exact_terms_are_the_query_s_identifiers_unless_exact_match_is_off() -> None:
    request = SearchRequest.from_settings(SETTINGS, "q", tenant="A")
    assert request.exact_terms('what does R-2207 mean, "paper jam"') == ["paper jam", "R-2207"]
    assert request.replace(exact_match=False).exact_terms("what does R-2207 mean") == []


def test_collapse_doc_is_a_template_parameter_only_when_asked() -> None:
    request = SearchRequest.from_settings(SETTINGS, "q", tenant="A")
    assert "collapse_doc" not in request.template_params()
    assert request.replace(one_per_document=True).template_params()["collapse_doc"] is True


@pytest.mark.parametrize("mode", ["bm25", "vector", "hybrid-rrf", "hybrid-minmax"])
def test_every_mode_sends_exact_terms_and_collapse_doc(mode: str) -> None:
    question = "what does R-2207 mean"
    client = FakeClient({question: [chunk("a-0", "R-2207")]})
    run(question, client=client, mode=mode, rerank=False, one_per_document=True)
    (call,) = client.calls
    assert call["body"]["params"]["exact_terms"] == ["R-2207"]
    assert call["body"]["params"]["collapse_doc"] is True
    client = FakeClient({question: []})
    run(question, client=client, mode=mode, rerank=False, exact_match=False)
    assert client.calls[0]["body"]["params"]["exact_terms"] == []
    assert "collapse_doc" not in client.calls[0]["body"]["params"]


def test_fused_queries_keep_one_hit_per_document() -> None:
    # each query's collapsed answer holds another chunk of document a
    client = FakeClient(
        {
            "one": [chunk("a-0", "x"), chunk("b-0", "y")],
            "two": [chunk("a-1", "x", doc_id="a"), chunk("c-0", "z")],
        }
    )
    result = run(
        "latest",
        client=client,
        rewriter=FakeRewriter(["one", "two"]),
        rerank=False,
        k=5,
        one_per_document=True,
    )
    assert [hit.chunk_id for hit in result.hits] == ["a-0", "b-0", "c-0"]
    assert [hit.ranks["retrieval"] for hit in result.hits] == [1, 2, 3]
    together = run(
        "latest", client=client, rewriter=FakeRewriter(["one", "two"]), rerank=False, k=5
    )
    assert {hit.doc_id for hit in together.hits} == {"a", "b", "c"} and len(together.hits) == 4


def test_the_http_body_passes_both_options_and_refuses_other_types() -> None:
    from pydantic import ValidationError

    from loader.serve import app as serve

    body = {"question": "E1043", "tenant": "A", "one_per_document": True, "exact_match": False}
    request = serve.SearchRequest.model_validate(body).to_request(SETTINGS, "A")
    assert request.one_per_document is True and request.exact_match is False
    plain = serve.SearchRequest.model_validate({"question": "E1043", "tenant": "A"})
    assert plain.to_request(SETTINGS, "A").exact_match is SETTINGS.exact_match
    for field in ("one_per_document", "exact_match"):
        with pytest.raises(ValidationError, match=field):
            serve.SearchRequest.model_validate({"question": "q", "tenant": "A", field: "true"})
