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


def test_a_replaced_set_keeps_each_grade_with_its_question(client, logged, embedder, tmp_path):
    """A set imported again under its name keeps its id, and its grades were kept by number:
    a file whose questions came in another order put each old grade on another question, and
    the live scores and `loader learn` read them there."""
    from loader.ingest.sync import push
    from loader.query.judgments import clear_grade, judging_state, save_grade, save_skip

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "ferry.md").write_text("# Ferries\n\nThe ferry leaves the harbour at nine.\n")
    (docs / "cafe.md").write_text("# Cafe\n\nThe cafe by the pier opens at eight.\n")
    assert push(docs, logged, tenant="A", client=client, embedder=embedder).failed == 0
    chunks = {
        hit.source: hit.chunk_id
        for hit in search(
            SearchRequest.from_settings(logged, "ferry cafe", tenant="A", mode="bm25", k=5),
            logged,
            client=client,
        ).hits
    }
    index = logged.index_name
    ferry, cafe, tide = "When does the ferry leave?", "When does the cafe open?", "High tide?"
    first = create_query_set(client, index, "A", "week-49", questions=[ferry, cafe])
    save_grade(client, index, "A", first.set_id, 0, chunks["ferry.md"], 2, rater="ann")
    save_grade(client, index, "A", first.set_id, 1, chunks["cafe.md"], 1, rater="ann")
    save_skip(client, index, "A", first.set_id, 1)

    # Imported again: the cafe question first, the ferry question gone, a new one after.
    again = create_query_set(client, index, "A", "week-49", questions=[cafe, tide])
    assert again.set_id == first.set_id
    state = judging_state(client, index, "A", again.set_id)
    graded = {n: {c: g.grade for c, g in by.items()} for n, by in state.grades.items()}
    assert graded == {0: {chunks["cafe.md"]: 1}}  # the ferry grade is on no question now
    assert state.skipped == {0}

    # A grade given now on the moved question is the later word, and clearing it clears both.
    save_grade(client, index, "A", again.set_id, 0, chunks["cafe.md"], 2, rater="ann")
    state = judging_state(client, index, "A", again.set_id)
    assert state.grades[0][chunks["cafe.md"]].grade == 2
    clear_grade(client, index, "A", again.set_id, 0, chunks["cafe.md"], rater="ann")
    assert judging_state(client, index, "A", again.set_id).grades == {}

    # The ferry question back where it was: its grade comes back with it.
    create_query_set(client, index, "A", "week-49", questions=[ferry, cafe])
    state = judging_state(client, index, "A", first.set_id)
    assert {n: list(by) for n, by in state.grades.items()} == {0: [chunks["ferry.md"]]}
