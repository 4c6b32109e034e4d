"""What `loader learn` takes in (issue #52, item 3), refused before any cluster is asked: a
questions file read once as `judgments import` reads one (regular files of at most 20 MB, each
bad line exit code 2 naming the file and the line), identical questions counted once and the
distinct ones capped, a line of another tenant refused, the test split refused; its help says the
minimum, the guard's next step and the exit codes; a refusal is printed once; progress shows on a
terminal with --json."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from loader.cli import cli
from loader.errors import ConfigError
from loader.train.learn import LearnResult
from loader.train.sources import read_source
from tests.paths import REPO

# Nothing listens there: an input error must be found before the cluster is asked anything.
NOWHERE = ["--url", "http://127.0.0.1:9", "--json"]


def learn(*args: str):
    return CliRunner().invoke(cli, ["learn", *args, *NOWHERE])


def write_lines(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def questions(count: int, **extra: object) -> list[dict]:
    return [{"id": f"q{n}", "question": f"question {n}?", "source": f"d{n}.md", **extra}
            for n in range(count)]  # fmt: skip


def read(path: Path, tenant: str = "acme"):
    return read_source(
        path,
        split="train",
        tenant=tenant,
        index_prefix="eval",
        index_name="docs",
        chunk_strategy="structure",
    )


# --- read once, exit code 2 naming the file and the line -----------------------------------------


def test_a_duplicate_id_for_another_question_names_both_lines(tmp_path):
    lines = questions(3)
    lines[2]["id"] = "q0"
    path = write_lines(tmp_path / "q.jsonl", lines)
    done = learn(str(path), "--out", str(tmp_path / "model"))
    assert done.exit_code == 2, done.output  # was 7: the second reader's InputError
    assert (
        f"questions file {path}: line 3: question id 'q0' is also line 1's, with another "
        "question or other grades" in done.stderr
    )


def test_a_line_without_source_is_exit_code_2_naming_the_line(tmp_path):
    lines = questions(3)
    del lines[1]["source"]
    path = write_lines(tmp_path / "q.jsonl", lines)
    done = learn(str(path), "--out", str(tmp_path / "model"))
    assert done.exit_code == 2, done.output  # was 7
    assert f"questions file {path}: line 2: source must be a non-empty string" in done.stderr


def test_a_carriage_return_inside_a_line_is_no_line_break(tmp_path):
    """JSON whitespace: one reader took it for a line break (exit code 7), the other did not."""
    lines = [json.dumps(line).replace(', "source"', ',\r"source"') for line in questions(12)]
    path = tmp_path / "q.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert [q.id for q in read(path).questions] == [f"q{n}" for n in range(12)]
    path.write_text(lines[0].replace("question 0?", "quest\rion") + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"questions file {path}: line 1: not valid JSON"):
        read(path)


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_fifo_or_a_device_is_refused_as_not_a_regular_file(tmp_path, kind):
    if kind == "fifo":
        path, said = tmp_path / "q.jsonl", "is a named pipe, not a regular file"
        os.mkfifo(path)
    else:
        path, said = Path("/dev/zero"), "is a character device, not a regular file"
    done = learn(str(path), "--out", str(tmp_path / "model"))
    assert done.exit_code == 2, done.output
    assert f"questions file {path} {said}" in done.stderr  # was "no such folder or file"


# --- identical questions are one; the distinct ones are capped -----------------------------------


def test_identical_lines_are_one_question_and_counted(tmp_path):
    lines = questions(4) + questions(2) + [{**questions(1)[0], "id": "again"}]
    lines[1]["implicit"] = True
    lines[5]["implicit"] = False  # q1 again, as a person's grade: outweighs the click's
    source = read(write_lines(tmp_path / "q.jsonl", lines))
    assert [q.id for q in source.questions] == ["q0", "q1", "q2", "q3"]
    assert source.merged == 3 and source.describe()["identical_merged"] == 3
    assert not any(q.implicit for q in source.questions)


def test_many_identical_lines_are_one_question_too_few_to_learn(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text((json.dumps(questions(1)[0]) + "\n") * 50_000, encoding="utf-8")
    done = learn(str(path), "--out", str(tmp_path / "model"))
    assert done.exit_code == 2, done.output
    assert (
        "1 distinct judged questions (49,999 identical lines merged); loader learn needs at "
        "least 10: judge more questions" in done.stderr
    )


def test_more_distinct_questions_than_the_cap_are_refused_naming_it(tmp_path):
    from loader.train.learn import MAX_QUESTIONS

    path = write_lines(tmp_path / "q.jsonl", questions(MAX_QUESTIONS + 1))
    done = learn(str(path), "--out", str(tmp_path / "model"))
    assert done.exit_code == 2, done.output  # was accepted: hours of searching
    assert (
        f"{MAX_QUESTIONS + 1:,} distinct judged questions; loader learn searches at most "
        f"{MAX_QUESTIONS:,}" in done.stderr
    )
    assert f"give --max-questions {MAX_QUESTIONS}" in done.stderr
    done = learn(str(path), "--out", str(tmp_path / "model"), "--max-questions", "10001")
    assert done.exit_code == 2 and "--max-questions must be between 10 and 10,000" in done.stderr


def test_a_source_given_twice_is_refused(tmp_path):
    path = write_lines(tmp_path / "q.jsonl", questions(12))
    done = learn(str(path), str(tmp_path / "." / "q.jsonl"), "--out", str(tmp_path / "model"))
    assert done.exit_code == 2 and f"source {tmp_path / '.' / 'q.jsonl'} is given twice" in (
        done.stderr
    )


# --- the tenant a line names ---------------------------------------------------------------------


def test_a_line_of_another_tenant_is_refused_naming_file_line_and_both(tmp_path):
    lines = questions(12, tenant="acme")
    lines[4]["tenant"] = "globex"
    path = write_lines(tmp_path / "q.jsonl", lines)
    done = learn(str(path), "--out", str(tmp_path / "model"), "--tenant", "acme")
    assert done.exit_code == 2, done.output  # was searched as acme's, silently
    assert (
        f"questions file {path}: line 5: the question is of tenant 'globex' (its line says so), "
        "not of --tenant 'acme'" in done.stderr
    )
    lines[4]["tenant"] = "acme"
    assert len(read(write_lines(path, lines), tenant="acme").questions) == 12
    lines[4]["tenant"] = "bad tenant\n"
    with pytest.raises(ConfigError, match=r"line 5: tenant 'bad tenant\\n'"):
        read(write_lines(path, lines), tenant="acme")


def test_the_tenant_setting_is_the_one_a_line_must_name(tmp_path, monkeypatch):
    """No --tenant: the resolved tenant setting is the one its lines must name."""
    path = write_lines(tmp_path / "q.jsonl", questions(12, tenant="acme"))
    monkeypatch.chdir(tmp_path)
    done = learn(str(path), "--out", str(tmp_path / "model"))
    assert done.exit_code == 2 and "not of --tenant 'default'" in done.stderr
    (tmp_path / "loader.toml").write_text('tenant = "acme"\n', encoding="utf-8")
    done = learn(str(path), "--out", str(tmp_path / "model"))
    assert done.exit_code == 3, done.output  # read, then the cluster that is not there


# --- the test split ------------------------------------------------------------------------------


def test_the_test_split_is_refused_as_fine_tune_refuses_it(tmp_path):
    path = write_lines(tmp_path / "q.jsonl", questions(12))
    done = learn(str(path), "--out", str(tmp_path / "model"), "--split", "test")
    assert done.exit_code == 2, done.output  # was accepted: trained on the claims eval measures
    assert "--split test: learning on the split eval measures" in done.stderr
    done = learn(str(path), "--out", str(tmp_path / "m"), "--split", "dev", "--test-split", "dev")
    assert done.exit_code == 2 and "--split dev: learning on the split eval" in done.stderr


# --- what --help says, and the refusal printed once ----------------------------------------------


def test_help_says_the_minimum_the_guards_next_step_and_every_exit_code():
    done = CliRunner().invoke(cli, ["learn", "--help"])
    assert done.exit_code == 0
    text = " ".join(done.output.split())
    for words in (
        "at least 10 distinct judged questions",
        "at most 10,000",
        "judge more questions",
        "Exit codes: 0 kept; 2 a bad source",
        "3 OpenSearch failed",
        "4 OpenSearch refused",
        "6 the embedding model",
        "14 the guard refused",
    ):
        assert words in text, words  # fmt: skip
    guide = " ".join((REPO / "guide" / "rerank.md").read_text(encoding="utf-8").split())
    for words in (
        "at least 10 distinct",
        "at most 10,000",
        "Judge more questions",
        "exit code 2",
        "exit code 3",
        "exit code 14",
    ):
        assert words in guide, words  # fmt: skip


def _refused(request, settings, *, on_event=None, client=None):
    return LearnResult(False, "held-out nDCG@10 ...: nothing written. Judge more questions", "m")


def test_the_guards_refusal_is_printed_once(tmp_path, monkeypatch):
    import loader.train.learn

    monkeypatch.setattr(loader.train.learn, "learn", _refused)
    path = write_lines(tmp_path / "q.jsonl", questions(12))
    args = ["learn", str(path), "--out", str(tmp_path / "model"), "--url", "http://127.0.0.1:9"]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 14, done.output
    assert done.stderr.count("nothing written") == 1
    assert "nothing written" not in done.stdout  # was printed on stdout and on stderr
    done = CliRunner().invoke(cli, [*args, "--json"])
    assert done.exit_code == 14, done.output
    assert done.stderr.count("nothing written") == 1
    assert json.loads(done.stdout)["adopted"] is False  # the document, as it was


# --- progress ------------------------------------------------------------------------------------


def test_search_progress_says_how_far_every_so_often_and_at_the_end():
    from loader.train.examples import SearchProgress

    now = [0.0]
    lines: list[str] = []
    progress = SearchProgress(400, lines.append, every=20, clock=lambda: now[0])
    for _ in range(399):
        now[0] += 2.0
        progress()
    assert len(lines) == 798 // 20  # one line every 20 s of 798 s
    assert lines[0] == "searched 10 of 400 questions in 20 s; about 13 min left"
    now[0] += 2.0
    progress()
    assert lines[-1] == "searched 400 of 400 questions in 13 min"


_LEARN_ON_A_TERMINAL = """
import sys
from loader.cli import cli
cli(["learn", sys.argv[1], "--out", sys.argv[2], "--json", "--url", "http://127.0.0.1:9"])
"""


def _learn_stderr(tmp_path: Path, source: Path, on_terminal: bool) -> tuple[str, str]:
    """stdout and stderr of `loader learn --json`, its stderr a terminal (a pty) or a pipe."""
    from tests.terminal_run import script_output

    args = [str(source), str(tmp_path / "model")]
    # exit 3: the file is read, then the cluster that is not there
    return script_output(_LEARN_ON_A_TERMINAL, args, tmp_path, on_terminal=on_terminal, exit_code=3)


def test_json_shows_progress_on_a_terminal_and_keeps_stdout_for_the_document(tmp_path):
    source = write_lines(tmp_path / "q.jsonl", questions(12) + questions(2))
    stdout, terminal = _learn_stderr(tmp_path, source, on_terminal=True)
    assert f"read {source}: 12 judged questions (2 identical lines merged)" in terminal
    assert json.loads(stdout)["exit_code"] == 3  # stdout stays one JSON document
    stdout, piped = _learn_stderr(tmp_path, source, on_terminal=False)
    assert "judged questions" not in piped and json.loads(stdout)["exit_code"] == 3
