"""The question list against a snapshot, without a cluster: sorted by a column's change (the
worst first), and rendered with ▲/▼ and the figure (never the colour alone), a hostile label
as text."""

from __future__ import annotations

from types import SimpleNamespace

from loader.eval.set_searches import comparison_of, reader_name, served_now
from loader.eval.snapshot_scores import compare
from loader.query.snapshots import Snapshot, question_digest
from loader.serve.judge_scores import sorted_rows
from loader.serve.judge_view import environment


def test_rows_sort_by_a_columns_change_the_worst_first_uncompared_last():
    rows = [
        {"number": 0, "delta": {"bm25": 0.2}},
        {"number": 1, "delta": {"bm25": None}},
        {"number": 2, "delta": {"bm25": -0.5}},
        {"number": 3, "delta": {"bm25": 0.0}},
        {"number": 4},  # no comparison at all
    ]
    assert [r["number"] for r in sorted_rows(rows, "delta-bm25")] == [2, 3, 0, 1, 4]
    assert [r["number"] for r in sorted_rows(rows, "delta-vector")] == [0, 1, 2, 3, 4]


def _grades(**by_source):
    return {
        source: SimpleNamespace(source=f"{source}.md", grade=grade)
        for source, grade in by_source.items()
    }


def test_the_comparison_scores_both_sides_with_todays_grades_and_names_lone_columns():
    questions = ["late refund", "wallet"]
    snapshot = Snapshot(
        "0" * 20, "set", "A", "before", "2026-12-06T10:00:00.000Z",
        columns=["bm25", "vector"],
        digests=[question_digest(q) for q in questions],
        rankings=[{"bm25": ["a.md", "b.md"], "vector": ["a.md"]}, {"bm25": ["w.md"], "vector": []}],
    )  # fmt: skip
    state = SimpleNamespace(grades={0: _grades(a=2)})
    now = [
        {"bm25": ["b.md", "a.md"], "learned": ["a.md"]},
        {"bm25": ["w.md"], "learned": []},
    ]
    result = comparison_of(snapshot, questions, state, now)
    assert result["columns"] == ["bm25"]
    assert (result["only_then"], result["only_now"]) == (["vector"], ["learned"])
    assert result["counts"]["bm25"] == {"better": 0, "worse": 1, "unchanged": 0}


def _page(comparison, snapshot, rows, sort="number"):
    query_set = SimpleNamespace(set_id="s1", name="week")
    return environment().get_template("questions.html").render(
        tenant="A", csrf="t", rater="", query_set=query_set, rows=rows, sort=sort,
        modes=("bm25", "vector"), means={"bm25": 0.5, "vector": 0.5}, next_row=None,
        next_by="", model_base="", snapshots=[snapshot], snapshot=snapshot,
        comparison=comparison, against=snapshot.snapshot_id,
    )  # fmt: skip


def test_the_list_shows_each_change_with_its_arrow_and_figure_and_the_label_as_text():
    label = '<script>alert(1)</script> "><img src=x onerror=1>'
    snapshot = Snapshot("a" * 20, "s1", "A", label, "2026-12-06T10:00:00.000Z", "alice",
                        served={"search_mode": "hybrid-rrf", "learned": None},
                        columns=["bm25", "vector"])  # fmt: skip
    then = [{"bm25": ["a.md", "b.md"], "vector": ["a.md"]}, {"bm25": ["b.md"], "vector": ["x.md"]}]
    now = [{"bm25": ["b.md", "a.md"], "vector": ["a.md"]}, {"bm25": ["b.md"], "vector": ["b.md"]}]
    graded = [[{"source": "a.md", "grade": 2}], [{"source": "b.md", "grade": 1}]]
    comparison = compare(then, now, graded, ["bm25", "vector"]) | {"only_then": [], "only_now": []}
    rows = []
    for number, compared in enumerate(comparison["questions"]):
        scores = {c: v["now"] for c, v in compared["scores"].items()}
        rows.append({
            "number": number, "question": f"q{number}", "judged": 1, "skipped": False,
            "scores": scores, "spread": 0.0, "disagree": 0.0, "moves": None,
            "change": compared["scores"],
        })  # fmt: skip
    page = _page(comparison, snapshot, rows)
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img" not in page
    # Question 0: bm25 lost the answer's first place (1 -> 0.631); vector unchanged.
    assert '0.631 <span class="delta down" title="worse than the snapshot">▼0.369</span>' in page
    assert '1.000 <span class="delta same" title="as in the snapshot">=</span>' in page
    # Question 1: vector found it (0 -> 1).
    assert '1.000 <span class="delta up" title="better than the snapshot">▲1.000</span>' in page
    counts = page[page.index('<tr data-column="bm25">') :]
    assert '<td class="better">0</td><td class="worse">1</td><td class="unchanged">1</td>' in counts
    assert 'href="?sort=delta-bm25&amp;against=aaaaaaaaaaaaaaaaaaaa"' in page
    assert 'value="aaaaaaaaaaaaaaaaaaaa" selected' in page


def test_what_was_served_names_no_server_path():
    settings = SimpleNamespace(
        search_mode="hybrid-rrf", rerank="auto",
        embedding_model="/srv/models/private-reader", second_embedding_model="",
    )  # fmt: skip
    model = SimpleNamespace(
        sha256="f" * 64, created="2026-12-01T09:00:00Z", tenant="A", learnt_from={"x", "y"},
        candidate_depth=50, folder="/srv/models/learned/A",
    )  # fmt: skip
    served = served_now(settings, model, "hybrid-rrf")
    assert served["readers"] == {
        "embedding_model": "private-reader",
        "second_embedding_model": "none",
    }
    assert served["learned"] == {
        "sha256": "f" * 64, "created": "2026-12-01T09:00:00Z", "tenant": "A",
        "base_mode": "hybrid-rrf", "questions_learnt_from": 2, "candidate_depth": 50,
    }  # fmt: skip
    assert "/srv" not in str(served)
    assert reader_name("BAAI/bge-small-en-v1.5") == "bge-small-en-v1.5"
