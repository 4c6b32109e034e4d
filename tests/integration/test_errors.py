"""Unreachable or wrong clusters through the CLI: `loader apply`, `loader push` and `loader search`
each print one line naming the cluster and the fix, exit with the error class's code, and show a
traceback only with --debug.

The "clusters" are local stand-ins on 127.0.0.1: a free port (connection refused), a TCP server
that accepts and never answers (timeout), a web server that answers HTML (not OpenSearch), and one
that answers 401/403 the way the security plugin does.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from loader.cli import cli
from loader.errors import AuthenticationError, ClusterError, ConfigError

INDEX = "errors-never-created"
TIMEOUT = 0.5  # seconds; the silent server is never going to answer

# The three commands, with options that make them reach the cluster without a cross-encoder.
COMMANDS = {
    "apply": ["apply"],
    "push": ["push", "{folder}"],
    "search": ["search", "refund", "--no-rerank", "--mode", "bm25"],
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def silent_url() -> Iterator[str]:
    """A TCP server that accepts connections and never sends a byte."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                accepted.append(server.accept()[0])
            except OSError:  # closed at teardown
                return

    threading.Thread(target=accept, daemon=True).start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    server.close()
    for connection in accepted:
        connection.close()


class FakeServer(http.server.ThreadingHTTPServer):
    """Answers every request with one fixed status, content type, body and extra headers."""

    status: int
    content_type: str
    body: bytes
    headers: dict[str, str]


class FakeHandler(http.server.BaseHTTPRequestHandler):
    server: FakeServer

    def answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.send_response(self.server.status)
        self.send_header("Content-Type", self.server.content_type)
        for name, value in self.server.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(self.server.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(self.server.body)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = answer

    def log_message(self, *args: object) -> None:  # keep the test output clean
        pass


def serve(
    status: int, body: str, content_type: str = "text/html", headers: dict | None = None
) -> Iterator[str]:
    server = FakeServer(("127.0.0.1", 0), FakeHandler)
    server.status, server.content_type = status, content_type
    server.body, server.headers = body.encode(), headers or {}
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


WEB_PAGE = "<html><head><title>Welcome</title></head><body><h1>It works</h1></body></html>"


@pytest.fixture(scope="module")
def html_url() -> Iterator[str]:
    """A web server that answers 200 with an HTML page for everything."""
    yield from serve(200, WEB_PAGE)


@pytest.fixture(scope="module")
def html_404_url() -> Iterator[str]:
    """A web server that answers 404 with an HTML page for everything."""
    yield from serve(404, "<html><body><h1>Not Found</h1></body></html>")


@pytest.fixture(scope="module")
def unauthorized_url() -> Iterator[str]:
    """Answers 401 like the security plugin does for wrong credentials."""
    yield from serve(
        401,
        "Unauthorized",
        "text/plain",
        {"WWW-Authenticate": 'Basic realm="OpenSearch Security"'},
    )


@pytest.fixture(scope="module")
def forbidden_url() -> Iterator[str]:
    """Answers 403 like the security plugin does for a user without the permission."""
    body = {
        "error": {
            "root_cause": [
                {
                    "type": "security_exception",
                    "reason": "no permissions for [indices:admin/get] and User [name=reader]",
                }
            ],
            "type": "security_exception",
            "reason": "no permissions for [indices:admin/get] and User [name=reader]",
        },
        "status": 403,
    }
    yield from serve(403, json.dumps(body), "application/json")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("errors") / "docs"
    root.mkdir()
    (root / "refunds.md").write_text("# Refunds\n\nLate orders are refunded.\n", encoding="utf-8")
    return root


def run(command: str, url: str, folder: Path, *extra: str) -> Result:
    """`loader <command>` against ``url``, from an empty working directory (no loader.toml)."""
    args = [arg.format(folder=folder) for arg in COMMANDS[command]]
    with contextlib.chdir(folder.parent):
        return CliRunner().invoke(
            cli,
            [*args, "--url", url, "--index", INDEX, *extra],
            env={"LOADER_REQUEST_TIMEOUT": str(TIMEOUT), "OPENSEARCH_URL": None},
        )


def doing(command: str) -> str:
    """What each command was doing when its first request failed."""
    return {
        "apply": f"reading index alias {INDEX}",
        "push": "reading the chunks of collection 'docs'",
        "search": f"searching {INDEX!r} with template '{INDEX}-bm25'",
    }[command]


def assert_one_line(result: Result, exit_code: int, message: str) -> None:
    """Exactly one line on stderr, the expected message, the class's exit code, no traceback."""
    assert result.exit_code == exit_code, (result.exit_code, result.output, result.exception)
    assert result.stderr == f"Error: {message}\n", result.stderr
    assert "Traceback" not in result.output
    assert result.stdout == ""


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    "url", ["not a url", "ftp://127.0.0.1:21", "127.0.0.1:9200", "http://", "https:///x"]
)
def test_a_url_that_is_not_http_is_a_config_error(command, url, folder):
    result = run(command, url, folder)
    assert_one_line(
        result,
        ConfigError.exit_code,
        f"opensearch_url {url!r} is not an http(s) URL; "
        "set OPENSEARCH_URL, e.g. http://127.0.0.1:9200",
    )


