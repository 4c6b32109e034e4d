"""Every shell and Python example of README.md and guide/ runs as written against a real node.

Each fenced ``bash`` / ``sh`` / ``console`` block is one test: ``bash -e`` in a workspace holding
copies of ``docs/`` and ``tests/fixtures/eval/`` (what the examples name), with
``OPENSEARCH_URL`` set to the session's node and a unique ``LOADER_INDEX_NAME``, so a block never
touches another test's index. The workspace's configuration is applied and ``docs/`` pushed once,
before the first block; blocks that push again find nothing changed. Each fenced ``python`` block
is one test too: the block as a file run by this interpreter in the same workspace, with the same
environment (so ``loader``'s settings name the same node and index), which must exit 0.

The rules, also stated in guide/README.md:

- a block right after a line ``<!-- illustrative ... -->`` is not run (installs, benchmarks,
  SciFact runs, code that names another index);
- a line running ``loader up`` or ``loader down`` is left out: the session's node stands in for
  the Docker container they start and stop;
- a line running ``loader serve`` is left out, and the test starts ``loader serve`` itself on a
  free port, which replaces ``127.0.0.1:8000`` in the blocks;
- ``loader eval`` and ``loader fine-tune`` without ``--index-prefix`` get a unique one, as the
  prefix is an option, not a setting the environment can give;
- ``curl`` fails on an HTTP error (``--fail-with-body``), and a search answer without a hit
  fails the test: an example that answers 503, or nothing, is a broken example.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import cleanup_owned
from tests.integration.serve.http_server import free_port
from tests.paths import FIXTURES, REPO, SAMPLE_DOCS

PAGES = [REPO / "README.md", *sorted((REPO / "guide").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\s*$")
ILLUSTRATIVE = "<!-- illustrative"
SHELLS = {"bash", "sh", "console"}
PYTHON = "python"
LEFT_OUT = re.compile(r"^\s*loader (up|down|serve)\b")
SERVE_ADDRESS = "127.0.0.1:8000"
BLOCK_TIMEOUT = 600


@dataclass(frozen=True)
class Example:
    page: Path
    line: int
    script: str
    language: str = "bash"  # or PYTHON

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(REPO).as_posix()}:{self.line}"


def page_examples(page: Path) -> list[Example]:
    """The page's shell and Python blocks not marked illustrative; a console block's ``$ ``
    lines only."""
    lines = page.read_text(encoding="utf-8").split("\n")
    examples, index = [], 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
        body = lines[index + 1 : end]
        illustrative = index > 0 and lines[index - 1].startswith(ILLUSTRATIVE)
        if opening.group(1) in SHELLS and not illustrative:
            if opening.group(1) == "console":
                body = [line[2:] for line in body if line.startswith("$ ")]
            examples.append(Example(page, index + 1, "\n".join(body) + "\n"))
        elif opening.group(1) == PYTHON and not illustrative:
            examples.append(Example(page, index + 1, "\n".join(body) + "\n", PYTHON))
        index = end + 1
    return examples


EXAMPLES = [example for page in PAGES for example in page_examples(page)]


def runnable(script: str, serve_port: int | None) -> str:
    """The script as the test runs it: up/down/serve lines left out, serve's address replaced."""
    kept = [
        f"# left out by the docs test: {line.strip()}" if LEFT_OUT.match(line) else line
        for line in script.split("\n")
    ]
    text = "\n".join(kept)
    if serve_port is not None:
        text = text.replace(SERVE_ADDRESS, f"127.0.0.1:{serve_port}")
    return text


LOADER_SHIM = """#!/usr/bin/env bash
if [[ ($1 == eval || $1 == fine-tune) && " $* " != *" --index-prefix"* ]]; then
    set -- "$@" --index-prefix "$DOCS_TEST_EVAL_PREFIX"
fi
exec {python} -m loader "$@"
"""

# Each answer is kept for the test to read; --fail-with-body makes an HTTP error fail the block.
CURL_SHIM = """#!/usr/bin/env bash
set -o pipefail
answer=$(mktemp "$DOCS_TEST_CURL_LOG/answer.XXXXXX")
{curl} --fail-with-body "$@" | tee "$answer"
"""


