"""Query sets and the query log on the session's cluster: what a tenant learns of another's sets
(nothing), set ids that no two (tenant, name) share, and a conversation's earlier turns kept out
of the log."""

from __future__ import annotations

import json

import pytest

from loader.errors import NotFoundError
from loader.eval.judgments import export
from loader.index.apply import apply_config
from loader.query.judgments import create_query_set, get_query_set, list_query_sets, set_id_for
from loader.query.query_log import queries_index, tenant_queries
from loader.query.request import SearchRequest
from loader.query.search import search

EARLIER = "How long do refunds take for late deliveries?"


@pytest.fixture
def logged(client, base_settings, embedder, unique_name):
    """An index with the query log and the judgments index (no documents needed)."""
    settings = base_settings.replace(
        index_name=unique_name, query_log="ubi", rerank="off", rewrite="concat"
    )
    apply_config(settings, dimension=embedder.dimension, client=client)
    return settings


def test_another_tenants_set_is_answered_as_a_missing_one(client, logged):
    """Set ids hash tenant and name, so B can compute the id of A's `week-49`: the answer must
    not tell B that A has one (it once was 403 against 404)."""
    create_query_set(client, logged.index_name, "A", "week-49", questions=["refund?"])
    ids = {"A's": set_id_for("A", "week-49"), "none's": set_id_for("A", "week-50")}
    errors = {}
    for whose, set_id in ids.items():
        with pytest.raises(NotFoundError) as caught:
            get_query_set(client, logged.index_name, "B", set_id)
        errors[whose] = (type(caught.value), caught.value.http_status, caught.value.exit_code)
        errors[whose] += (str(caught.value).replace(set_id, "<id>"),)
    assert errors["A's"] == errors["none's"]
    assert errors["A's"][1:3] == (404, 12)
    assert get_query_set(client, logged.index_name, "A", ids["A's"]).questions == ["refund?"]


def test_a_separator_in_tenant_or_name_never_overwrites_another_tenants_set(
    client, logged, tmp_path
):
    """Tenant 'px', name 'py\\x1fkb' was one id with tenant 'px\\x1fpy', name 'kb': the second
    import replaced the first tenant's set, whose export then failed (exit 13)."""
    create_query_set(
        client, logged.index_name, "px\x1fpy", "kb", questions=["the victim's question"]
    )
    create_query_set(
        client, logged.index_name, "px", "py\x1fkb", questions=["the intruder's question"]
    )
    victims = list_query_sets(client, logged.index_name, "px\x1fpy")
    assert [(s.name, s.questions) for s in victims] == [("kb", ["the victim's question"])]
    path = tmp_path / "kb.json"
    assert export(client, logged.index_name, "px\x1fpy", "kb", "srw-query-set", path) == 1
    assert json.loads(path.read_text())["querySetQueries"] == [
        {"queryText": "the victim's question"}
    ]


def test_a_follow_up_is_logged_without_the_conversation(client, logged):
    """The guide promises the conversation is never written; the rewriter's queries (concat: the
    earlier question joined to the follow-up) once were, and GET /log returned them."""
    request = SearchRequest.from_settings(
        logged,
        "and for UPI?",
        tenant="A",
        mode="bm25",
        history=[{"role": "user", "content": EARLIER}, {"role": "assistant", "content": "7 days"}],
    )
    result = search(request, logged, client=client)
    assert result.queries == [f"{EARLIER} and for UPI?"]  # the rewrite did use the history
    assert result.query_id
    stored = client.get(index=queries_index(logged.index_name), id=result.query_id)["_source"]
    (listed,) = tenant_queries(client, logged.index_name, "A")  # what GET /log answers
    for source in (stored, listed):
        assert "late deliveries" not in json.dumps(source) and "7 days" not in json.dumps(source)
        assert source["user_query"] == "and for UPI?"
        assert source["query_attributes"]["searched"] == "and for UPI?"
