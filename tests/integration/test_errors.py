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
import logging
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

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
        # each asks for the cluster's banner before it loads a model
        "apply": "checking that OpenSearch answers",
        "push": "checking that OpenSearch answers",
        "search": "checking that OpenSearch answers",
    }[command]


def assert_one_line(result: Result, exit_code: int, message: str) -> None:
    """Exactly one line on stderr, the expected message, the class's exit code, no traceback."""
    assert result.exit_code == exit_code, (result.exit_code, result.output, result.exception)
    assert result.stderr == f"Error: {message}\n", result.stderr
    assert "Traceback" not in result.output
    assert result.stdout == ""


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("not a url", "no scheme"),
        ("ftp://127.0.0.1:21", "scheme 'ftp'"),
        ("127.0.0.1:9200", "no scheme"),
        ("http://", "no host"),
        ("https:///x", "no host"),
        ("http://127.0.0.1:99999", "invalid port '99999': not a number from 1 to 65535"),
        ("http://127.0.0.1:abc", "invalid port 'abc': not a number from 1 to 65535"),
        ("http://my host:9200", "invalid host 'my host'"),
    ],
)
def test_a_url_that_is_not_http_is_a_config_error(command, url, problem, folder):
    result = run(command, url, folder)
    assert_one_line(
        result,
        ConfigError.exit_code,
        f"opensearch_url {url!r} is not an http(s) URL ({problem}); "
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


@pytest.fixture(
    scope="module",
    params=[(WEB_PAGE, "text/plain"), ("", "application/json"), ('"ok"', "application/json")],
    ids=["html-as-text", "empty", "json-string"],
)
def not_json_200_url(request) -> Iterator[str]:
    """Answers 200 with a body that is not a JSON object: a proxy's page labelled text/plain
    (opensearch-py hands it back as a str), nothing at all, or a bare JSON string."""
    body, content_type = request.param
    yield from serve(200, body, content_type)


@pytest.mark.parametrize("command", COMMANDS)
def test_a_200_that_is_not_json_is_the_clusters_error(command, folder, not_json_200_url):
    """Not an 'unexpected AttributeError' (exit 1) from wherever the answer was first read."""
    assert_one_line(
        run(command, not_json_200_url, folder),
        ClusterError.exit_code,
        f"{not_json_200_url} answered something that is not OpenSearch's JSON while "
        f"{doing(command)}; check that OPENSEARCH_URL points at an OpenSearch cluster",
    )


def test_doctor_reports_a_200_that_is_not_json_as_the_clusters_failure(folder, not_json_200_url):
    with contextlib.chdir(folder.parent):
        result = CliRunner().invoke(
            cli,
            ["doctor", "--url", not_json_200_url, "--index", INDEX],
            env={"OPENSEARCH_URL": None},
        )
    assert result.exit_code == ClusterError.exit_code, (result.output, result.exception)
    assert (
        f"FAIL  cluster: {not_json_200_url} answered something that is not OpenSearch's JSON "
        "while reading the cluster's version and health; check that OPENSEARCH_URL points at an "
        "OpenSearch cluster" in result.stdout
    )
    assert (
        result.stderr
        == "Error: loader doctor: 0 ok, 0 warnings, 1 failed, 1 skipped; first: cluster\n"
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
        # The banner's 403 is an answer (a reader may lack cluster:monitor/main); the alias's is
        # the refusal.
        f"{forbidden_url} refused reading index alias {INDEX}: the user lacks permission "
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
def test_debug_shows_the_traceback_and_keeps_the_exit_code(command, folder):
    result = run(command, f"http://127.0.0.1:{free_port()}", folder, "--debug")
    assert result.exit_code == ClusterError.exit_code, result.output  # what scripts test
    assert "Traceback (most recent call last)" in result.stderr
    assert result.stderr.rstrip("\n").splitlines()[-1].startswith("Error: cannot connect to")


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
    assert debug.returncode == ClusterError.exit_code
    assert "Traceback" in debug.stderr
    assert "opensearchpy.exceptions.ConnectionError" in debug.stderr
    # ClusterUnavailableError: the ClusterError for "no answer at all" (HTTP 503 in serve)
    assert f"loader.errors.ClusterUnavailableError: cannot connect to {url}" in debug.stderr


# A password with every URL-reserved character and a space; '%zz' is not an escape.
SECRET = "Ab1:Cd2/Ef3?Gh4#Ij5[Kl6]Mn7@Op8!Qr9$St0&Uv1'Wx2(Yz3)Aq4*Bq5+Cq6,Dq7;Eq8=Fq9%zzq Gq0"
SECRET_PIECES = [SECRET, quote(SECRET, safe="")] + [
    piece for piece in re.split(r"[:/?#\[\]@!$&'()*+,;=%\s]+", SECRET) if len(piece) >= 3
]


def assert_no_secret(*texts: str) -> None:
    for text in texts:
        for piece in SECRET_PIECES:
            assert piece not in text, (piece, text)


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("written", [SECRET, quote(SECRET, safe="")], ids=["raw", "encoded"])
def test_a_password_with_reserved_characters_never_shows(command, written, folder, caplog):
    """A refused connection (one line; with --debug the traceback) and malformed URLs (one
    line): neither the password nor a piece of it in the output or the debug logs."""
    caplog.set_level(logging.DEBUG)
    port = free_port()
    refused = run(command, f"http://user:{written}@127.0.0.1:{port}", folder)
    assert_one_line(
        refused,
        ClusterError.exit_code,
        f"cannot connect to http://127.0.0.1:{port} while {doing(command)}; is OpenSearch "
        "running? (`loader up` starts a local one; OPENSEARCH_URL names another)",
    )
    debug = run(command, f"http://user:{written}@127.0.0.1:{port}", folder, "--debug")
    assert debug.exit_code == ClusterError.exit_code and "Traceback" in debug.stderr
    assert_no_secret(debug.output)
    for url in (f"http://user:{written}@127.0.0.1:99999", f"user:{written}@127.0.0.1:9200"):
        malformed = run(command, url, folder)
        assert malformed.exit_code == ConfigError.exit_code
        assert malformed.stderr.startswith("Error: opensearch_url 'http://user:****@") or (
            malformed.stderr.startswith("Error: opensearch_url 'user:****@127.0.0.1:9200'")
        )
        assert malformed.stderr.count("\n") == 1 and "Traceback" not in malformed.output
        assert_no_secret(malformed.output)
    assert_no_secret(refused.output, caplog.text)


def test_a_password_never_shows_from_a_real_process_even_with_debug(folder):
    """The real entry point, with OPENSEARCH_PASSWORD and a URL password both set: one line, or
    with --debug the traceback and the debug logs; never the password nor a piece of it."""
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("OPENSEARCH_", "LOADER_"))},
        "OPENSEARCH_URL": f"http://user:{quote(SECRET, safe='')}@127.0.0.1:{port}",
        "OPENSEARCH_PASSWORD": SECRET[::-1],
        "LOADER_REQUEST_TIMEOUT": "1",
    }
    base = [sys.executable, "-c", "from loader.cli import cli; cli()"]
    outputs = []
    for args, code in (
        (["apply", "--dry-run"], ClusterError.exit_code),
        (["search", "x", "--no-rerank", "--mode", "bm25"], ClusterError.exit_code),
        (["push", str(folder)], ClusterError.exit_code),
        (["apply", "--dry-run", "--debug"], ClusterError.exit_code),
        (["search", "x", "--no-rerank", "--mode", "bm25", "--debug"], ClusterError.exit_code),
        (["push", str(folder), "--debug"], ClusterError.exit_code),
        (["apply", "--url", f"http://user:{SECRET}@127.0.0.1:abc"], ConfigError.exit_code),
        (["settings"], 0),
        (["settings", "--json"], 0),
    ):
        done = subprocess.run(
            [*base, *args, "--index", INDEX] if args[0] != "settings" else [*base, *args],
            cwd=folder.parent,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == code, (args, done.stderr[-3000:])
        if code in (ClusterError.exit_code, ConfigError.exit_code) and "--debug" not in args:
            assert done.stderr.count("\n") == 1, done.stderr
        if "--debug" in args:
            assert "Traceback" in done.stderr and "DEBUG" in done.stderr
        outputs += [done.stdout, done.stderr]
    assert "opensearch_password = '****'" in outputs[-4]
    assert_no_secret(*outputs)
    for text in outputs:
        assert SECRET[::-1] not in text
