"""What `loader eval` evaluates: BEIR folders and questions files read into an ``EvalTask``."""

from __future__ import annotations

import json
import logging

import pytest

from loader.errors import ConfigError, InputError
from loader.eval.tasks import load_task
from tests.paths import FIXTURES as ALL_FIXTURES

FIXTURES = ALL_FIXTURES / "eval"


def test_load_task_beir_keeps_the_split_and_limit():
    task = load_task(FIXTURES / "tiny-beir")
    assert (task.name, task.kind, task.split, task.document_count) == (
        "tiny-beir",
        "beir",
        "test",
        5,
    )
    assert [q.id for q in task.queries] == ["q1", "q2", "q3", "q4"]
    assert task.qrels["q4"] == {"coast": 2, "keeper": 1}
    assert [d.source for d in task.documents()] == ["bees", "lava", "bread", "keeper", "coast"]
    limited = load_task(FIXTURES / "tiny-beir", limit=2)
    assert list(limited.qrels) == ["q1", "q2"]
    assert load_task(FIXTURES / "tiny-beir", split="train").qrels == {"q5": {"bees": 1}}


def test_a_questions_task_reads_each_document_once(monkeypatch):
    # The source check and the push both need the documents: reading 28 PDFs twice cost 120 s.
    from loader.ingest import readers

    reads = []
    real_read = readers._read

    def counted_read(path, *args, **kwargs):
        reads.append(path.name)
        return real_read(path, *args, **kwargs)

    monkeypatch.setattr(readers, "_read", counted_read)
    task = load_task(FIXTURES / "questions.jsonl", docs=FIXTURES / "docs")
    pushed = [item.source for item in task.documents()]
    assert sorted(reads) == sorted(pushed) == ["payments.md", "refunds.md"], reads


def test_load_task_questions_file_over_a_docs_folder():
    task = load_task(FIXTURES / "questions.jsonl", docs=FIXTURES / "docs")
    assert (task.name, task.kind, task.document_count) == ("docs", "questions", 2)
    assert [(q.id, q.source, q.heading_path) for q in task.queries] == [
        ("late", "refunds.md", ("Late deliveries",)),
        ("upi", "payments.md", ("Payments", "UPI")),
        ("photo", "refunds.md", ()),
    ]
    assert task.qrels == {
        "late": {"refunds.md": 1},
        "upi": {"payments.md": 1},
        "photo": {"refunds.md": 1},
    }
    assert sorted(d.source for d in task.documents()) == ["payments.md", "refunds.md"]


def test_a_question_naming_no_document_of_the_folder_is_warned_about(tmp_path, caplog):
    questions = tmp_path / "questions.jsonl"
    lines = [
        {"id": "typo", "question": "late refunds?", "source": "refund.md"},
        {"id": "case", "question": "UPI?", "source": "PAYMENTS.MD"},
        {"id": "fine", "question": "UPI?", "source": "./payments.md"},
    ]
    questions.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="loader.eval.tasks"):
        load_task(questions, docs=FIXTURES / "docs")
    warned = [record.getMessage() for record in caplog.records]
    assert len(warned) == 2, warned
    assert "question 'typo' names source 'refund.md', which is no document of" in warned[0]
    assert "question 'case' names source 'PAYMENTS.MD'" in warned[1]


def test_load_task_errors(tmp_path):
    with pytest.raises(ConfigError, match="--docs FOLDER"):
        load_task(FIXTURES / "questions.jsonl")
    with pytest.raises(ConfigError, match="--docs is only for a questions file"):
        load_task(FIXTURES / "tiny-beir", docs=FIXTURES / "docs")
    with pytest.raises(InputError, match="neither a BEIR folder nor a questions file"):
        load_task(tmp_path / "missing")
    with pytest.raises(ConfigError, match="nowhere is not a folder"):
        load_task(FIXTURES / "questions.jsonl", docs=tmp_path / "nowhere")


def test_a_question_on_a_file_in_an_unreadable_folder_is_left_to_the_push(
    tmp_path, caplog, monkeypatch
):
    from loader.ingest import readers

    docs = tmp_path / "docs"
    (docs / "locked").mkdir(parents=True)
    (docs / "locked" / "inner.md").write_text("# Inner\n\nText.\n", encoding="utf-8")
    (docs / "open.md").write_text("# Open\n\nText.\n", encoding="utf-8")
    real_children = readers._children

    def children(folder):
        if folder.name == "locked":
            raise PermissionError(13, "Permission denied", str(folder))
        return real_children(folder)

    monkeypatch.setattr(readers, "_children", children)
    questions = tmp_path / "questions.jsonl"
    line = {"id": "inner", "question": "inner?", "source": "locked/inner.md"}
    questions.write_text(json.dumps(line) + "\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="loader.eval.tasks"):
        load_task(questions, docs=docs)
    assert caplog.records == []  # the push names the folder; "no document" would be wrong
