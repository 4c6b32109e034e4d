"""The judging page's pure parts: pooling, what moved, signed sessions."""

from __future__ import annotations

from loader.query.result import SearchHit
from loader.serve.auth import Sessions
from loader.serve.judge_view import movements, pool


def hit(chunk_id: str) -> SearchHit:
    return SearchHit(chunk_id=chunk_id, doc_id=chunk_id, body=f"text {chunk_id}")


def test_pool_orders_by_best_rank_then_by_how_many_modes_found_it():
    rows = pool({"bm25": [hit("a"), hit("b")], "vector": [hit("c"), hit("b")]})
    assert [(row.hit.chunk_id, row.ranks) for row in rows] == [
        ("a", {"bm25": 1}),
        ("c", {"vector": 1}),
        ("b", {"bm25": 2, "vector": 2}),
    ]


def test_movements_say_what_moved_between_two_rankings():
    left, right = movements([hit("a"), hit("b"), hit("c")], [hit("c"), hit("a"), hit("d")])
    # ▲n: n places higher in this list than in the other; new: not in the other at all.
    assert [row["move"] for row in left] == ["▲1", "new", "▼2"]
    assert [row["move"] for row in right] == ["▲2", "▼1", "new"]


def test_sessions_are_signed_and_expire():
    sessions = Sessions(b"k" * 32)
    cookie = sessions.issue("acme", now=1000.0)
    assert sessions.tenant(cookie, now=1001.0) == "acme"
    assert sessions.tenant(cookie, now=1000.0 + 13 * 3600) is None
    version, encoded, expiry, signature = cookie.split(".")
    forged = f"{version}.{'WyJnbG9iZXgiLCAiIl0'}.{expiry}.{signature}"  # ["globex", ""]
    assert sessions.tenant(forged, now=1001.0) is None
    assert Sessions(b"o" * 32).tenant(cookie, now=1001.0) is None
    assert sessions.csrf(cookie) != Sessions(b"o" * 32).csrf(cookie)


def test_direction_controls_in_a_question_or_chunk_are_shown_not_obeyed():
    from types import SimpleNamespace

    from loader.serve.judge_view import GRADE_LABELS, PoolRow, environment

    override = "refund \u202eevil\u202c and \u2067isolate\u2069 \u200f"
    row = PoolRow(SearchHit(chunk_id="c-1", doc_id="d", body=override), {"bm25": 1}, override)
    page = (
        environment()
        .get_template("question.html")
        .render(
            tenant="A\u202eB",
            rater="r\u202e",
            csrf="t",
            query_set=SimpleNamespace(name="s\u202e", set_id="abc"),
            number=0,
            count=1,
            question=override,
            pool=[row],
            grades=GRADE_LABELS,
            skipped=False,
            modes=("bm25",),
            need=override,
            find=override,
            find_mode="bm25",
            find_modes=("bm25",),
            depth=5,
        )
    )
    assert not any(char in page for char in "\u202e\u202c\u2067\u2069\u200f")
    assert "refund [U+202E]evil[U+202C] and [U+2067]isolate[U+2069] [U+200F]" in page
    assert "tenant <b>A[U+202E]B</b> · rater <b>r[U+202E]</b>" in page


def test_a_session_names_its_rater_and_an_older_cookie_reads_as_the_tenants():
    sessions = Sessions(b"k" * 32)
    cookie = sessions.issue("acme", now=1000.0, rater="alice")
    assert sessions.holder(cookie, now=1001.0) == ("acme", "alice")
    # A cookie of the format before raters (<tenant b64>.<expiry>.<hmac>), signed by this key.
    payload = f"YWNtZQ.{int(1000.0 + 3600)}"
    older = f"{payload}.{sessions._sign(payload)}"
    assert sessions.holder(older, now=1001.0) == ("acme", "")
    version, encoded, expiry, signature = cookie.split(".")
    # The rater cannot be swapped under the same signature.
    other = "WyJhY21lIiwgImJvYiJd"  # ["acme", "bob"]
    assert sessions.holder(f"{version}.{other}.{expiry}.{signature}", now=1001.0) is None


def test_question_rows_sort_by_a_modes_worst_or_the_widest_spread_unscored_last():
    from loader.serve.judge_scores import sorted_rows

    rows = [
        {"number": 0, "scores": {"bm25": 0.9}, "spread": 0.1},
        {"number": 1, "scores": {"bm25": None}, "spread": None},
        {"number": 2, "scores": {"bm25": 0.2}, "spread": 0.6},
        {"number": 3, "scores": {"bm25": 0.5}, "spread": 0.6},
    ]
    assert [r["number"] for r in sorted_rows(rows, "bm25")] == [2, 3, 0, 1]
    assert [r["number"] for r in sorted_rows(rows, "spread")] == [2, 3, 0, 1]
    assert [r["number"] for r in sorted_rows(rows[::-1], "number")] == [0, 1, 2, 3]
    # The learned model's column, asked for where no model is served: in order, not a 500.
    assert [r["number"] for r in sorted_rows(rows, "learned")] == [0, 1, 2, 3]


def test_judge_next_follows_the_served_model_else_the_modes_and_skips_what_is_mine():
    from loader.serve.judge_scores import judge_next, sorted_rows

    rows = [
        {"number": 0, "mine": False, "disagree": 0.9, "moves": 0.1},
        {"number": 1, "mine": False, "disagree": 0.2, "moves": None},
        {"number": 2, "mine": True, "disagree": 1.0, "moves": 0.8},
        {"number": 3, "mine": False, "disagree": 0.4, "moves": 0.5},
    ]
    assert [r["number"] for r in sorted_rows(rows, "moves")] == [2, 3, 0, 1]
    # With a learned model: where its top 10 moves furthest from fusion's, unjudged.
    row, measure = judge_next(rows, by_model=True)
    assert (row["number"], measure) == (3, "moves")
    # Without one: where the modes disagree most, as before.
    row, measure = judge_next(rows, by_model=False)
    assert (row["number"], measure) == (0, "disagree")
    assert judge_next([{**r, "mine": True} for r in rows], by_model=True) == (None, "moves")


def test_found_chunks_join_the_pool_once_marked_with_their_rank():
    from loader.serve.judge_view import with_found

    rows = with_found(pool({"bm25": [hit("a"), hit("b")]}), [hit("c"), hit("a")])
    assert [(row.hit.chunk_id, row.ranks) for row in rows] == [
        ("a", {"bm25": 1, "found": 2}),
        ("b", {"bm25": 2}),
        ("c", {"found": 1}),
    ]


def test_rater_grades_are_the_raters_own_with_cant_tell_in_a_grades_place():
    from loader.query.grades import Grade, JudgingState
    from loader.serve.judge_view import rater_grades

    state = JudgingState()
    state.add(Grade(0, "c1", 2, rater="alice", note="the steps"))
    state.add(Grade(0, "c1", 0, rater="bob"))
    state.add(Grade(0, "c2", 1, rater="alice"))
    state.add(Grade(1, "c3", 2, rater="alice"))  # another question
    state.cant_tell[0] = {"c2": {"alice": "two policies"}, "c4": {"bob": "unclear"}}
    assert rater_grades(state, "alice", 0) == {"c1": (2, "the steps"), "c2": ("?", "two policies")}
    assert rater_grades(state, "bob", 0) == {"c1": (0, ""), "c4": ("?", "unclear")}
    assert rater_grades(state, "carol", 0) == {}
