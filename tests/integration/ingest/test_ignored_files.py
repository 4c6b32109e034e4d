"""`loader push` on a real team's docs folder: images, diagrams, data files and a Makefile beside
the documents. Files of a type no reader handles are ignored, counted in one line on stderr and
listed in the JSON report; they are no failure, so the push exits 0 — and a truly broken file
beside them still fails it (exit code 8), alone.
"""

from __future__ import annotations

import contextlib
import json
import struct
import zlib
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from opensearchpy import helpers

import loader.ingest.readers as readers
from loader.cli import cli
from loader.errors import PartialFailure
from loader.index.apply import apply_config

GUIDE = """# Deployment guide

## Rolling back

Run `make rollback` to return to the previous release; the database is never rolled back.
"""
SVG = """<svg xmlns="http://www.w3.org/2000/svg" width="120" height="40">
  <rect x="1" y="1" width="50" height="30" fill="none" stroke="black"/>
  <text x="8" y="20">api</text>
</svg>
"""
CSV = "service,owner,on_call\napi,payments,alice\nworker,platform,bob\n"
MAKEFILE = "rollback:\n\t./scripts/deploy.sh --previous\n"
IGNORED_LINE = "ignored 4 files of unsupported types: .csv 1, .png 1, .svg 1, no suffix 1"
IGNORED = [
    {"source": "Makefile", "reason": "unsupported file type (no suffix)"},
    {"source": "data.csv", "reason": "unsupported file type .csv"},
    {"source": "img/arch.svg", "reason": "unsupported file type .svg"},
    {"source": "img/logo.png", "reason": "unsupported file type .png"},
]
BROKEN_PDF = "unreadable PDF: Stream has ended unexpectedly"


