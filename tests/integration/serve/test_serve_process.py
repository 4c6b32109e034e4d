"""`loader serve` as a real process, as a service manager runs it: it starts against the session's
cluster, says on its log that rerank = auto found no cross-encoder, answers, and exits 0 after a
SIGTERM it handled (uvicorn re-raised the signal: exit status 143). A cluster that is down stops
it before any model is imported: exit code 3 naming the URL."""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import sys
import time

from tests.integration.serve.http_server import free_port
from tests.paths import REPO
from tests.unit.test_cluster_first import MODEL_MODULES, imported


def serve_env(url: str, tmp_path) -> dict[str, str]:
    config = tmp_path / "loader.toml"
    config.write_text("", encoding="utf-8")
    return {
        **os.environ,
        "OPENSEARCH_URL": url,
        "LOADER_INDEX_NAME": "nothing-served-here",  # /health needs only the cluster
        "HF_HUB_CACHE": str(tmp_path / "hub"),  # no cross-encoder
        "CONFIG": str(config),  # for --config: no loader.toml of the working directory
    }


def health(port: int) -> int | None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        connection.request("GET", "/health")
        return connection.getresponse().status
    except OSError:
        return None
    finally:
        connection.close()


def test_serve_exits_0_after_sigterm_and_says_it_does_not_rerank(opensearch_url, tmp_path):
    port = free_port()
    env = serve_env(opensearch_url, tmp_path)
    server = subprocess.Popen(
        [sys.executable, "-m", "loader", "serve", "--port", str(port), "--config", env["CONFIG"]],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while health(port) != 200:
            assert server.poll() is None, server.communicate()[1][-2000:]
            assert time.monotonic() < deadline, "loader serve did not answer /health"
            time.sleep(0.2)
        server.send_signal(signal.SIGTERM)
        _, log = server.communicate(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()
    assert server.returncode == 0, log[-2000:]
    assert "Application shutdown complete." in log
    assert log.count("no rerank (rerank = auto): reranker_model ") == 1, log[-2000:]


def test_serve_against_a_down_cluster_is_exit_3_before_any_model(tmp_path):
    down = f"http://admin:s3cret-pw@127.0.0.1:{free_port()}"
    env = serve_env(down, tmp_path)
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "loader", "serve", "--config", env["CONFIG"]],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    errors = [line for line in done.stderr.splitlines() if not line.startswith("import time:")]
    assert done.returncode == 3, done.stderr[-2000:]
    assert errors == [
        f"Error: cannot connect to {down.replace('admin:s3cret-pw@', '')} while checking that "
        "OpenSearch answers; is OpenSearch running? (`loader up` starts a local one; "
        "OPENSEARCH_URL names another)"
    ]
    assert not imported(done.stderr) & set(MODEL_MODULES)
