"""The pure half of the judging loop: sampling, the export formats, reading them back."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from loader.cli import cli
from loader.errors import ConfigError
from loader.eval.judgments import (
    graded_qrels,
    questions_lines,
    read_judgment_file,
    srw_judgments,
    srw_query_set,
)
from loader.query.judgments import (
    Grade,
    JudgingState,
    QuerySet,
    _doc_id,
    sample_questions,
    set_id_for,
)
from loader.query.query_log import normalize_question


def logged(text, second, query_id=None, client_id="c1", top_score=1.0):
    return {
        "query_id": query_id or f"{text}-{second}",
        "user_query": text,
        "timestamp": f"2026-12-03T07:00:{second:02d}.000Z",
        "client_id": client_id,
        "query_attributes": {"top_score": top_score},
    }


def test_normalisation_folds_case_spaces_and_end_punctuation():
    assert normalize_question("  How long do REFUNDS   take?! ") == "how long do refunds take"
    assert normalize_question("¿Qué?") == "qué"


def test_frequent_counts_spellings_as_one_question_shown_as_most_often_spelled():
    queries = [
        logged("refund time", 1),
        logged("Refund time?", 2),
        logged("refund time", 3),
        logged("upi", 4),
        logged("upi", 5),
        logged("cards", 6),
    ]
    assert sample_questions(queries, [], 2, "frequent") == ["refund time", "upi"]


def test_random_is_seeded_and_distinct():
    queries = [logged(f"q{n}", n) for n in range(10)] + [logged("Q1", 11)]
    first = sample_questions(queries, [], 5, "random", seed=3)
    assert first == sample_questions(queries, [], 5, "random", seed=3)
    assert len({normalize_question(q) for q in first}) == 5


def test_worst_puts_unclicked_followed_up_low_scores_first():
    queries = [
        logged("clicked", 1, query_id="a", client_id="x", top_score=0.1),
        logged("followed up", 10, query_id="b", client_id="y", top_score=5.0),
        logged("followed up again", 30, query_id="c", client_id="y", top_score=5.0),
        logged("low score", 40, query_id="d", client_id="z", top_score=0.2),
    ]
    events = [{"query_id": "a", "action_name": "click"}]
    assert sample_questions(queries, events, 4, "worst") == [
        "followed up",
        "low score",
        "followed up again",
        "clicked",
    ]


def test_unknown_strategy_is_refused():
    with pytest.raises(ConfigError, match="strategy: 'best' is not one of"):
        sample_questions([], [], 1, "best")


def _judged():
    query_set = QuerySet("s1", "week", "acme", "frequent", ["late?", "nothing", "upi"])
    state = JudgingState(
        grades={
            0: {
                "c1": Grade(0, "c1", 1, "refunds.md", ["Refunds"]),
                "c2": Grade(0, "c2", 2, "refunds.md", ["Refunds", "Late"]),
                "c3": Grade(0, "c3", 1, "payments.md", []),
            },
            1: {"c4": Grade(1, "c4", 0, "faq.md", [])},
        }
    )
    return query_set, state


def test_questions_file_keeps_every_grade_and_leaves_unanswered_questions_out():
    lines = questions_lines(*_judged())
    assert [line["question"] for line in lines] == ["late?"]
    # whose documents were graded: eval scores the question against that tenant's documents
    assert lines[0]["tenant"] == "acme"
    assert (lines[0]["source"], lines[0]["heading_path"]) == ("refunds.md", ["Refunds", "Late"])
    assert [j["chunk_id"] for j in lines[0]["judgments"]] == ["c2", "c1", "c3"]
    assert graded_qrels(lines[0]["judgments"]) == {"refunds.md": 2, "payments.md": 1}


def test_srw_formats(tmp_path):
    query_set, state = _judged()
    assert srw_query_set(query_set)["querySetQueries"] == [
        {"queryText": "late?"},
        {"queryText": "nothing"},
        {"queryText": "upi"},
    ]
    body = srw_judgments(query_set, state)
    assert body["type"] == "IMPORT_JUDGMENT"
    assert body["judgmentRatings"][1] == {
        "query": "nothing",
        "ratings": [{"docId": "c4", "rating": "0.000"}],
    }
    path = tmp_path / "j.json"
    path.write_text(json.dumps(body))
    imported = read_judgment_file(path)
    assert imported.questions == ["late?", "nothing"]
    assert imported.grades == {0: {"c1": 1, "c2": 2, "c3": 1}, 1: {"c4": 0}}


def test_questions_file_reads_back_with_its_grades(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in questions_lines(*_judged())))
    imported = read_judgment_file(path)
    assert (imported.format, imported.questions) == ("questions", ["late?"])
    assert imported.grades == {0: {"c2": 2, "c1": 1, "c3": 1}}


def test_a_rating_out_of_range_names_the_file(tmp_path):
    path = tmp_path / "j.json"
    path.write_text(
        json.dumps(
            {"judgmentRatings": [{"query": "q", "ratings": [{"docId": "c", "rating": "3.000"}]}]}
        )
    )
    with pytest.raises(
        ConfigError, match=r"j.json: judgmentRatings\[0\].ratings\[0\]: rating '3.000' is not 0"
    ):
        read_judgment_file(path)


RATING0 = r"judgmentRatings\[0\]\.ratings\[0\]"


def _srw(ratings) -> str:
    return json.dumps({"judgmentRatings": [{"query": "q", "ratings": ratings}]})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # Infinity parses as a float and "1e400" reads as one: round() of either overflowed.
        (_srw([{"docId": "c", "rating": float("inf")}]), RATING0 + r": rating inf is not"),
        (_srw([{"docId": "c", "rating": "1e400"}]), RATING0 + r": rating '1e400' is not"),
        (_srw([{"docId": "c", "rating": True}]), RATING0 + r": rating True is not"),
        (_srw(["c"]), RATING0 + r" must be an object, got 'c'"),
        (_srw([{"rating": "1"}]), RATING0 + r".docId must be a non-empty string, got None"),
        (_srw({"docId": "c"}), r"judgmentRatings\[0\].ratings must be a list, got \{"),
        (json.dumps({"judgmentRatings": [7]}), r"judgmentRatings\[0\] must be an object"),
        (json.dumps({"querySetQueries": [{"queryText": 1}]}), r"querySetQueries\[0\].queryText"),
        (json.dumps({"querySetQueries": []}), "holds no question"),
        ('{"question": "q"}\n{"question": "r", "judgments": [{"grade": 1}]}\n',
         r"line 2: judgments\[0\]: chunk_id must be a non-empty string"),
        ('{"question": "q"}\n\n{"question": "r", "judgments": 5}\n',
         "line 3: judgments must be a list, got 5"),
        ('{"question": "q"}\n[1]\n', "line 2 must be an object, got \\[1\\]"),
        ('{"question": "q"}\n{"question": \n', "line 2: not valid JSON"),
        ('{"question": "q", "judgments": [{"chunk_id": "c", "grade": 1e999}]}\n',
         r"line 1: judgments\[0\]: rating inf is not 0, 1 or 2"),
        ('{"question": "q", "x": ' + "9" * 5000 + "}\n", "line 1: not valid JSON .a number has"),
        # A lone surrogate, from a broken escape, is no text UTF-8 carries: it was stored.
        ('{"question": "\\ud800"}\n', r"line 1: question holds the lone surrogate U\+D800"),
        ('{"question": "q", "judgments": [{"chunk_id": "\\udc9f", "grade": 1}]}\n',
         r"line 1: judgments\[0\]: chunk_id holds the lone surrogate U\+DC9F"),
        (json.dumps({"querySetQueries": [{"queryText": "\ud800"}]}),
         r"querySetQueries\[0\].queryText holds the lone surrogate"),
        (_srw([{"docId": "\udfff", "rating": 1}]), RATING0 + r".docId holds the lone surrogate"),
    ],
)  # fmt: skip
def test_every_field_of_an_imported_file_is_checked_naming_the_file_and_where(
    tmp_path, text, message
):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"^judgments file .*bad\.json:? " + message):
        read_judgment_file(path)


def test_a_fifo_or_a_device_is_refused_not_read(tmp_path):
    """A FIFO once made the import wait forever for a writer, /dev/zero filled the memory."""
    fifo = tmp_path / "judged.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match=r"judged\.jsonl is a named pipe, not a regular file"):
        read_judgment_file(fifo)
    with pytest.raises(ConfigError, match=r"/dev/zero is a character device"):
        read_judgment_file("/dev/zero")


def test_the_import_command_refuses_a_bad_file_with_exit_2_before_connecting(tmp_path):
    path = tmp_path / "j.json"
    path.write_text(_srw([{"docId": "c", "rating": "1e400"}]))
    result = CliRunner().invoke(
        cli,
        ["judgments", "import", str(path), "--tenant", "a", "--name", "n"],
        env={"OPENSEARCH_URL": "http://127.0.0.1:9"},  # never asked: the file is read first
    )
    assert result.exit_code == 2, result.output
    assert "j.json: judgmentRatings[0].ratings[0]: rating '1e400' is not 0, 1 or 2" in result.output


def test_query_set_and_grade_ids_escape_the_separator_as_document_ids_do():
    """Joined plainly, tenant 'px' with name 'py\x1fkb' was tenant 'px\x1fpy' with name 'kb':
    one tenant's import overwrote the other's set."""
    assert set_id_for("px", "py\x1fkb") != set_id_for("px\x1fpy", "kb")
    assert set_id_for("acme", "week-49") == set_id_for("acme", "week-49")
    assert _doc_id("s", 1, "c\x1fd") != _doc_id("s", "1\x1fc", "d")


def test_two_raters_grades_are_exported_resolved_and_say_so():
    query_set = QuerySet("s1", "week", "acme", "frequent", ["late?", "upi"])
    state = JudgingState()
    for grade in (
        Grade(0, "c1", 2, "refunds.md", rater="alice"),
        Grade(0, "c1", 1, "refunds.md", rater="bob"),
        Grade(0, "c2", 2, "late.md", rater="alice"),
        Grade(1, "c3", 2, "upi.md", rater="bob"),
    ):
        state.add(grade)
    lines = questions_lines(query_set, state)
    assert lines[0]["resolution"] == "the mean of the raters' grades, rounded down"
    assert lines[0]["judgments"] == [
        {
            "chunk_id": "c2",
            "source": "late.md",
            "heading_path": [],
            "grade": 2,
            "raters": {"alice": 2},
        },
        {
            "chunk_id": "c1",
            "source": "refunds.md",
            "heading_path": [],
            "grade": 1,
            "raters": {"alice": 2, "bob": 1},
        },
    ]
    assert "resolution" not in lines[1]  # one rater only
    body = srw_judgments(query_set, state)
    assert body["description"].endswith(
        "a result several raters graded: the mean of the raters' grades, rounded down"
    )
    assert body["judgmentRatings"][0]["ratings"] == [
        {"docId": "c1", "rating": "1.000"},
        {"docId": "c2", "rating": "2.000"},
    ]


def test_notes_a_need_and_cant_tell_are_exported_with_the_question():
    query_set = QuerySet("s1", "week", "acme", "frequent", ["late?"])
    state = JudgingState()
    state.add(Grade(0, "c1", 2, "refunds.md", rater="alice", note="says 5 days"))
    state.add(Grade(0, "c2", 1, "late.md", rater="alice"))
    state.needs[0] = "how long a refund of a late order takes"
    state.cant_tell[0] = {"c3": {"bob": "the table is cut off"}}
    (line,) = questions_lines(query_set, state)
    assert line["information_need"] == "how long a refund of a late order takes"
    assert line["cant_tell"] == [
        {"chunk_id": "c3", "rater": "bob", "reason": "the table is cut off"}
    ]
    assert line["judgments"][0]["notes"] == {"alice": "says 5 days"}
    assert "notes" not in line["judgments"][1]
