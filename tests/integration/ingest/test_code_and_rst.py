"""reStructuredText made by pandoc from the sample docs, and source code, end to end.

The .rst files are built at test time (``pandoc -t rst``, installed by scripts/setup.sh) from
docs/*.md: their heading paths and table headers must match what the Markdown reader finds, and
the seed question must find ``Refund policy > Late deliveries`` in the .rst file. The code is
tests/fixtures/eval/code/ (a Python module, a TypeScript file with nested classes): every
function and method is whole in exactly one chunk headed ``file > Class > method``, and
``loader eval`` over it reports section metrics.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from loader.cli import cli
from loader.index.apply import apply_config
from loader.ingest.chunking import chunk_document, chunking_config
from loader.ingest.readers import read_document
from loader.ingest.readers.markdown import read_markdown
from loader.ingest.sync import push
from loader.query.request import SearchRequest
from loader.query.search import search
from tests.paths import FIXTURES, SAMPLE_DOCS

SEED_QUESTION = "Do I get a refund if my order is more than 45 minutes late, and how is it paid?"
CODE = FIXTURES / "eval" / "code"


@pytest.fixture(scope="module")
def rst_docs(tmp_path_factory) -> Path:
    """docs/*.md converted by pandoc into a folder of .rst files."""
    pandoc = shutil.which("pandoc")
    assert pandoc, "pandoc is missing: scripts/setup.sh installs it"
    folder = tmp_path_factory.mktemp("rst") / "docs"
    folder.mkdir()
    for markdown in sorted(SAMPLE_DOCS.glob("*.md")):
        rst = subprocess.run(
            [pandoc, "-f", "markdown", "-t", "rst", str(markdown)],
            check=True, capture_output=True, text=True, timeout=60,
        ).stdout  # fmt: skip
        (folder / f"{markdown.stem}.rst").write_text(rst, encoding="utf-8")
    return folder


@pytest.fixture
def settings(base_settings, unique_name, embedder):
    settings = base_settings.replace(index_name=unique_name)
    apply_config(settings, dimension=embedder.dimension)
    return settings


def _table_headers(document) -> list[str]:
    return [
        block.text.split("\n")[0]
        for section in document.sections
        for block in section.blocks
        if block.kind == "table"
    ]


def test_rst_keeps_the_markdown_heading_paths_and_table_headers(rst_docs):
    expected = found = 0
    for markdown in sorted(SAMPLE_DOCS.glob("*.md")):
        original = read_markdown(markdown.read_text(encoding="utf-8"), markdown.name, markdown.stem)
        converted = read_document(rst_docs / f"{markdown.stem}.rst", rst_docs, 10_000_000)
        assert converted.title == original.title
        paths = {section.heading_path for section in converted.sections}
        expected += len(original.sections)
        found += sum(section.heading_path in paths for section in original.sections)
        assert _table_headers(converted) == _table_headers(original), markdown.name
    assert found / expected >= 0.9, f"{found} of {expected} heading paths recovered"
    assert any(_table_headers(read_markdown(p.read_text(), p.name, p.stem))
               for p in SAMPLE_DOCS.glob("*.md"))  # fmt: skip


def test_the_seed_question_finds_late_deliveries_in_the_rst_file(
    client, settings, embedder, rst_docs
):
    report = push(rst_docs, settings, client=client, embedder=embedder)
    assert report.failed == 0 and report.chunks > 0
    request = SearchRequest.from_settings(
        settings, SEED_QUESTION, tenant="default", mode="hybrid-rrf", rerank=False, k=1
    )
    top = search(request, settings, client=client, embedder=embedder).hits[0]
    assert (top.source, top.title, top.heading_path) == (
        "refund-policy.rst",
        "Refund policy",
        ("Late deliveries",),
    )
    assert "delayed by more than 45 minutes past the promised time" in top.text


def _python_functions(text: str) -> dict[tuple[str, ...], str]:
    """heading path -> source of every function and method of a module (from ``ast``)."""
    lines = text.split("\n")
    found: dict[tuple[str, ...], str] = {}

    def visit(nodes, path):
        for node in nodes:
            if isinstance(node, ast.ClassDef):
                visit(node.body, (*path, node.name))
            elif isinstance(node, ast.FunctionDef):
                body = "\n".join(lines[node.lineno - 1 : node.end_lineno])
                found[(*path, node.name)] = body

    visit(ast.parse(text).body, ())
    return found


# The TypeScript file's functions and methods, by the line that opens each (its body ends at
# the next line indented as that one and starting with "}").
TS_FUNCTIONS = {
    ("Orders", "Delivery", "minutesLate"): "minutesLate(): number {",
    ("Orders", "Delivery", "Assignment", "nearestCourier"): "nearestCourier(",
    ("Orders", "Cancellation", "fee"): "fee(orderValue",
    ("formatRupees",): "export function formatRupees(",
}


def _ts_functions(text: str) -> dict[tuple[str, ...], str]:
    lines = text.split("\n")
    found = {}
    for path, opening in TS_FUNCTIONS.items():
        start = next(i for i, line in enumerate(lines) if line.strip().startswith(opening))
        indent = re.match(r"\s*", lines[start]).group()
        end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(indent + "}"))
        found[path] = "\n".join(lines[start : end + 1])
    return found


def _dedented_lines(code: str) -> list[str]:
    return [line.strip() for line in code.split("\n") if line.strip()]


@pytest.mark.parametrize(
    ("name", "functions"), [("billing.py", _python_functions), ("orders.ts", _ts_functions)]
)
def test_every_function_is_whole_in_exactly_one_chunk(base_settings, embedder, name, functions):
    text = (CODE / name).read_text(encoding="utf-8")
    document = read_document(CODE / name, CODE, 10_000_000)
    config = chunking_config(base_settings, embedder.max_text_tokens)
    chunks = chunk_document(document, config, embedder.count_tokens)
    expected = functions(text)
    assert len(expected) >= 4
    for path, code in expected.items():
        want = _dedented_lines(code)
        holders = [c for c in chunks if _contains(_dedented_lines(c.body), want)]
        assert len(holders) == 1, (path, [c.heading_path for c in holders])
        assert (holders[0].title, holders[0].heading_path) == (name, path)
        assert holders[0].prefix == " > ".join((name, *path))


def _contains(lines: list[str], run: list[str]) -> bool:
    return any(lines[i : i + len(run)] == run for i in range(len(lines) - len(run) + 1))


def test_loader_eval_over_code_reports_section_metrics(base_settings, unique_name, tmp_path):
    result = CliRunner().invoke(
        cli,
        ["eval", str(FIXTURES / "eval" / "code-questions.jsonl"), "--docs", str(CODE),
         "--mode", "hybrid-rrf", "--mode", "bm25", "--no-rerank", "--no-chart",
         "--url", base_settings.opensearch_url, "--index-prefix", unique_name,
         "--out-dir", str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "section_recall@10" in result.stdout and "section_mrr@10" in result.stdout
    data = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    by_config = {row["name"]: row["metrics"] for row in data["configurations"]}
    hybrid = by_config["structure:hybrid-rrf"]
    assert hybrid["recall@10"] == 1.0  # every question finds its file
    assert hybrid["section_recall@10"] >= 0.75  # and, mostly, its function
