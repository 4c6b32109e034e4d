"""Snapshots on the judging page over plain HTTP, on a real node: a snapshot taken, a document
pushed that now outranks the graded answer of one question, and the comparison's deltas and
counts checked against a hand computation from the rankings; a new learned model compared with
the one a snapshot was taken under; tenant isolation (B gets 404 on A's snapshot, lists none of
A's), the statuses of a bad label, an unknown snapshot and a cluster that is down, and the page's
searches never logged. A snapshot deleted is listed no more; B's DELETE of A's is the 404 of an
unknown id and deletes nothing; a DELETE without the page's token or session is refused.

No browser: the page's figures are read from its HTML, the scripts' from the JSON route.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Iterator

import pytest

from loader.errors import NotFoundError
from loader.index.apply import apply_config
from loader.ingest.sync import push
from loader.models.rerank.learned import LearnedReranker
from loader.query.judgments import create_query_set, save_grade
from loader.query.query_log import queries_index
from loader.query.snapshots import (
    delete_snapshot,
    get_snapshot,
    judgments_index,
    list_snapshots,
    save_snapshot,
)
from loader.serve.app import create_app
from tests.conftest import cleanup_owned
from tests.integration.serve.http_server import Server, free_port, signed_in
from tests.unit.models.rerank.test_learned_files import train

pytestmark = pytest.mark.integration

KEY_A = "snapshot-key-a-Qm4vT8xP2nL6rW0z"
KEY_B = "snapshot-key-b-Hc7yN3kB9fD1jS5u"
QUESTIONS = ["ferry timetable", "harbour parking", "cafe opening hours"]
DOCS = {
    "timetable.md": "# Harbour guide\n\n## Ferry timetable\n\nSailings leave the harbour at seven, "
    "nine and noon. In winter the last sailing is at four.\n",
    "parking.md": "# Harbour guide\n\n## Harbour parking\n\nHarbour parking costs four euros a day "
    "at the north gate; the south lot is free after six.\n",
    "bicycles.md": "# Harbour guide\n\n## Bicycles\n\nA bicycle rides free on the morning "
    "sailings. Ask at the kiosk.\n",
    "cafe.md": "# Harbour guide\n\n## The cafe\n\nThe cafe by the pier serves soup and coffee.\n",
}
# Pushed after the snapshot: it says "ferry timetable" far more often than the answer does,
# so BM25 ranks it above timetable.md (and it says nothing of parking).
OUTRANKING = (
    "# Ferry timetable\n\n## Ferry timetable, ferry timetable\n\nFerry timetable: the ferry "
    "timetable. Ferry timetable questions about the ferry timetable and the ferry.\n"
)
RANK_2 = 1 / math.log2(3)


@pytest.fixture(scope="module")
def harbour(client, base_settings, embedder, tmp_path_factory) -> Iterator:
    """An index of ``DOCS`` for tenants A and B (the query log on), keys for both."""
    root = tmp_path_factory.mktemp("snapshots")
    keys = root / "api-keys.toml"
    keys.write_text(f'[keys]\n"{KEY_A}" = "A"\n"{KEY_B}" = "B"\n', encoding="utf-8")
    keys.chmod(0o600)
    docs = root / "harbour"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    alias = f"t-snapshots-{uuid.uuid4().hex[:8]}"
    settings = base_settings.replace(
        index_name=alias, query_log="ubi", rerank="off", api_keys_file=str(keys)
    )
    try:
        apply_config(settings, dimension=embedder.dimension, client=client)
        for tenant in ("A", "B"):
            report = push(docs, settings, tenant=tenant, client=client, embedder=embedder)
            assert report.failed == 0, report
        yield settings, root
    finally:
        cleanup_owned(client, alias)


def _chunk_of(client, alias: str, tenant: str, source: str) -> str:
    query = {"bool": {"filter": [{"term": {"tenant": tenant}}, {"term": {"source": source}}]}}
    hits = client.search(index=alias, body={"query": query, "size": 1})["hits"]["hits"]
    return hits[0]["_source"]["chunk_id"]


def _logged(client, alias: str) -> int:
    client.indices.refresh(index=queries_index(alias))
    return client.count(index=queries_index(alias))["count"]


def _take(server, cookie, token, set_id, label) -> tuple[int, dict]:
    return server.request(
        "POST", f"/judge/sets/{set_id}/snapshots", {"label": label},
        {"Cookie": cookie, "X-CSRF-Token": token},
    )  # fmt: skip


def _ndcg_one_answer(ranking: list[str], answer: str) -> float:
    """By hand: one document graded (2), so nDCG@10 = 1 / log2(1 + its rank), 0 past 10."""
    rank = ranking.index(answer) + 1 if answer in ranking[:10] else None
    return 1 / math.log2(1 + rank) if rank else 0.0


def test_a_pushed_document_shows_as_the_hand_computed_loss(harbour, client, embedder, tmp_path):
    settings, _ = harbour
    alias = settings.index_name
    set_a = create_query_set(client, alias, "A", "harbour", questions=QUESTIONS).set_id
    set_b = create_query_set(client, alias, "B", "harbour", questions=QUESTIONS).set_id
    answers = {0: "timetable.md", 1: "parking.md"}  # question 2 stays ungraded
    for number, source in answers.items():
        save_grade(client, alias, "A", set_a, number, _chunk_of(client, alias, "A", source), 2)
    logged = _logged(client, alias)
    with Server(create_app(settings, embedder=embedder)) as server:
        cookie, token = signed_in(server, KEY_A)
        auth = {"Cookie": cookie}
        status, taken = _take(server, cookie, token, set_a, "  before the FAQ  ")
        assert status == 201, taken
        sid = taken["snapshot"]
        assert (taken["label"], taken["questions"]) == ("before the FAQ", 3)
        assert taken["served"]["search_mode"] == settings.search_mode
        assert taken["served"]["learned"] is None
        # What is stored: each mode's top documents of each question, one per document.
        stored = client.get(index=judgments_index(alias), id=f"snapshot-{sid}")["_source"]
        assert (stored["kind"], stored["tenant"], stored["query_set"]) == ("snapshot", "A", set_a)
        then = [q["rankings"] for q in stored["questions"]]
        assert then[0]["bm25"][0] == "timetable.md" and then[1]["bm25"][0] == "parking.md"
        for ranking in (r for question in then for r in question.values()):
            assert len(ranking) == len(set(ranking)) <= 10

        # The change: a document that outranks the answer of question 0.
        faq = tmp_path / "faq"
        faq.mkdir()
        (faq / "ferry-faq.md").write_text(OUTRANKING, encoding="utf-8")
        report = push(faq, settings, tenant="A", client=client, embedder=embedder)
        assert report.failed == 0, report
        client.indices.refresh(index=alias)

        status, result = server.request(
            "GET", f"/judge/sets/{set_a}/snapshots/{sid}/compare", headers=auth
        )
        assert status == 200, result
        assert result["snapshot"]["snapshot"] == sid and result["only_now"] == []
        rows = result["questions"]
        assert rows[0]["rankings"]["then"] == then[0]
        now_bm25 = rows[0]["rankings"]["now"]["bm25"]
        assert now_bm25[:2] == ["ferry-faq.md", "timetable.md"]
        bm25 = rows[0]["scores"]["bm25"]
        assert (bm25["then"], bm25["now"]) == pytest.approx((1.0, RANK_2))
        assert bm25["delta"] == pytest.approx(RANK_2 - 1) and bm25["direction"] == "worse"
        # Every column by hand, from the two rankings: deltas, means and counts.
        for column in result["columns"]:
            expected = {"better": 0, "worse": 0, "unchanged": 0}
            thens, nows = [], []
            for number, answer in answers.items():
                ranked = rows[number]["rankings"]
                before = _ndcg_one_answer(ranked["then"][column], answer)
                after = _ndcg_one_answer(ranked["now"][column], answer)
                scores = rows[number]["scores"][column]
                assert (scores["then"], scores["now"]) == pytest.approx((before, after)), column
                way = "unchanged" if abs(after - before) < 1e-9 else "better"
                expected["worse" if after < before - 1e-9 else way] += 1
                thens.append(before)
                nows.append(after)
            assert rows[2]["scores"][column]["delta"] is None  # nothing graded: no score
            assert result["counts"][column] == expected, column
            mean = result["means"][column]
            assert (mean["then"], mean["now"]) == pytest.approx((sum(thens) / 2, sum(nows) / 2))
        assert result["counts"]["bm25"] == {"better": 0, "worse": 1, "unchanged": 1}

        # The page: the delta with its arrow, the counts, sortable by a column's change.
        status, page = server.raw(
            "GET", f"/judge/sets/{set_a}/questions?against={sid}&sort=delta-bm25", headers=auth
        )
        assert status == 200, page[:300]
        assert [int(n) for n in re.findall(r'<tr data-number="(\d+)">', page)][0] == 0
        row0 = re.search(r'<tr data-number="0">(.*?)</tr>', page, re.S).group(1)
        cell = re.search(r'<td class="score" data-mode="bm25">(.*?)</td>', row0).group(1)
        assert cell.startswith(f"{RANK_2:.3f} ") and f"▼{1 - RANK_2:.3f}" in cell
        counts = re.search(r'<tr data-column="bm25">(.*?)</tr>', page).group(1)
        assert '<td class="better">0</td><td class="worse">1</td><td class="unchanged">1</td>' in (
            counts
        )
        assert f'<option value="{sid}" selected>before the FAQ' in page

        # Statuses: a bad label names it (nothing stored), no token is 403, an unknown
        # snapshot 404 on the page and the JSON alike.
        for label in ("bell\x07", "x" * 121, "", "broken \ud800"):
            status, answer = _take(server, cookie, token, set_a, label)
            assert status == 422 and answer["error"].startswith("label: "), (label, answer)
        status, answer = server.request("POST", f"/judge/sets/{set_a}/snapshots", "{", {
            "Cookie": cookie, "X-CSRF-Token": token})  # fmt: skip
        assert status == 422 and answer["error"].startswith("label: ")
        status, _ = server.request("POST", f"/judge/sets/{set_a}/snapshots", {"label": "x"}, auth)
        assert status == 403
        status, listed = server.request("GET", f"/judge/sets/{set_a}/snapshots", headers=auth)
        assert [s["snapshot"] for s in listed["snapshots"]] == [sid]
        unknown = "f" * 20
        status, answer = server.request(
            "GET", f"/judge/sets/{set_a}/snapshots/{unknown}/compare", headers=auth
        )
        assert (status, answer) == (404, {"error": f"snapshot {unknown!r} does not exist"})
        status, page = server.raw(
            "GET", f"/judge/sets/{set_a}/questions?against={unknown}", headers=auth
        )
        assert status == 404

        # Tenant B: A's snapshot through B's own set of the same name is a missing one, with
        # the very answer of an unknown id; B lists none of A's, and its page shows none.
        cookie_b, token_b = signed_in(server, KEY_B)
        auth_b = {"Cookie": cookie_b}
        status, answer = server.request(
            "GET", f"/judge/sets/{set_b}/snapshots/{sid}/compare", headers=auth_b
        )
        assert (status, answer) == (404, {"error": f"snapshot {sid!r} does not exist"})
        status, answer = server.request(
            "GET", f"/judge/sets/{set_a}/snapshots/{sid}/compare", headers=auth_b
        )
        assert status == 404 and "before the FAQ" not in json.dumps(answer)
        status, listed = server.request("GET", f"/judge/sets/{set_b}/snapshots", headers=auth_b)
        assert (status, listed) == (200, {"snapshots": []})
        status, page = server.raw(
            "GET", f"/judge/sets/{set_b}/questions?against={sid}", headers=auth_b
        )
        assert status == 404 and "before the FAQ" not in page
        status, page = server.raw("GET", f"/judge/sets/{set_b}/questions", headers=auth_b)
        assert status == 200 and "before the FAQ" not in page and sid not in page
        status, answer = _take(server, cookie_b, token_b, set_a, "into A's set")
        assert status == 404
        with pytest.raises(NotFoundError, match=f"^snapshot {sid!r} does not exist$"):
            get_snapshot(client, alias, "B", set_b, sid)
    # None of the page's searches (snapshot, comparison, list) reached the query log.
    assert _logged(client, alias) == logged


def _stored(client, alias: str, tenant: str, set_id: str, label: str) -> str:
    """A snapshot of hand-written rankings (no search needed to delete one): its id."""
    rankings = [{"bm25": ["timetable.md"]} for _ in QUESTIONS]
    served = {"search_mode": "bm25", "learned": None}
    return save_snapshot(
        client, alias, tenant, set_id, label, rankings=rankings, questions=QUESTIONS, served=served
    ).snapshot_id


def test_a_deleted_snapshot_is_listed_no_more_and_another_tenant_deletes_nothing(
    harbour, client, embedder
):
    settings, _ = harbour
    alias = settings.index_name
    set_a = create_query_set(client, alias, "A", "deleting", questions=QUESTIONS).set_id
    set_b = create_query_set(client, alias, "B", "deleting", questions=QUESTIONS).set_id
    kept, gone = (_stored(client, alias, "A", set_a, label) for label in ("kept", "gone"))

    def listed(tenant: str = "A", set_id: str = set_a) -> set[str]:
        return {s.snapshot_id for s in list_snapshots(client, alias, tenant, set_id)}

    with Server(create_app(settings, embedder=embedder)) as server:
        cookie, token = signed_in(server, KEY_A)
        cookie_b, token_b = signed_in(server, KEY_B)
        unknown = "0123456789abcdef0123"

        def delete(set_id: str, sid: str, headers: dict) -> tuple[int, str]:
            return server.raw("DELETE", f"/judge/sets/{set_id}/snapshots/{sid}", headers=headers)

        as_a = {"Cookie": cookie, "X-CSRF-Token": token}
        as_b = {"Cookie": cookie_b, "X-CSRF-Token": token_b}
        # B names A's snapshot through its own set, or A's set: the answer of an unknown id.
        crossing = delete(set_b, gone, as_b)
        assert crossing[0] == 404
        assert crossing == (404, delete(set_b, unknown, as_b)[1].replace(unknown, gone))
        assert delete(set_a, gone, as_b)[0] == 404
        for malformed in ("NOT-A-SNAPSHOT", "0" * 19, "g" * 20):
            status, body = delete(set_a, malformed, as_a)
            assert (status, json.loads(body)) == (
                404, {"error": f"snapshot {malformed!r} does not exist"}
            )  # fmt: skip
        # Without the page's token, or without a session: refused, as a POST is.
        assert delete(set_a, gone, {"Cookie": cookie})[0] == 403
        assert delete(set_a, gone, {"Cookie": cookie, "X-CSRF-Token": token_b})[0] == 403
        assert delete(set_a, gone, {"X-CSRF-Token": token})[0] == 401
        assert delete(set_a, gone, as_a | {"Origin": "http://elsewhere.example"})[0] == 403
        assert listed() == {kept, gone}  # none of it deleted anything

        assert delete(set_a, gone, as_a) == (204, "")
        assert listed() == {kept}  # at once: no refresh interval waited for
        status, answer = server.request("GET", f"/judge/sets/{set_a}/snapshots", headers=as_a)
        assert [s["snapshot"] for s in answer["snapshots"]] == [kept]
        status, again = delete(set_a, gone, as_a)
        assert (status, json.loads(again)) == (404, {"error": f"snapshot {gone!r} does not exist"})
        questions = f"/judge/sets/{set_a}/questions?against="
        assert server.raw("GET", f"{questions}{gone}", headers=as_a)[0] == 404
        # The list against the one kept offers to delete it (the button judge.js drives).
        status, page = server.raw("GET", f"{questions}{kept}", headers=as_a)
        assert status == 200 and f'id="snapshot-delete" data-set="{set_a}"' in page
        assert f'data-snapshot="{kept}"' in page

    # The library: B's delete raises what an unknown id raises, and A's snapshot stays.
    with pytest.raises(NotFoundError, match=f"^snapshot {kept!r} does not exist$"):
        delete_snapshot(client, alias, "B", set_b, kept)
    with pytest.raises(NotFoundError, match=f"^query set {set_a!r} does not exist$"):
        delete_snapshot(client, alias, "B", set_a, kept)
    other_set = create_query_set(client, alias, "A", "another", questions=QUESTIONS).set_id
    with pytest.raises(NotFoundError, match=f"^snapshot {kept!r} does not exist$"):
        delete_snapshot(client, alias, "A", other_set, kept)  # A's, but of another set
    assert listed() == {kept} and get_snapshot(client, alias, "A", set_a, kept).label == "kept"


def test_a_new_learned_model_is_compared_with_the_one_the_snapshot_was_taken_under(
    harbour, client, embedder, tmp_path
):
    settings, _ = harbour
    alias = settings.index_name
    set_id = create_query_set(client, alias, "A", "models", questions=QUESTIONS).set_id
    save_grade(client, alias, "A", set_id, 0, _chunk_of(client, alias, "A", "timetable.md"), 2)
    served = settings.replace(rerank="auto", search_mode="hybrid-rrf")
    old, new = tmp_path / "old", tmp_path / "new"
    train(old / "A", rounds=20, seed=1, tenant="A")
    train(new / "A", rounds=60, seed=2, tenant="A")
    with Server(create_app(served.replace(learned_reranker=str(old)), embedder=embedder)) as one:
        cookie, token = signed_in(one, KEY_A)
        status, taken = _take(one, cookie, token, set_id, "the old model")
        assert status == 201, taken
    assert "learned" in taken["columns"]
    assert taken["served"]["learned"]["sha256"] == LearnedReranker(old / "A").sha256
    assert taken["served"]["learned"]["base_mode"] == "hybrid-rrf"
    with Server(create_app(served.replace(learned_reranker=str(new)), embedder=embedder)) as two:
        cookie, _ = signed_in(two, KEY_A)
        status, result = two.request(
            "GET", f"/judge/sets/{set_id}/snapshots/{taken['snapshot']}/compare",
            headers={"Cookie": cookie},
        )  # fmt: skip
    assert status == 200, result
    assert result["served_now"]["learned"]["sha256"] == LearnedReranker(new / "A").sha256
    assert "learned" in result["columns"]
    ranked = result["questions"][0]["rankings"]
    learned = result["questions"][0]["scores"]["learned"]
    expected = [
        _ndcg_one_answer(ranked[side]["learned"], "timetable.md") for side in ("then", "now")
    ]
    assert [learned["then"], learned["now"]] == pytest.approx(expected)
    # The modes did not change between the two servers: their delta is 0.
    for mode in ("bm25", "hybrid-rrf"):
        assert result["questions"][0]["scores"][mode]["direction"] == "unchanged"


def test_a_cluster_that_is_down_is_a_503(harbour, embedder):
    settings, _ = harbour
    with Server(create_app(settings, embedder=embedder)) as up:
        # The session key is kept beside the keys file: the session is valid on both servers.
        cookie, token = signed_in(up, KEY_A)
    down = settings.replace(opensearch_url=f"http://127.0.0.1:{free_port()}", request_timeout=2.0)
    with Server(create_app(down, load_models=False)) as server:
        status, answer = _take(server, cookie, token, "0" * 20, "before")
        assert status == 503, answer
        status, answer = server.request(
            "GET", f"/judge/sets/{'0' * 20}/snapshots/{'0' * 20}/compare",
            headers={"Cookie": cookie},
        )  # fmt: skip
        assert status == 503, answer
        status, answer = server.request(
            "DELETE", f"/judge/sets/{'0' * 20}/snapshots/{'0' * 20}",
            headers={"Cookie": cookie, "X-CSRF-Token": token},
        )  # fmt: skip
        assert status == 503, answer