@dataclass(frozen=True)
class Workspace:
    folder: Path
    env: dict[str, str]
    curl_log: Path


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, opensearch_url, client):
    folder = tmp_path_factory.mktemp("docs-examples")
    shutil.copytree(SAMPLE_DOCS, folder / "docs")
    shutil.copytree(FIXTURES / "eval", folder / "tests" / "fixtures" / "eval")
    bin_dir = tmp_path_factory.mktemp("docs-bin")
    shims = {
        "loader": LOADER_SHIM.format(python=sys.executable),
        "curl": CURL_SHIM.format(curl=shutil.which("curl")),
        "python": f'#!/bin/sh\nexec {sys.executable} "$@"\n',
        "python3": f'#!/bin/sh\nexec {sys.executable} "$@"\n',
    }
    for name, text in shims.items():
        (bin_dir / name).write_text(text, encoding="utf-8")
        (bin_dir / name).chmod(0o755)
    curl_log = tmp_path_factory.mktemp("docs-curl")
    index_name = f"t-docs-examples-{os.urandom(4).hex()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOADER_")}
    env.update(
        OPENSEARCH_URL=opensearch_url,
        LOADER_INDEX_NAME=index_name,
        DOCS_TEST_EVAL_PREFIX=f"{index_name}-eval",
        DOCS_TEST_CURL_LOG=str(curl_log),
        PYTHONPATH=str(REPO),  # this checkout's loader and tests packages, from any folder
        PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        HF_HUB_OFFLINE="1",
    )
    if "LOADER_CACHE_DIR" in os.environ:
        env["LOADER_CACHE_DIR"] = os.environ["LOADER_CACHE_DIR"]
    try:
        for command in ("loader apply", "loader push docs/"):
            done = run_bash(command, folder, env)
            assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"
        yield Workspace(folder, env, curl_log)
    finally:
        cleanup_owned(client, index_name)


@pytest.fixture(scope="module")
def serve_port(workspace):
    """``loader serve`` on a free port, in the workspace, as a reader would start it."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "loader", "serve", "--port", str(port)],
        cwd=workspace.folder,
        env=workspace.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180  # the embedding model loads at startup
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5):
                    break
            except OSError as exc:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"loader serve did not start: {exc}") from exc
                time.sleep(0.5)
        yield port
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def run_bash(script: str, folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """``bash -e`` on the script; background jobs it started (a test server) are ended with it."""
    return run_command(["bash", "-e", "-c", script], folder, env)


def run_python(example: Example, folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """The Python block as a file of the workspace, run by this interpreter."""
    script = folder / f"example-{example.page.stem}-{example.line}.py"
    script.write_text(example.script, encoding="utf-8")
    return run_command([sys.executable, str(script)], folder, env)


def run_command(args: list[str], folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """``args`` in ``folder``; what it started in the background is ended with it.

    Output goes to files, not pipes: a background job keeps a pipe open after bash exits.
    """
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        process = subprocess.Popen(
            args,
            cwd=folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
        try:
            process.wait(timeout=BLOCK_TIMEOUT)
        finally:
            with contextlib.suppress(ProcessLookupError):  # nothing of it left running
                os.killpg(process.pid, signal.SIGTERM)
        stdout.seek(0)
        stderr.seek(0)
        return subprocess.CompletedProcess(
            process.args,
            process.returncode,
            stdout.read().decode("utf-8", "replace"),
            stderr.read().decode("utf-8", "replace"),
        )


def search_answers_without_hits(curl_log: Path) -> list[str]:
    """The curl answers of the block that are searches and found nothing."""
    empty = []
    for answer in sorted(curl_log.iterdir()):
        text = answer.read_text(encoding="utf-8")
        answer.unlink()
        try:
            body = json.loads(text)
        except ValueError:
            continue
        hits = body.get("hits") if isinstance(body, dict) else None
        if isinstance(hits, dict):  # OpenSearch's answer
            hits = hits.get("hits")
        if isinstance(hits, list) and not hits:
            empty.append(text[:300])
    return empty


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda example: example.name)
def test_example_runs_as_written(example, workspace, request):
    if example.language == PYTHON:
        done = run_python(example, workspace.folder, workspace.env)
    else:
        port = request.getfixturevalue("serve_port") if SERVE_ADDRESS in example.script else None
        done = run_bash(runnable(example.script, port), workspace.folder, workspace.env)
    assert done.returncode == 0, (
        f"{example.name} exited {done.returncode}\n--- stdout\n{done.stdout[-3000:]}"
        f"\n--- stderr\n{done.stderr[-3000:]}"
    )
    empty = search_answers_without_hits(workspace.curl_log)
    assert not empty, f"{example.name}: a search answered no hit: {empty}"
