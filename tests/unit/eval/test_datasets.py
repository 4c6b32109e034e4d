from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from loader.errors import InputError
from loader.eval.datasets import (
    corpus_to_documents,
    load_beir,
    load_qrels,
    load_questions,
    read_trec_run,
    write_trec_run,
)
from tests.paths import SCIFACT


def _write_jsonl(path: Path, records: list[dict], gz: bool = False) -> None:
    text = "".join(json.dumps(record) + "\n" for record in records)
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as out:
            out.write(text)
    else:
        path.write_text(text, encoding="utf-8")


def _beir_folder(tmp_path: Path, gz: bool = False, qrels: str | None = None) -> Path:
    folder = tmp_path / "tiny"
    (folder / "qrels").mkdir(parents=True)
    corpus = [
        {"_id": "d1", "title": "Refunds", "text": "Para one.\n\nPara two."},
        {"_id": "d2", "title": "", "text": "Only text."},
        {"_id": "d3", "title": "Unjudged", "text": "Noise."},
    ]
    _write_jsonl(folder / ("corpus.jsonl.gz" if gz else "corpus.jsonl"), corpus, gz=gz)
    queries = [
        {"_id": "q1", "text": "refund timing"},
        {"_id": "q2", "text": "only text"},
        {"_id": "q9", "text": "not in this split"},
    ]
    _write_jsonl(folder / "queries.jsonl", queries)
    (folder / "qrels" / "test.tsv").write_text(
        qrels or "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t1\nq2\td2\t1\n", encoding="utf-8"
    )
    return folder


@pytest.mark.parametrize("gz", [False, True])
def test_load_beir_keeps_judged_queries_and_grades(tmp_path: Path, gz: bool) -> None:
    data = load_beir(_beir_folder(tmp_path, gz=gz))
    assert set(data.corpus) == {"d1", "d2", "d3"}
    assert data.corpus["d1"] == {"title": "Refunds", "text": "Para one.\n\nPara two."}
    assert data.queries == {"q1": "refund timing", "q2": "only text"}
    assert data.qrels == {"q1": {"d1": 2, "d2": 1}, "q2": {"d2": 1}}
    assert data.name == "tiny" and data.split == "test"


def test_load_beir_reads_files_an_editor_saved_with_a_byte_order_mark(tmp_path: Path) -> None:
    folder = _beir_folder(tmp_path, qrels="q1\td1\t2\nq2\td2\t1\n")  # no header: q1 first
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        path = folder / name
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    data = load_beir(folder)
    assert set(data.corpus) == {"d1", "d2", "d3"}
    assert data.qrels == {"q1": {"d1": 2}, "q2": {"d2": 1}}  # not '\ufeffq1'


def test_load_beir_bad_qrels_line_names_file_and_line(tmp_path: Path) -> None:
    folder = _beir_folder(tmp_path, qrels="query-id\tcorpus-id\tscore\nq1\td1\t1\nq1 d2 one\n")
    with pytest.raises(InputError, match=r"test\.tsv:3: expected"):
        load_beir(folder)


