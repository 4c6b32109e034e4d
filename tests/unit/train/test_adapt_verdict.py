"""What `loader adapt`'s guard refuses (issue #44): a model that gains on one easy kind of pair
and loses on another, and what it can be told to judge on instead of pairs: the tenant's judged
questions. The pure parts: the per-kind verdict, the mined pairs' balance and warning, the
judged questions' ranking and the file they come from."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from loader.cli import cli
from loader.errors import InputError
from loader.train.adapt import AdaptRequest, mine
from loader.train.guard import JudgedQuestions, judge, read_judged
from loader.train.pairs import Chunk
from loader.train.trainer import FineTuneOptions


def test_a_model_worse_on_one_kind_is_refused_whatever_the_others_gained():
    """400 title queries move from rank 2 to rank 1 and 40 cloze queries fall from rank 1 to
    rank 2: the MRR rises surely (+0.41 · 400/440), and yet the model is refused, naming cloze."""
    kinds = ["title"] * 400 + ["cloze"] * 40
    stock = np.array([0.5] * 400 + [1.0] * 40)
    adapted = np.array([1.0] * 400 + [0.5] * 40)
    verdict = judge(stock, adapted, kinds, min_gain=0.0, seed=0)
    assert verdict.lower_bound > 0.1 and verdict.adapted_mrr > verdict.stock_mrr
    assert verdict.adopted is False
    assert "worse on cloze (1.0000 -> 0.5000)" in verdict.reason
    assert verdict.kinds["cloze"] == {"queries": 40, "stock_mrr": 1.0, "adapted_mrr": 0.5}
    # Told that losses are allowed (--min-gain -1), it keeps the model.
    assert judge(stock, adapted, kinds, min_gain=-1.0, seed=0).adopted is True
    # No kind worse: kept, as before.
    better = np.where(np.array(kinds) == "cloze", 1.0, adapted)
    assert judge(stock, better, kinds, min_gain=0.0, seed=0).adopted is True


def test_a_kind_too_small_to_judge_alone_does_not_refuse():
    kinds = ["title"] * 400 + ["heading"] * 5
    stock = np.array([0.5] * 400 + [1.0] * 5)
    adapted = np.array([1.0] * 400 + [0.5] * 5)
    assert judge(stock, adapted, kinds, min_gain=0.0, seed=0).adopted is True


def _document(number: int, cloze: bool) -> Chunk:
    body = f"Item {number} ships from the northern warehouse to every customer within three days"
    if cloze:
        body += ". Returns of it are accepted for thirty days after the parcel arrives at home"
    return Chunk(
        "acme", f"d{number}", f"d{number}-0", f"Item {number} notes", f"Item {number} notes",
        f"s{number}", 0, body, f"Item {number} notes\n\n{body}",
    )  # fmt: skip


def test_a_dominant_kind_is_warned_about_and_cut_for_training():
    """56 documents give a title pair each and 6 a cloze pair too: title pairs are 90 % of the
    pairs, a warning says so, and training sees no more titles than other pairs."""
    chunks = [_document(i, cloze=i < 6) for i in range(56)]
    request = AdaptRequest(out=Path("x"), tenant="acme", options=FineTuneOptions(batch_size=2))
    mined = mine(request, chunks, "kb")
    assert mined.by_kind == {"heading": 0, "title": 56, "cloze": 6}
    (warning,) = mined.warnings
    assert warning.startswith("title pairs are 90% of the 62 mined") and "--judged" in warning
    assert 0 < mined.trained_kinds["title"] <= mined.trained_kinds["cloze"]
    assert len(mined.train) == sum(mined.trained_kinds.values())
    judged = AdaptRequest(out=Path("x"), tenant="acme", judged=Path("q.jsonl"),
                          options=FineTuneOptions(batch_size=2))  # fmt: skip
    assert "--judged" not in mine(judged, chunks, "kb").warnings[0]


class WordCounts:
    """A real if small embedder: a text's vector counts the words of a fixed vocabulary."""

    VOCABULARY = ["refund", "card", "days", "printer", "paper", "tray", "invoice", "month"]

    def _embed(self, texts: list[str]) -> np.ndarray:
        return np.array(
            [
                [text.lower().split().count(word) + 0.01 for word in self.VOCABULARY]
                for text in texts
            ]
        )

    embed_queries = embed_passages = _embed


def _chunk(source: str, number: int, body: str) -> Chunk:
    return Chunk("acme", source, f"{source}-{number}", "", "", "", number, body, body, source)


def test_judged_questions_rank_documents_by_their_best_chunk():
    chunks = [
        _chunk("refunds.md", 0, "refund card refund days"),
        _chunk("refunds.md", 1, "invoice month"),
        _chunk("printer.md", 0, "printer paper tray"),
        _chunk("invoices.md", 0, "invoice month invoice card"),
    ]
    questions = [
        ("refund card", {"refunds.md"}),  # its best chunk ranks refunds.md first
        ("invoice card", {"refunds.md"}),  # invoices.md's chunk is nearer than refunds.md's
        ("paper tray", {"printer.md", "gone.md"}),
        ("anything", {"gone.md"}),  # names no document of the tenant: left out
    ]
    guard = JudgedQuestions(questions, chunks, seed=0)
    assert guard.skipped == 1 and guard.kinds == ["judged"] * 3
    ranks = guard.reciprocal_ranks(WordCounts())
    assert ranks.tolist() == [1.0, 0.5, 1.0]
    assert guard.measured_on == "3 judged questions"


def test_the_judged_file_gives_each_question_its_relevant_sources(tmp_path):
    lines = [
        {"question": "how long do refunds take", "source": "./refunds.md"},
        {"question": "printer error", "source": "printer.md", "judgments": [
            {"chunk_id": "a", "source": "printer.md", "grade": 2},
            {"chunk_id": "b", "source": "faq.md", "grade": 0},
        ]},
    ]  # fmt: skip
    path = tmp_path / "week-49.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    assert read_judged(path) == [
        ("how long do refunds take", {"refunds.md"}),
        ("printer error", {"printer.md"}),
    ]
    path.write_text('{"question": "no source"}\n', encoding="utf-8")
    with pytest.raises(InputError, match="week-49.jsonl:1"):
        read_judged(path)


def test_a_bad_judged_file_is_refused_before_any_work(tmp_path):
    bad = tmp_path / "judged.jsonl"
    bad.write_text("not json\n", encoding="utf-8")
    args = ["adapt", "--out", str(tmp_path / "out"), "--judged", str(bad)]
    result = CliRunner().invoke(cli, [*args, "--url", "http://127.0.0.1:9"])
    # InputError's code, as `loader eval` gives for the same file
    assert result.exit_code == InputError.exit_code, result.output
    assert f"{bad}:1" in result.stderr
    assert not (tmp_path / "out").exists()
