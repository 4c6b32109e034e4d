"""A cluster that is down is the first thing a command says, before any model is loaded: exit
code 3, the URL without its credentials, "is OpenSearch running?", in about a second. Each
command runs in a real process (``python -X importtime``), so what it imported is the proof that
no model was loaded: none of the model modules or runtimes appear."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.paths import FIXTURES, REPO, SAMPLE_DOCS

TINY_BEIR = FIXTURES / "eval" / "tiny-beir"

# What loading the embedding model or the reranker imports; none may be imported before the
# cluster answered.
MODEL_MODULES = (
    "loader.models.embedding",
    "loader.models.rerank.cross_encoder",
    "loader.models.rerank.learned",
    "lightgbm",
    "loader.models.onnx_embedding",
    "onnxruntime",
    "tokenizers",
    "torch",
    "transformers",
    "sentence_transformers",
)


def unused_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_against_down_cluster(
    tmp_path: Path, *args: str
) -> tuple[subprocess.CompletedProcess, float]:
    port = unused_port()
    env = {
        **os.environ,
        "OPENSEARCH_URL": f"http://admin:s3cret-pw@127.0.0.1:{port}",
        "LOADER_INDEX_NAME": "nowhere",
        "HF_HUB_CACHE": str(tmp_path / "hub"),  # no cross-encoder: rerank = auto says off
    }
    config = tmp_path / "loader.toml"
    config.write_text("", encoding="utf-8")
    args = tuple(arg.format(tmp=tmp_path) for arg in args)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "loader", *args, "--config", str(config)],
        cwd=REPO,  # python -m loader: this checkout's package
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    return done, time.monotonic() - started


def imported(stderr: str) -> set[str]:
    """The modules ``-X importtime`` reported."""
    return {
        line.rsplit("|", 1)[1].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


@pytest.mark.parametrize(
    "args",
    [
        ("search", "How long do refunds take for late deliveries?"),
        ("search", "refund", "--rerank"),  # a rerank asked for: the cluster is still named first
        ("push", str(SAMPLE_DOCS)),
        ("apply",),  # needs the model's dimension
        ("explain", "refund", "--expect", "refund-policy.md"),
        ("chat",),  # ends at once, not with an error per line typed
        ("eval", str(TINY_BEIR), "--no-rerank", "--out-dir", "{tmp}/out"),
        ("fine-tune", str(TINY_BEIR), "--out", "{tmp}/model"),
    ],
    ids=["search", "search-rerank", "push", "apply", "explain", "chat", "eval", "fine-tune"],
)
def test_a_down_cluster_is_named_before_any_model_loads(tmp_path, args):
    # (doctor reports the cluster as its first, failed, check: tests/integration/test_errors.py)
    done, seconds = run_against_down_cluster(tmp_path, *args)
    errors = [line for line in done.stderr.splitlines() if not line.startswith("import time:")]
    assert done.returncode == 3, done.stderr[-2000:]
    assert len(errors) == 1, errors
    assert errors[0].startswith("Error: cannot connect to http://127.0.0.1:")
    assert "is OpenSearch running?" in errors[0] and "s3cret-pw" not in done.stderr
    assert not imported(done.stderr) & set(MODEL_MODULES)
    assert seconds < 10  # about a second; generous for a busy machine (the imports are the proof)
