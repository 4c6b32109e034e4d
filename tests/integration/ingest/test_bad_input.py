"""`loader push` on a folder of bad input: every good file is indexed, every bad one is reported
on one line naming the file and the reason, the exit code is 8 (PartialFailure), and nothing
already indexed is lost when a file turns bad. Files of a type no reader handles (logo.png, a
forged .exe) are no failure: they are ignored, counted in one line.

The committed corpus is tests/fixtures/bad_input/. What cannot be committed is made in tmp_path
at test time: a file over max_file_bytes (sparse, so it costs no disk), a symlink to itself, a
symlink folder loop, a FIFO, a dangling symlink, a symlink to a file outside the folder (skipped:
follow_symlinks is off) and a 2 MB line without spaces (indexed, cut at chunk_max_chars). The
tests run as root, for whom chmod 000 does not stop reads, so "unreadable" is played by the FIFO
(not a regular file: reading it would block forever) and the dangling symlink (the target cannot
be opened) — both deterministic.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from opensearchpy import helpers

from loader.cli import cli
from loader.errors import PartialFailure
from loader.index.apply import apply_config
from loader.ingest.readers import OUTSIDE_REASON
from tests.paths import FIXTURES

FIXTURES = FIXTURES / "bad_input"

# The grid table of broken-table.rst is on lines 6 to 10 and its row on line 9 has no right
# border. docutils 0.19 names line 6 ("Malformed table."), 0.23 line 9 and why; the contract is
# the file refused, a line of the table named, the table called malformed.
TABLE_REFUSAL = re.compile(r"reStructuredText error on line (?:[6-9]|10): (?i:malformed table)\b.*")
# source -> the reason push reports (a pattern where a dependency words it); None: hostile but
# readable, so it is indexed.
EXPECTED: dict[str, str | re.Pattern[str] | None] = {
    "binary.txt": "binary file",
    "blank.txt": "empty file",
    "broken-table.rst": TABLE_REFUSAL,
    "broken.pdf": "unreadable PDF: Stream has ended unexpectedly",
    # A name in Latin-1 bytes (an old archive unpacked): reported with the byte escaped.
    "caf\\xe9.md": "file name is not valid UTF-8; rename the file",
    "dangling.md": "broken symlink",
    "deeply-nested.html": None,
    "empty.md": "empty file",
    "encrypted.pdf": "encrypted PDF (needs a password)",
    "good/guide.md": None,
    "good/notes.txt": None,
    "good/page.html": None,
    "huge-line.md": None,
    "invalid-utf8.md": "not valid UTF-8 (byte 0xe9 at offset 17)",
    "loop.md": "symlink loop",
    "loops/back": "symlink loop",
    "malformed.md": None,
    "not-json.ipynb": "not a Jupyter notebook: invalid JSON on line 1 column 69: Expecting ',' "
    "delimiter",
    "only-markup.html": "no text found",
    "outside.md": OUTSIDE_REASON,
    "oversized.txt": "larger than max_file_bytes (12 MB > 10 MB)",
    "pipe.md": "not a regular file (a FIFO)",
    "renamed-text.docx": "not a Word .docx file (not a ZIP package)",
    "scanned.pdf": "no text layer, OCR not available",
    # Half a UTF-16 pair, escaped in JSON or substituted in reST: no UTF-8 can carry it.
    "surrogate-escape.ipynb": "not valid Unicode: the text holds the lone surrogate U+DC9F (half "
    "of a UTF-16 pair, written as an escape like \\udc9f); remove it",
    "surrogate-substitution.rst": "not valid Unicode: the text holds the lone surrogate U+D800 "
    "(half of a UTF-16 pair, written as an escape like \\ud800); remove it",
    # A Python file this Python cannot parse (half edited, or Python 2) is still text worth
    # finding: it is indexed as plain code, without sections, and a warning says so.
    "syntax-error.py": None,
    "truncated.docx": "unreadable Word file: truncated or damaged ZIP package (File is not a "
    "zip file)",
    "truncated.pdf": "unreadable PDF: Stream has ended unexpectedly",
    "unclosed-front-matter.md": "front matter opened on line 1 is never closed with '---'",
}
# Files of a type no reader handles: ignored, not failed, and counted in one line.
IGNORED = {"logo.png": "unsupported file type .png"}
IGNORED_LINE = "ignored 1 file of an unsupported type: .png 1"
# Files read with a loss, and the warning push prints for each.
WARNINGS = [
    "WARNING loader.ingest.readers.code: syntax-error.py: Python syntax error on line 5: '(' was "
    "never closed; indexed as plain code, without sections",
]
GOOD = sorted(source for source, reason in EXPECTED.items() if reason is None)
BAD = {source: reason for source, reason in EXPECTED.items() if reason is not None}
UNCOMMITTABLE = {"oversized.txt", "loop.md", "loops/back", "pipe.md", "dangling.md"}
UNCOMMITTABLE |= {"outside.md", "huge-line.md", "caf\\xe9.md"}
HUGE_LINE = "".join(f"w{number:07d}" for number in range(2 * 1024 * 1024 // 8))
FORGED = "forged\nfailed ok.md: everything lost.exe"


def add_uncommittable_files(root: Path) -> None:
    """The bad files git cannot hold: oversized, symlink loops, a FIFO, a dangling symlink, a
    symlink out of the folder, a 2 MB line, a name that is not UTF-8."""
    with (root / "oversized.txt").open("wb") as handle:
        handle.truncate(12_000_000)  # over the default max_file_bytes (10 MB)
    (root / "loop.md").symlink_to("loop.md")
    (root / "loops").mkdir()
    (root / "loops" / "back").symlink_to("..")
    os.mkfifo(root / "pipe.md")
    (root / "dangling.md").symlink_to("gone.md")
    secret = root.parent / "secret.md"
    secret.write_text("# Secret\n\nThe vault code is 7731.\n", encoding="utf-8")
    (root / "outside.md").symlink_to(secret)
    (root / "huge-line.md").write_text(f"# Huge line\n\n{HUGE_LINE}\n", encoding="utf-8")
    with open(os.path.join(os.fsencode(root), b"caf\xe9.md"), "w", encoding="utf-8") as handle:
        handle.write("# Caf\u00e9\n\nOpen at eight.\n")


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "inbox"
    shutil.copytree(FIXTURES, root)
    add_uncommittable_files(root)
    return root


@pytest.fixture
def settings(base_settings, unique_name, embedder):
    settings = base_settings.replace(index_name=unique_name)
    apply_config(settings, dimension=embedder.dimension)
    return settings


def indexed(client, alias: str) -> dict[str, dict]:
    """chunk id -> source fields, straight from the index."""
    client.indices.refresh(index=alias)
    hits = helpers.scan(client, index=alias, query={"query": {"match_all": {}}})
    return {hit["_id"]: hit["_source"] for hit in hits}


def test_the_committed_corpus_is_as_described():
    committed = {
        path.relative_to(FIXTURES).as_posix() for path in FIXTURES.rglob("*") if path.is_file()
    }
    assert committed == (set(EXPECTED) | set(IGNORED)) - UNCOMMITTABLE


def test_push_indexes_the_good_files_and_reports_each_bad_one(settings, client, corpus, tmp_path):
    """The real entry point in a child process: its stderr is exactly one line per bad file,
    and one for the ignored ones."""
    env = {**os.environ, "OPENSEARCH_URL": settings.opensearch_url}
    process = subprocess.run(
        [sys.executable, "-c", "from loader.cli import cli; cli()", "push", str(corpus),
         "--index", settings.index_name, "--tenant", "T"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert process.returncode == PartialFailure.exit_code == 8, process.stderr
    lines = process.stderr.splitlines()
    reported = [line for line in lines if not line.startswith("WARNING ")]
    assert len(reported) == len(BAD) + 1 and reported[-1] == IGNORED_LINE, process.stderr
    for line, (source, reason) in zip(reported[:-1], sorted(BAD.items()), strict=True):
        if isinstance(reason, re.Pattern):
            assert line.startswith(f"skipped {source}: "), line
            assert reason.fullmatch(line.removeprefix(f"skipped {source}: ")), line
        else:
            assert line == f"skipped {source}: {reason}"
    assert [line for line in lines if line.startswith("WARNING ")] == WARNINGS
    assert process.stdout.startswith(
        f"inbox: {len(GOOD)} added, 0 updated, 0 unchanged, 0 deleted, {len(BAD)} failed, "
        f"{len(IGNORED)} ignored; "
    )
    chunks = indexed(client, settings.index_name).values()
    assert sorted({chunk["source"] for chunk in chunks}) == GOOD
    texts = " ".join(chunk["content"] for chunk in chunks)
    for words in (
        "warehouse closes at six",  # inside 3000 nested divs
        "gift card balance never expires",  # after a code fence that is never closed
        "Returns are accepted within 30 days",
        "three to five working days",
        "help desk answers",
        "def round_tip(amount):",  # the Python file with a syntax error, as plain code
    ):
        assert words in texts
    assert "vault code" not in texts  # the symlink's target outside the folder
    huge = [chunk for chunk in chunks if chunk["source"] == "huge-line.md"]
    assert max(len(chunk["body"]) for chunk in huge) <= settings.chunk_max_chars
    assert sum(len(chunk["body"]) for chunk in huge) == len(HUGE_LINE)
    assert max(len(chunk["content"]) for chunk in huge) < settings.chunk_max_chars + 100


def test_a_file_that_turns_bad_keeps_its_indexed_chunks(settings, client, corpus, tmp_path):
    """Each way of turning bad, applied to a file that was indexed: its chunks stay."""
    folder = tmp_path / "kb"
    folder.mkdir()
    turns_bad = ["binary.md", "latin1.md", "emptied.md", "fifo.md", "dangling.md", "huge.txt"]
    for number, name in enumerate(turns_bad):
        (folder / name).write_text(f"# Article {number}\n\nFact number {number} is kept.\n")
    (folder / "stays.md").write_text("# Stays\n\nThis file never changes.\n")

    def push() -> tuple[int, str, str]:
        with contextlib.chdir(tmp_path):
            result = CliRunner().invoke(
                cli,
                ["push", str(folder), "--index", settings.index_name, "--tenant", "T"],
                env={"OPENSEARCH_URL": settings.opensearch_url},
            )
        return result.exit_code, result.stdout, result.stderr

    code, out, err = push()
    assert (code, err) == (0, "") and out.startswith("kb: 7 added, 0 updated"), (out, err)
    before = indexed(client, settings.index_name)

    (folder / "binary.md").write_bytes(b"# Article 0\n\n\x00\x01\x02")
    (folder / "latin1.md").write_bytes(b"# Article 1\n\nCaf\xe9\n")
    (folder / "emptied.md").write_bytes(b"")
    (folder / "fifo.md").unlink()
    os.mkfifo(folder / "fifo.md")
    (folder / "dangling.md").unlink()
    (folder / "dangling.md").symlink_to("nowhere.md")
    with (folder / "huge.txt").open("r+b") as handle:
        handle.truncate(12_000_000)

    code, out, err = push()
    assert code == PartialFailure.exit_code
    assert err.splitlines() == [
        "skipped binary.md: binary file",
        "skipped dangling.md: broken symlink",
        "skipped emptied.md: empty file",
        "skipped fifo.md: not a regular file (a FIFO)",
        "skipped huge.txt: larger than max_file_bytes (12 MB > 10 MB)",
        "skipped latin1.md: not valid UTF-8 (byte 0xe9 at offset 16)",
    ]
    assert out.startswith("kb: 0 added, 0 updated, 1 unchanged, 0 deleted, 6 failed; "), out
    assert indexed(client, settings.index_name) == before  # not one chunk lost or changed


# Root reads through chmod 000; without these two capabilities it cannot, as any other user.
WITHOUT_DAC = ["--bounding-set", "-dac_override,-dac_read_search"]
WITHOUT_DAC += ["--inh-caps", "-dac_override,-dac_read_search", "--"]


def can_drop_dac() -> bool:
    """Whether this process may run a child without DAC override (setpriv, CAP_SETPCAP)."""
    if not shutil.which("setpriv"):
        return False
    return subprocess.run(["setpriv", *WITHOUT_DAC, "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(not can_drop_dac(), reason="needs setpriv and CAP_SETPCAP")
def test_a_folder_that_cannot_be_entered_keeps_its_files_chunks(settings, client, tmp_path):
    """A real chmod 000 on a folder, the push run as a process without root's DAC override:
    the folder is reported, and the chunks of the files in it stay (a push used to delete them)."""
    folder = tmp_path / "kb"
    (folder / "locked" / "deep").mkdir(parents=True)
    (folder / "locked" / "inner.md").write_text("# Inner\n\nKept while locked.\n")
    (folder / "locked" / "deep" / "deeper.md").write_text("# Deeper\n\nKept too.\n")
    (folder / "lockedness.md").write_text("# Sibling\n\nA name that starts alike.\n")
    command = ["setpriv", *WITHOUT_DAC, sys.executable, "-m", "loader", "push", str(folder)]
    command += ["--index", settings.index_name, "--tenant", "T"]
    env = {**os.environ, "OPENSEARCH_URL": settings.opensearch_url, "HF_HUB_OFFLINE": "1"}

    def push() -> subprocess.CompletedProcess:
        return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)

    first = push()
    assert first.returncode == 0, first.stderr
    before = indexed(client, settings.index_name)
    assert {c["source"] for c in before.values()} == {
        "locked/inner.md", "locked/deep/deeper.md", "lockedness.md"
    }  # fmt: skip
    (folder / "lockedness.md").unlink()
    (folder / "locked").chmod(0)
    try:
        second = push()
    finally:
        (folder / "locked").chmod(0o755)
    assert second.returncode == PartialFailure.exit_code, second.stderr
    assert second.stderr.splitlines() == ["skipped locked: permission denied"]
    assert second.stdout.startswith("kb: 0 added, 0 updated, 0 unchanged, 1 deleted, 1 failed")
    after = indexed(client, settings.index_name)
    assert {cid: c for cid, c in before.items() if c["source"] != "lockedness.md"} == after


def test_a_file_name_cannot_forge_report_lines(settings, client, tmp_path):
    """A newline in a file name is printed escaped: every line is one the push meant; so is one
    in the suffix of an ignored file, counted in the ignored line."""
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / FORGED).write_text("not a document")
    (folder / "notes.txt\nfailed").write_text("not read: its suffix is '.txt\\nfailed'")
    (folder / "bad\x1b[2K.md").write_bytes(b"\x00\x01binary")
    (folder / "fine.md").write_text("# Fine\n\nThis one is indexed.\n")
    with contextlib.chdir(tmp_path):
        result = CliRunner().invoke(
            cli,
            ["push", str(folder), "--index", settings.index_name, "--tenant", "T"],
            env={"OPENSEARCH_URL": settings.opensearch_url},
        )
    assert result.exit_code == PartialFailure.exit_code, result.output
    assert result.stderr.splitlines() == [
        "skipped bad\\x1b[2K.md: binary file",
        "ignored 2 files of unsupported types: .exe 1, .txt\\nfailed 1",
    ]
    lines = result.stdout.splitlines()
    assert lines == [lines[0]] and lines[0].startswith(
        "kb: 1 added, 0 updated, 0 unchanged, 0 deleted, 1 failed, 2 ignored; "
    ), result.stdout
    assert all(
        line.startswith(("skipped ", "ignored ", "kb: ")) for line in result.output.splitlines()
    )


def test_a_folder_or_tenant_that_is_not_utf8_is_refused_before_any_write(
    settings, client, tmp_path
):
    """What the operating system hands over undecoded (a Latin-1 folder name, an argument in
    another encoding) cannot name a collection or a tenant: exit 2 naming it, nothing written."""
    folder = Path(os.fsdecode(os.path.join(os.fsencode(tmp_path), b"caf\xe9")))
    folder.mkdir()
    (folder / "menu.md").write_text("# Menu\n\nSoup of the day.\n")
    runs = {
        "collection 'caf\\udce9'": ["push", str(folder)],
        "tenant 't\\udce9'": ["push", str(folder), "--collection", "menu", "--tenant", "t\udce9"],
    }
    for named, arguments in runs.items():
        with contextlib.chdir(tmp_path):
            result = CliRunner().invoke(
                cli,
                [*arguments, "--index", settings.index_name],
                env={"OPENSEARCH_URL": settings.opensearch_url},
            )
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith(f"Error: {named} is not valid UTF-8 text"), result.stderr
    assert indexed(client, settings.index_name) == {}
