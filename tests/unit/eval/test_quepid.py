"""Quepid's ratings CSV, both ways, without a cluster (the round trip through a real node is in
tests/integration/serve/test_judging_browser.py)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from loader.cli import cli
from loader.errors import ConfigError
from loader.eval.judgments import read_judgment_file
from loader.eval.quepid import ratings_csv, read_ratings_csv, to_grade, to_rating


def test_a_file_exported_reads_back_with_its_questions_and_grades(tmp_path):
    graded = [("late, or lost?", {"c2": 2, "c1": 0}), ('say "upi"', {"c9": 1})]
    text = ratings_csv(graded)
    assert text.splitlines() == [
        "query,docid,rating",
        '"late, or lost?",c1,0',
        '"late, or lost?",c2,2',
        '"say ""upi""",c9,1',
    ]
    path = tmp_path / "ratings.csv"
    path.write_text(text)
    imported = read_judgment_file(path)
    assert (imported.format, imported.questions) == ("quepid-csv", ["late, or lost?", 'say "upi"'])
    assert imported.grades == {0: {"c1": 0, "c2": 2}, 1: {"c9": 1}}


def test_quepid_scales_map_to_the_nearest_grade_and_back():
    assert [to_grade(r, 3) for r in (0, 1, 2, 3)] == [0, 1, 1, 2]  # nDCG@10's 0-3
    assert [to_grade(r, 1) for r in (0, 1)] == [0, 2]  # AP's 0-1
    assert [to_grade(r, 4) for r in (0, 1, 2, 3, 4)] == [0, 1, 1, 2, 2]  # halves up
    assert [to_rating(g, 3) for g in (0, 1, 2)] == [0, 2, 3]
    assert [to_grade(to_rating(g, s), s) for s in (1, 2, 3, 4, 10) for g in (0, 2)] == [0, 2] * 5


def test_rows_of_a_query_need_not_be_together_and_a_bom_and_crlf_are_read():
    text = "\ufeffQuery, DocID ,Rating\r\nq1,a,3\r\nq2,b,0\r\n\r\nq1,c,1.0\r\n"
    questions, grades = read_ratings_csv(text, "ratings file r.csv", scale=3)
    assert questions == ["q1", "q2"]
    assert grades == {0: {"a": 2, "c": 1}, 1: {"b": 0}}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("query,docid,rating\n", "holds no question"),
        ("query,docid,rating\nq,a\n", "line 2: 2 fields, expected 3"),
        ("query,docid,rating\nq,a,1\nq, ,1\n", "line 3: the query and the docid must not be"),
        ("query,docid,rating\nq,a,3\n", "line 2: rating '3' is not a number of 0 to 2; give the"),
        ("query,docid,rating\nq,a,-1\n", "line 2: rating '-1' is not a number of 0 to 2$"),
        ("query,docid,rating\nq,a,nan\n", "line 2: rating 'nan' is not a number"),
        ("query,docid,rating\nq,a,1e400\n", "line 2: rating '1e400' is not a number"),
        ("query,docid,rating\nq,a,good\n", "line 2: rating 'good' is not a number"),
        ("query,docid,rating\nq,a,1\nr,b,1\nq,a,2\n", "line 4: 'a' is rated for this query on"),
        ('query,docid,rating\n"q\nstill q",a,1\n"open,a,1\n', r"line 4: not valid CSV"),
    ],
)  # fmt: skip
def test_every_row_is_checked_naming_the_file_and_the_line(tmp_path, text, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"^judgments file .*bad\.csv:? " + message):
        read_judgment_file(path)


def test_a_csv_without_the_header_is_refused_naming_it():
    with pytest.raises(ConfigError, match=r"^r\.csv: line 1 must be the header query,docid,rating"):
        read_ratings_csv("q,d,r\nx,y,1\n", "r.csv")


def test_a_rating_scale_is_refused_for_a_format_without_one(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text('{"question": "q"}\n')
    with pytest.raises(ConfigError, match=r"--rating-scale applies to quepid-csv only .*questions"):
        read_judgment_file(path, rating_scale=3)


def test_the_import_command_refuses_a_bad_csv_with_exit_2_before_connecting(tmp_path):
    path = tmp_path / "ratings.csv"
    path.write_text("query,docid,rating\nrefund?,c1,3\n")
    result = CliRunner().invoke(
        cli,
        ["judgments", "import", str(path), "--tenant", "a", "--name", "n"],
        env={"OPENSEARCH_URL": "http://127.0.0.1:9"},  # never asked: the file is read first
    )
    assert result.exit_code == 2, result.output
    assert "ratings.csv: line 2: rating '3' is not a number of 0 to 2" in result.output