def test_load_qrels_first_line_is_a_header_only_when_it_is_not_a_judgment(tmp_path: Path) -> None:
    path = tmp_path / "test.tsv"
    path.write_text("q1\td1\t1\nq2\td2\t2\n", encoding="utf-8")  # no header
    assert load_qrels(path) == {"q1": {"d1": 1}, "q2": {"d2": 2}}
    path.write_text("q1\td1\t1.0\nq2\td2\t1\n", encoding="utf-8")  # not skipped as a header
    with pytest.raises(InputError, match=r"test\.tsv:1: expected .*got 'q1\\td1\\t1\.0'"):
        load_qrels(path)
    path.write_text("query-id\tcorpus-id\tscore\nq1\td1\t1.0\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"test\.tsv:2: expected"):
        load_qrels(path)


def test_load_beir_bad_json_names_file_and_line(tmp_path: Path) -> None:
    folder = _beir_folder(tmp_path)
    with (folder / "corpus.jsonl").open("a", encoding="utf-8") as out:
        out.write('{"_id": "d4", "text": \n')
    with pytest.raises(InputError, match=r"corpus\.jsonl:4: not valid JSON"):
        load_beir(folder)


def test_load_beir_missing_pieces(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        load_beir(tmp_path / "nowhere")
    folder = _beir_folder(tmp_path)
    with pytest.raises(InputError, match=r"dev\.tsv does not exist"):
        load_beir(folder, split="dev")
    (folder / "corpus.jsonl").unlink()
    with pytest.raises(InputError, match="no corpus.jsonl"):
        load_beir(folder)


def test_load_beir_judged_query_without_text(tmp_path: Path) -> None:
    folder = _beir_folder(tmp_path, qrels="query-id\tcorpus-id\tscore\nq7\td1\t1\n")
    with pytest.raises(InputError, match="'q7'"):
        load_beir(folder)


@pytest.mark.parametrize(
    ("name", "record", "message"),
    [
        (
            "corpus.jsonl",
            {"_id": "d1", "title": "Other", "text": "Other text."},
            r"corpus\.jsonl:4: document id 'd1' is used twice \(first on line 1\)",
        ),
        (
            "queries.jsonl",
            {"_id": "q1", "text": "another question"},
            r"queries\.jsonl:4: query id 'q1' is used twice \(first on line 1\)",
        ),
    ],
)
def test_load_beir_refuses_repeated_ids(
    tmp_path: Path, name: str, record: dict, message: str
) -> None:
    folder = _beir_folder(tmp_path)
    with (folder / name).open("a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")
    with pytest.raises(InputError, match=message):
        load_beir(folder)


def test_load_beir_refuses_a_query_id_a_trec_run_cannot_hold(tmp_path: Path) -> None:
    folder = _beir_folder(tmp_path, qrels="query-id\tcorpus-id\tscore\nquery one\td1\t1\n")
    with (folder / "queries.jsonl").open("a", encoding="utf-8") as out:
        out.write(json.dumps({"_id": "query one", "text": "refunds"}) + "\n")
    with pytest.raises(
        InputError, match=r"queries\.jsonl:4: query id 'query one' cannot be written to a TREC run"
    ):
        load_beir(folder)
    # an unjudged query of another split is never written: it may keep its id
    folder = _beir_folder(tmp_path / "other")
    with (folder / "queries.jsonl").open("a", encoding="utf-8") as out:
        out.write(json.dumps({"_id": "query one", "text": "refunds"}) + "\n")
    assert set(load_beir(folder).queries) == {"q1", "q2"}


def test_load_questions_refuses_a_question_id_a_trec_run_cannot_hold(tmp_path: Path) -> None:
    path = tmp_path / "questions.jsonl"
    _write_jsonl(
        path,
        [
            {"question": "a?", "source": "a.md"},
            {"id": "late order", "question": "b?", "source": "a.md"},
        ],
    )
    with pytest.raises(
        InputError,
        match=r"questions\.jsonl:2: query id 'late order' cannot be written to a TREC run",
    ):
        load_questions(path)


def test_corpus_to_documents() -> None:
    documents = corpus_to_documents(
        {"d1": {"title": "Refunds", "text": "Para one.\n\n  \nPara two."}, "d2": {"text": "x"}}
    )
    first, second = documents
    assert first.source == "d1" and first.title == "Refunds"
    assert len(first.sections) == 1 and first.sections[0].heading_path == ()
    assert [(b.kind, b.text) for b in first.sections[0].blocks] == [
        ("paragraph", "Para one."),
        ("paragraph", "Para two."),
    ]
    assert second.title == "d2"  # no title: the id stands in


def test_load_questions(tmp_path: Path) -> None:
    path = tmp_path / "questions.jsonl"
    _write_jsonl(
        path,
        [
            {
                "question": "How long do UPI refunds take?",
                "source": "refunds.md",
                "heading_path": "Refunds > UPI",
                "answer": "48 hours",
                "difficulty": "easy",
            },
            {"id": "late", "question": "Late order?", "source": "refunds.md"},
        ],
    )
    first, second = load_questions(path)
    assert first.id == "q1" and first.source == "refunds.md"
    assert first.heading_path == "Refunds > UPI" and first.answer == "48 hours"
    assert first.metadata == {"difficulty": "easy"}
    assert second.id == "late" and second.heading_path == "" and second.answer == ""


def test_load_questions_errors(tmp_path: Path) -> None:
    path = tmp_path / "questions.jsonl"
    _write_jsonl(path, [{"question": "a?", "source": "a.md"}, {"question": "b?"}])
    with pytest.raises(InputError, match=r"questions\.jsonl:2: missing 'source'"):
        load_questions(path)
    path.write_text("", encoding="utf-8")
    with pytest.raises(InputError, match="no questions"):
        load_questions(path)
    with pytest.raises(InputError, match="does not exist"):
        load_questions(tmp_path / "none.jsonl")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        # `loader eval` ended with "unexpected ValueError: invalid literal for int() with base
        # 10: 'two'" (exit 1, no file named) for a bad grade, and "unexpected RecursionError"
        # for a line nested too deeply.
        (
            '{"question": "b?", "source": "b.md", '
            '"judgments": [{"source": "b.md", "grade": "two"}]}',
            r"questions\.jsonl:2: judgments\[0\]: grade 'two' is not 0, 1 or 2",
        ),
        (
            '{"question": "b?", "source": "b.md", "judgments": [{"source": "b.md", "grade": NaN}]}',
            r"questions\.jsonl:2: judgments\[0\]: grade nan is not 0, 1 or 2",
        ),
        (
            '{"question": "b?", "x": ' + "[" * 100_000,
            r"questions\.jsonl:2: not valid JSON \(nested",
        ),
        (
            '{"question": "b?", "x": ' + "9" * 5_000 + "}",
            r"questions\.jsonl:2: not valid JSON \(a n",
        ),
    ],
)
def test_load_questions_refuses_bad_judgments_and_json_naming_the_line(
    tmp_path: Path, line: str, message: str
) -> None:
    path = tmp_path / "questions.jsonl"
    path.write_text('{"question": "a?", "source": "a.md"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=message):
        load_questions(path)


def test_load_questions_reads_the_grades_learn_reads(tmp_path: Path) -> None:
    """A grade as `loader learn` and `judgments import` read it (a number or a numeric string,
    "2.000" as the Workbench writes it) is the grade eval judges by."""
    from loader.eval.tasks import _question_qrels

    path = tmp_path / "questions.jsonl"
    judged = [{"source": "a.md", "grade": "2.000"}, {"source": "b.md", "grade": 1.0}]
    _write_jsonl(path, [{"question": "a?", "source": "a.md", "judgments": judged}])
    (question,) = load_questions(path)
    assert _question_qrels(question) == {"a.md": 2, "b.md": 1}


def test_trec_run_round_trip(tmp_path: Path) -> None:
    run = {"q1": [("d1", 2.5), ("d2", 1.25)], "q2": [("d3", 0.5)]}
    path = tmp_path / "runs" / "bm25.trec"
    write_trec_run(run, path, tag="bm25")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "q1 Q0 d1 1 2.500000 bm25"
    assert lines[2] == "q2 Q0 d3 1 0.500000 bm25"
    assert read_trec_run(path) == run


def test_read_trec_run_orders_by_score_and_rejects_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "run.trec"
    path.write_text("q1 Q0 a 1 1.0 t\nq1 Q0 b 2 3.0 t\nq1 Q0 c 3 1.0 t\n", encoding="utf-8")
    assert [doc for doc, _ in read_trec_run(path)["q1"]] == ["b", "a", "c"]
    path.write_text("q1 Q0 a 1 1.0 t\nq1 a 1.0\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"run\.trec:2"):
        read_trec_run(path)


def test_write_trec_run_rejects_whitespace_ids(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="my doc.md"):
        write_trec_run({"q1": [("my doc.md", 1.0)]}, tmp_path / "run.trec")


@pytest.mark.skipif(not SCIFACT.is_dir(), reason="SciFact not present at ../shared/datasets")
def test_real_scifact_folder() -> None:
    data = load_beir(SCIFACT, split="test")
    assert len(data.corpus) == 5183
    assert len(data.queries) == 300
    assert sum(len(judged) for judged in data.qrels.values()) == 339
    assert set(data.queries) == set(data.qrels)
