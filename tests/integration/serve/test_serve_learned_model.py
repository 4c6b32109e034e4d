"""A damaged learned model in a running `loader serve` and in the CLI (issue #52, item 2): 0
crashed processes.

`loader serve` runs as a real process (a crash inside LightGBM would kill it, which an
in-process server would hide by killing pytest): it starts with ``rerank = auto`` and a damaged
model, logs that it cannot use it and serves fusion, saying so; then a subset of the damaged-file
matrix (truncations and field edits, raw and with the provenance rewritten to match) is written
into the served folder, and after each one a ``"rerank": true`` request answers 503 and the server
still answers /health and a search without rerank. A good model is then read without a restart;
damaged again, the model read before keeps serving; retrained, the new one serves.

In the CLI, every truncation and edit of the matrix is exit code 6 naming the file (`loader
search --rerank`, in-process); as processes, `search` exits 6 and `explain` explains without the
rerank stage, naming the file (never 139).
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from loader.cli import cli
from loader.models.rerank.check import LEARNED_MODEL_FILE
from loader.models.rerank.learned_files import PROVENANCE_FILE, model_file_facts
from loader.serve.service import NO_LEARNED
from tests.conftest import cleanup_owned
from tests.integration.query.search_corpus import build_corpus
from tests.integration.serve.http_server import free_port
from tests.integration.serve.test_serve_process import serve_env
from tests.paths import REPO
from tests.unit.models.rerank.test_learned_files import EDITS, TRUNCATIONS, reseal_sizes, train

# The serve subset: truncations inside the header, in the trees and in the tail; edits of the
# header and of a tree, each raw (caught by the hash) and resealed (by the line-by-line check).
SERVED_CUTS = (0, 1, 3, 9, 17, 26)
SERVED_EDITS = ("num_tree_per_iteration=0", "tree_sizes=9999999", "split_feature=999",
                "left_child cycle", "threshold=nan", "num_cat=5")  # fmt: skip
QUESTION = {"question": "E1043", "tenant": "A", "mode": "bm25"}


@pytest.fixture(scope="module")
def corpus(client, base_settings, tmp_path_factory, embedder) -> Iterator:
    built = None
    try:
        root = tmp_path_factory.mktemp("learned-serve")
        built = build_corpus(client, base_settings, root, embedder)
        yield built
    finally:
        if built is not None:
            cleanup_owned(client, built.index_name)


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    return train(tmp_path_factory.mktemp("good-model"), rounds=20, seed=1)


def damaged_files(good: Path, cut: int | None = None, edit: str | None = None) -> list[bytes]:
    """A damaged booster, raw and resealed: [raw bytes, resealed bytes] (the latter's
    provenance is written by ``place``)."""
    data = (good / LEARNED_MODEL_FILE).read_bytes()
    if cut is not None:
        damaged = data[: len(data) * cut // TRUNCATIONS]
        return [damaged, damaged]
    edited = EDITS[edit](data.decode("ascii"))
    resized = edited if edit.startswith("tree_sizes") else reseal_sizes(edited)
    return [edited.encode(), resized.encode()]


def place(good: Path, folder: Path, data: bytes, reseal: bool) -> None:
    """The served folder's files: ``data`` as the booster, and the good model's provenance,
    rewritten to match ``data`` with ``reseal``."""
    provenance = json.loads((good / PROVENANCE_FILE).read_text(encoding="utf-8"))
    if reseal:
        provenance["model"].update(model_file_facts(data))
    (folder / PROVENANCE_FILE).write_text(json.dumps(provenance), encoding="utf-8")
    (folder / LEARNED_MODEL_FILE).write_bytes(data)


def call(port: int, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        headers = {"Content-Type": "application/json"}
        connection.request(method, path, body=json.dumps(body) if body else None, headers=headers)
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        connection.close()


def still_serving(server: subprocess.Popen, port: int, what: str) -> None:
    assert server.poll() is None, f"serve died ({server.returncode}) after {what}"
    status, body = call(port, "GET", "/health")
    assert status == 200, (what, body)
    status, body = call(port, "POST", "/search", {**QUESTION, "rerank": False})
    assert status == 200 and body["hits"] and body["reranked"] is False, (what, body)


def rerank_answer(port: int) -> tuple[int, dict]:
    return call(port, "POST", "/search", {**QUESTION, "rerank": True})


def test_a_damaged_model_never_takes_serve_down(corpus, good, tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    place(good, served, damaged_files(good, cut=9)[0], reseal=False)
    env = {
        **serve_env(corpus.opensearch_url, tmp_path),
        "LOADER_INDEX_NAME": corpus.index_name,
        "LOADER_LEARNED_RERANKER": str(served),
        "LOADER_RERANKER_MODEL": str(tmp_path / "no-cross-encoder"),
    }
    port, log_path = free_port(), tmp_path / "serve.log"
    with log_path.open("wb") as log_file:
        server = subprocess.Popen(
            [sys.executable, "-m", "loader", "serve", "--port", str(port), "--config",
             env["CONFIG"]],
            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=log_file,
        )  # fmt: skip
        try:
            _served_through_the_matrix(server, port, good, served)
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=60)
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
    log = log_path.read_text(encoding="utf-8", errors="replace")
    assert server.returncode == 0, log[-3000:]
    assert "the reranker cannot be used: requests that ask for a rerank answer 503" in log
    assert f"learned reranker {served}/{LEARNED_MODEL_FILE} is " in log  # the file, named
    assert "its new files are refused; the model read before" in log, log[-3000:]
    assert f"learned reranker {served} changed: the new model serves" in log


def _served_through_the_matrix(server, port: int, good: Path, served: Path) -> None:
    deadline = time.monotonic() + 180
    while server.poll() is None and time.monotonic() < deadline:
        try:
            if call(port, "GET", "/health")[0] == 200:
                break
        except OSError:
            time.sleep(0.3)
    still_serving(server, port, "starting with a damaged model (rerank = auto)")
    status, body = call(port, "POST", "/search", QUESTION)  # auto: fusion, saying why
    assert status == 200 and body["reranked"] is False and NO_LEARNED in body["warnings"], body
    cases = [("cut", cut, None) for cut in SERVED_CUTS] + [("edit", None, e) for e in SERVED_EDITS]
    for kind, cut, edit in cases:
        for reseal, data in zip((False, True), damaged_files(good, cut, edit), strict=True):
            what = f"{kind} {cut if edit is None else edit} (resealed: {reseal})"
            place(good, served, data, reseal)
            status, body = rerank_answer(port)
            assert status == 503 and body["error"].startswith("no reranker available"), (
                what,
                body,
            )
            assert str(served) not in body["error"]  # the server's folders stay in its log
            still_serving(server, port, what)
    # A good model: read without a restart, and auto's requests rerank with it again.
    place(good, served, (good / LEARNED_MODEL_FILE).read_bytes(), reseal=True)
    status, body = rerank_answer(port)
    assert status == 200 and body["reranked"] is True, body
    status, body = call(port, "POST", "/search", QUESTION)
    assert status == 200 and body["reranked"] is True and body["warnings"] == [], body
    # Damaged again: the model read before keeps serving.
    place(good, served, damaged_files(good, edit="split_feature=999")[1], reseal=True)
    for _ in range(2):
        status, body = rerank_answer(port)
        assert status == 200 and body["reranked"] is True, body
    still_serving(server, port, "a damaged model after a good one")
    # Retrained in place: the new model serves.
    train(served, rounds=8, seed=5)
    status, body = rerank_answer(port)
    assert status == 200 and body["reranked"] is True, body


# --- the CLI -------------------------------------------------------------------------------------


def cli_search(corpus, folder: Path, tmp_path: Path) -> tuple[int, str]:
    done = CliRunner().invoke(
        cli,
        ["search", "E1043", "--url", corpus.opensearch_url, "--index", corpus.index_name,
         "--tenant", "A", "--mode", "bm25", "--rerank"],
        env={"LOADER_LEARNED_RERANKER": str(folder),
             "LOADER_RERANKER_MODEL": str(tmp_path / "no-cross-encoder")},
    )  # fmt: skip
    return done.exit_code, done.output


def test_every_damaged_file_is_exit_code_6_naming_it_in_the_cli(corpus, good, tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    cases = [(cut, None) for cut in range(TRUNCATIONS)] + [(None, edit) for edit in EDITS]
    for cut, edit in cases:
        for reseal, data in zip((False, True), damaged_files(good, cut, edit), strict=True):
            place(good, folder, data, reseal)
            code, output = cli_search(corpus, folder, tmp_path)
            assert code == 6, (cut, edit, reseal, output)
            named = f"learned reranker {folder}/{LEARNED_MODEL_FILE}"
            empty = f"learned reranker provenance {folder}/{PROVENANCE_FILE}: model.file_bytes is 0"
            assert named in output or (cut == 0 and empty in output), (cut, edit, output)
    place(good, folder, (good / LEARNED_MODEL_FILE).read_bytes(), reseal=True)
    assert cli_search(corpus, folder, tmp_path)[0] == 0


@pytest.mark.parametrize("command", ["search", "explain"])
def test_a_damaged_file_is_a_model_error_for_a_process_never_a_signal(
    corpus, good, tmp_path, command
):
    """`loader search --rerank` exits 6 naming the file; `loader explain --rerank` explains
    without the rerank stage and says why (as for any reranker that cannot load)."""
    folder = tmp_path / "model"
    folder.mkdir()
    place(good, folder, damaged_files(good, cut=12)[0], reseal=False)
    env = {**os.environ, "LOADER_LEARNED_RERANKER": str(folder),
           "LOADER_RERANKER_MODEL": str(tmp_path / "no-cross-encoder")}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "loader", command, "E1043", "--url", corpus.opensearch_url,
         "--index", corpus.index_name, "--tenant", "A", "--mode", "bm25", "--rerank"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    named = f"learned reranker {folder}/{LEARNED_MODEL_FILE} is "
    if command == "search":
        assert done.returncode == 6, (done.returncode, done.stderr[-2000:])
        assert named in done.stderr
    else:
        assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
        assert f"no rerank stage: {named}" in done.stdout, done.stdout[-2000:]
