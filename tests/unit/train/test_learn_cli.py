"""`loader learn`'s command line without a cluster: its help, and bad input (a source that is not
there, a judgments file of another format, an option out of range) refused with exit code 2 and
a message naming it, before any cluster is reached."""

from __future__ import annotations

import json

from click.testing import CliRunner

from loader.cli import cli

# Nothing listens there: an input error must be found before the cluster is asked anything.
NOWHERE = ["--url", "http://127.0.0.1:9", "--json"]


def learn(*args: str):
    return CliRunner().invoke(cli, ["learn", *args, *NOWHERE])


def test_help_names_the_sources_the_guard_and_its_exit_code():
    done = CliRunner().invoke(cli, ["learn", "--help"])
    assert done.exit_code == 0
    for words in ("SOURCES", "BEIR", "--implicit-weight", "--max-questions", "exit code is 14"):
        assert words in done.output


def test_a_missing_source_is_named(tmp_path):
    missing = tmp_path / "no-such-beir"
    done = learn(str(missing), "--out", str(tmp_path / "model"))
    assert done.exit_code == 2, done.output
    assert f"source {missing}: there is no such folder or file" in done.stderr


def test_a_judgments_file_of_another_format_is_named(tmp_path):
    srw = tmp_path / "ratings.json"
    srw.write_text(json.dumps({"judgmentRatings": [{"query": "q", "ratings": []}]}), "utf-8")
    done = learn(str(srw), "--out", str(tmp_path / "model"))
    assert done.exit_code == 2, done.output
    assert f"source {srw} is an srw-judgments file" in done.stderr
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"question": "q", "source": "a.md"}\nnot json\n', encoding="utf-8")
    done = learn(str(broken), "--out", str(tmp_path / "model"))
    assert done.exit_code == 2, done.output
    assert f"{broken}: line 2: not valid JSON" in done.stderr


def test_a_beir_folder_without_the_split_is_named(tmp_path):
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text('{"_id": "d1", "text": "t"}\n', encoding="utf-8")
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "q"}\n', encoding="utf-8")
    done = learn(str(folder), "--out", str(tmp_path / "model"))
    assert done.exit_code == 2, done.output
    assert f"source {folder}: " in done.stderr and "train.tsv" in done.stderr


def test_options_out_of_range_are_named(tmp_path):
    source = tmp_path / "q.jsonl"
    source.write_text('{"question": "q", "source": "a.md"}\n', encoding="utf-8")
    out = ["--out", str(tmp_path / "model")]
    assert (
        "--implicit-weight must be between 0 and 1"
        in learn(str(source), *out, "--implicit-weight", "2").stderr
    )
    assert "--folds must be between 2 and 10" in learn(str(source), *out, "--folds", "1").stderr
    assert (
        "--max-questions must be between 10 and 10,000"
        in learn(str(source), *out, "--max-questions", "3").stderr
    )
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine", encoding="utf-8")
    done = learn(str(source), "--out", str(other))
    assert done.exit_code == 2 and "holds something else than a learned reranker" in done.stderr


def test_the_models_folder_is_asked_for_and_the_old_layout_is_not_written_into(tmp_path):
    source = tmp_path / "q.jsonl"
    source.write_text('{"question": "q", "source": "a.md"}\n', encoding="utf-8")
    done = learn(str(source))  # no --out, no learned_reranker setting
    assert done.exit_code == 2 and "give --out, the folder of the learned rerankers" in done.stderr
    old = tmp_path / "old"
    old.mkdir()
    (old / "learned_reranker.txt").write_text("tree\n", encoding="utf-8")
    done = learn(str(source), "--out", str(old))
    assert done.exit_code == 2 and "holds one model itself" in done.stderr
