"""Context recall (the answer's content words found in the top-k chunks), the report column it
gets, and questions files whose heading_path is a list."""

from __future__ import annotations

import json

import pytest

from loader.errors import InputError
from loader.eval.datasets import load_questions
from loader.eval.metrics import content_words, context_recall, mean_context_recall
from loader.eval.report import render_table, table_metrics
from loader.eval.tasks import split_heading_path


def test_content_words_drop_stop_words_and_stem():
    assert content_words("The refunds are PAID within 48 hours.") == {
        "refund",
        "paid",
        "within",
        "48",
        "hour",
    }
    assert content_words("of the and") == set()


def test_context_recall_is_the_share_of_answer_words_in_the_contexts():
    answer = "Within 48 hours of approval"  # within, 48, hour, approv
    assert context_recall(answer, ["UPI refunds arrive within 48 hours."]) == pytest.approx(0.75)
    assert context_recall(answer, ["approved", "within 48 hour"]) == 1.0  # any of the chunks
    assert context_recall(answer, []) == 0.0
    assert context_recall("the of", ["anything"]) is None


def test_mean_context_recall_skips_answers_without_content_words():
    assert mean_context_recall({"a": 1.0, "b": 0.5, "c": None}, 5) == {"context_recall@5": 0.75}
    assert mean_context_recall({"c": None}, 5) == {}


def test_the_report_shows_context_recall_when_measured():
    report = {
        "dataset": "docs",
        "configurations": [
            {
                "name": "structure:bm25",
                "metrics": {"ndcg@10": 0.5, "context_recall@5": 0.8125},
                "latency_ms": {},
            },
        ],
    }
    assert table_metrics(report)[-1] == "context_recall@5"
    assert "0.8125" in render_table(report)
    assert "context_recall" not in " ".join(table_metrics({"configurations": []}))


def test_heading_path_may_be_a_list(tmp_path):
    path = tmp_path / "questions.jsonl"
    lines = [
        {"question": "q", "source": "a.md", "heading_path": ["Refunds", " UPI "], "answer": "x"},
        {"question": "q", "source": "a.md", "heading_path": "Refunds > UPI"},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines), encoding="utf-8")
    first, second = load_questions(path)
    assert split_heading_path(first.heading_path) == split_heading_path(second.heading_path)
    assert split_heading_path(first.heading_path) == ("Refunds", "UPI")
    assert first.answer == "x"
    path.write_text(json.dumps({"question": "q", "source": "a", "heading_path": [1]}), "utf-8")
    with pytest.raises(InputError, match=r"questions.jsonl:1: heading_path must be a string"):
        load_questions(path)