def png(width: int = 4, height: int = 2) -> bytes:
    """A real PNG image (8-bit greyscale, a gradient)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    rows = b"".join(b"\x00" + bytes(range(0, 256, 256 // width))[:width] for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


@pytest.fixture
def settings(base_settings, unique_name, embedder):
    settings = base_settings.replace(index_name=unique_name)
    apply_config(settings, dimension=embedder.dimension)
    return settings


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    (root / "img").mkdir(parents=True)
    (root / "guide.md").write_text(GUIDE, encoding="utf-8")
    (root / "img" / "logo.png").write_bytes(png())
    (root / "img" / "arch.svg").write_text(SVG, encoding="utf-8")
    (root / "data.csv").write_text(CSV, encoding="utf-8")
    (root / "Makefile").write_text(MAKEFILE, encoding="utf-8")
    (root / ".git").mkdir()  # hidden, as ever: not even counted
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
    return root


def push(settings, folder: Path, *options: str) -> Result:
    with contextlib.chdir(folder.parent):
        return CliRunner().invoke(
            cli,
            ["push", str(folder), "--index", settings.index_name, "--tenant", "T", *options],
            env={"OPENSEARCH_URL": settings.opensearch_url},
        )


def indexed_sources(client, alias: str) -> dict[str, int]:
    client.indices.refresh(index=alias)
    counts: dict[str, int] = {}
    for hit in helpers.scan(client, index=alias, query={"_source": ["source"]}):
        counts[hit["_source"]["source"]] = counts.get(hit["_source"]["source"], 0) + 1
    return counts


def test_images_data_and_build_files_are_ignored_and_the_push_succeeds(settings, client, docs):
    dry = push(settings, docs, "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert dry.stderr == f"{IGNORED_LINE}\n"
    *plan, summary = dry.stdout.splitlines()
    assert len(plan) == 1 and plan[0].startswith("+ add guide.md ("), plan  # no line per image
    assert summary == (
        "docs: 1 to add, 0 to update, 0 unchanged, 0 to delete, 0 failed, 4 ignored; tenant T "
        "(dry run: nothing changed)"
    )

    first = push(settings, docs)
    assert first.exit_code == 0, first.output
    assert first.stderr == f"{IGNORED_LINE}\n"
    assert first.stdout.startswith(
        "docs: 1 added, 0 updated, 0 unchanged, 0 deleted, 0 failed, 4 ignored; "
    ), first.stdout
    assert set(indexed_sources(client, settings.index_name)) == {"guide.md"}

    # --json: stdout is the report, listing each ignored file; nothing on stderr, as for skips.
    again = push(settings, docs, "--json")
    assert (again.exit_code, again.stderr) == (0, ""), again.output
    report = json.loads(again.stdout)
    assert report["ignored"] == IGNORED
    assert (report["unchanged"], report["failed"], report["skipped"]) == (1, 0, [])

    # --quiet prints nothing but what a push reports on stderr (skipped files, this line).
    quiet = push(settings, docs, "--quiet")
    assert (quiet.exit_code, quiet.stdout, quiet.stderr) == (0, "", f"{IGNORED_LINE}\n")


def test_a_broken_file_among_ignored_ones_still_fails_the_push_alone(settings, client, docs):
    assert push(settings, docs).exit_code == 0
    before = indexed_sources(client, settings.index_name)
    # A PDF cut off mid-stream: a document that cannot be read, not a type that is not read.
    (docs / "runbook.pdf").write_bytes(b"%PDF-1.7\n" + bytes(range(256)) * 4)

    result = push(settings, docs)
    assert result.exit_code == PartialFailure.exit_code == 8, result.output
    assert result.stderr.splitlines() == [f"skipped runbook.pdf: {BROKEN_PDF}", IGNORED_LINE]
    assert result.stdout.startswith(
        "docs: 0 added, 0 updated, 1 unchanged, 0 deleted, 1 failed, 4 ignored; "
    ), result.stdout

    as_json = push(settings, docs, "--json")
    assert as_json.exit_code == 8, as_json.output
    report = json.loads(as_json.stdout)
    assert report["failed"] == 1
    assert report["skipped"] == [{"source": "runbook.pdf", "reason": BROKEN_PDF}]
    assert report["ignored"] == IGNORED
    assert indexed_sources(client, settings.index_name) == before


def test_an_ignored_file_keeps_the_chunks_it_once_had(settings, client, docs, monkeypatch):
    """As for a skipped file, nothing already indexed is lost: data.csv, indexed while a reader
    handled .csv (here: the text reader), keeps its chunks once no reader does."""
    with monkeypatch.context() as patched:
        patched.setattr(readers, "SUPPORTED_SUFFIXES", (*readers.SUPPORTED_SUFFIXES, ".csv"))
        first = push(settings, docs)
    assert first.exit_code == 0, first.output
    before = indexed_sources(client, settings.index_name)
    assert set(before) == {"data.csv", "guide.md"}

    result = push(settings, docs)
    assert result.exit_code == 0, result.output
    assert result.stderr == f"{IGNORED_LINE}\n"
    assert result.stdout.startswith(
        "docs: 0 added, 0 updated, 1 unchanged, 0 deleted, 0 failed, 4 ignored; "
    ), result.stdout
    assert indexed_sources(client, settings.index_name) == before


def test_a_folder_without_documents_is_a_warning_naming_it_and_what_push_reads(settings, tmp_path):
    """The wrong folder, or one of images only: the push succeeds (nothing failed) but says
    that it found no document, naming the folder and the suffixes it reads."""
    images = tmp_path / "images"
    (images / "img").mkdir(parents=True)
    (images / "img" / "logo.png").write_bytes(png())
    empty = tmp_path / "empty"
    empty.mkdir()
    reads = ", ".join(readers.SUPPORTED_SUFFIXES)
    for folder, found in ((images, "; the 1 it found are of other types"), (empty, "")):
        warning = f"no documents in {folder}: push reads files ending in {reads}{found}"
        result = push(settings, folder)
        assert result.exit_code == 0, result.output
        assert result.stderr.splitlines()[-1] == warning
        assert reads.startswith(".md, .markdown, .html, .htm, .txt, .pdf, .docx, .rst")
        report = json.loads(push(settings, folder, "--json").stdout)
        assert report["warnings"] == [warning]