@pytest.mark.parametrize("command", COMMANDS)
def test_refused_connection(command, folder):
    url = f"http://127.0.0.1:{free_port()}"
    result = run(command, url, folder)
    assert_one_line(
        result,
        ClusterError.exit_code,
        f"cannot connect to {url} while {doing(command)}; is OpenSearch running? "
        "(`loader up` starts a local one; OPENSEARCH_URL names another)",
    )


@pytest.mark.parametrize("command", COMMANDS)
def test_a_cluster_that_never_answers_times_out(command, folder, silent_url):
    result = run(command, silent_url, folder)
    assert_one_line(
        result,
        ClusterError.exit_code,
        f"{silent_url} did not answer within {TIMEOUT:g} s while {doing(command)}; "
        "raise request_timeout or check the cluster's health",
    )


@pytest.mark.parametrize("command", COMMANDS)
def test_a_web_server_that_is_not_opensearch(command, folder, html_url, html_404_url):
    for url in (html_url, html_404_url):
        result = run(command, url, folder)
        assert result.exit_code == ClusterError.exit_code, (result.output, result.exception)
        assert result.stderr.startswith(f"Error: {url} answered ")
        assert "not OpenSearch's JSON" in result.stderr
        assert "check that OPENSEARCH_URL points at an OpenSearch cluster" in result.stderr
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.output


def test_html_answers_get_their_own_message(folder, html_url, html_404_url):
    assert_one_line(
        run("apply", html_url, folder),
        ClusterError.exit_code,
        f"{html_url} answered something that is not OpenSearch's JSON while {doing('apply')}; "
        "check that OPENSEARCH_URL points at an OpenSearch cluster",
    )
    result = run("search", html_404_url, folder)
    assert result.stderr.startswith(
        f"Error: {html_404_url} answered 404 with a page that is not OpenSearch's JSON "
        f"(Not Found) while {doing('search')}; check that OPENSEARCH_URL points at an "
        "OpenSearch cluster (or that the proxy in front of it can reach it)"
    )


@pytest.mark.parametrize("command", COMMANDS)
def test_rejected_credentials(command, folder, unauthorized_url):
    result = run(command, unauthorized_url, folder)
    assert_one_line(
        result,
        AuthenticationError.exit_code,
        f"{unauthorized_url} rejected the credentials while {doing(command)}; "
        "check OPENSEARCH_USER / OPENSEARCH_PASSWORD",
    )


def test_missing_permission(folder, forbidden_url):
    result = run("apply", forbidden_url, folder)
    assert_one_line(
        result,
        AuthenticationError.exit_code,
        f"{forbidden_url} refused {doing('apply')}: the user lacks permission "
        "(security_exception: no permissions for [indices:admin/get] and User [name=reader])",
    )


def test_https_to_a_plain_http_port_is_a_tls_error(folder, opensearch_url):
    url = opensearch_url.replace("http://", "https://")
    result = run("apply", url, folder)
    assert result.exit_code == ClusterError.exit_code
    assert result.stderr.startswith(f"Error: TLS handshake with {url} failed while ")
    assert result.stderr.endswith("; point ca_certs at the cluster's CA certificate\n")


def test_a_missing_ca_file_is_a_config_error(folder, tmp_path):
    missing = tmp_path / "no-ca.pem"
    runner = CliRunner()
    result = runner.invoke(
        cli,
        ["apply", "--url", "https://127.0.0.1:1", "--index", INDEX],
        env={"LOADER_CA_CERTS": str(missing)},
    )
    assert_one_line(
        result,
        ConfigError.exit_code,
        f"ca_certs {str(missing)!r} is not a file; point it at the PEM file of the CA that "
        "signed the cluster's certificate",
    )


@pytest.mark.parametrize("command", COMMANDS)
def test_debug_raises_the_error_instead(command, folder):
    result = run(command, f"http://127.0.0.1:{free_port()}", folder, "--debug")
    assert isinstance(result.exception, ClusterError)
    assert result.exit_code == 1  # CliRunner's code for an uncaught exception


def test_debug_shows_the_traceback_in_a_real_process(tmp_path):
    """The real entry point: one line without --debug, the full chain with it."""
    url = f"http://127.0.0.1:{free_port()}"
    env = {**os.environ, "OPENSEARCH_URL": url, "LOADER_REQUEST_TIMEOUT": "1"}
    base = [sys.executable, "-c", "from loader.cli import cli; cli()", "apply", "--index", INDEX]
    plain = subprocess.run(base, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert plain.returncode == ClusterError.exit_code
    assert plain.stderr.startswith(f"Error: cannot connect to {url}")
    assert plain.stderr.count("\n") == 1
    debug = subprocess.run(
        [*base, "--debug"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert debug.returncode == 1
    assert "Traceback" in debug.stderr
    assert "opensearchpy.exceptions.ConnectionError" in debug.stderr
    assert f"loader.errors.ClusterError: cannot connect to {url}" in debug.stderr
