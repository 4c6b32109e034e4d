"""`loader serve` with API keys bound to tenants, over real HTTP on the session's cluster.

Tenants A and B share one index (``search_corpus``); tenant B's chunks all say "Tenant B secret".
With a key file binding key-a to A and key-b to B: a key sees only its tenant's chunks in every
mode and context option, a body tenant other than the key's is a 403, no key or a wrong one a 401,
and no key ever appears in a response, a log record or the server's output.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from loader.cli import cli
from loader.errors import ConfigError
from loader.serve.app import create_app
from loader.settings import SEARCH_MODES
from tests.conftest import cleanup_owned
from tests.integration.query.search_corpus import build_corpus
from tests.integration.serve.http_server import Server

KEY_A = "key-a-Zp3m9QvR2xL7wT4nB8cY"
KEY_A2 = "key-a2-Hs6dK1fJ5gE0uI9oP3aW"
KEY_B = "key-b-Vb7nM2qX5zC8rT1yU4eO"
WRONG = "key-x-Wr0ngWr0ngWr0ngWr0ng"
KEYS = (KEY_A, KEY_A2, KEY_B, WRONG)
B_SECRET = "Tenant B secret"
QUESTIONS = ("refund for a late delivery", "error E1043 paper tray", "password reset")


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture(scope="module")
def key_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("keys") / "api-keys.toml"
    path.write_text(
        f'[keys]\n"{KEY_A}" = "A"\n"{KEY_A2}" = "A"\n"{KEY_B}" = "B"\n', encoding="utf-8"
    )
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def settings(
    client, base_settings, tmp_path_factory, embedder, cross_encoder_path, key_file
) -> Iterator:
    built = None
    try:
        built = build_corpus(client, base_settings, tmp_path_factory.mktemp("keyed"), embedder)
        yield built.replace(reranker_model=cross_encoder_path, api_keys_file=str(key_file))
    finally:
        if built is not None:
            cleanup_owned(client, built.index_name)


class Captured(logging.Handler):
    """Every record of the loggers it is attached to, formatted with its arguments."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.name} {record.levelname} {record.getMessage()}")


LOGGERS = ("", "uvicorn", "uvicorn.access", "uvicorn.error", "loader", "opensearch", "fastapi")


@pytest.fixture(scope="module")
def captured() -> Captured:
    return Captured()


@pytest.fixture(scope="module")
def server(settings, embedder, captured) -> Iterator[Server]:
    # log_level info: uvicorn's access log is on, so the test sees what an operator's log holds.
    running = Server(create_app(settings, embedder=embedder), log_level="info")
    # Attached after uvicorn configured its loggers (which replaces their handlers).
    loader_log = logging.getLogger("loader")
    previous = loader_log.level
    loader_log.setLevel(logging.DEBUG)
    for name in LOGGERS:
        logging.getLogger(name).addHandler(captured)
    try:
        with running:
            yield running
    finally:
        for name in LOGGERS:
            logging.getLogger(name).removeHandler(captured)
        loader_log.setLevel(previous)


def test_health_needs_no_key(server):
    status, body = server.request("GET", "/health")
    assert status == 200 and body["status"] == "ok"
    # HEAD, as load balancers and uptime checkers probe: the status, no body, no key.
    assert server.raw("HEAD", "/health") == (200, "")


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({}, "an API key is required: send Authorization: Bearer <key> (or X-API-Key)"),
        (bearer(WRONG), "unknown API key"),
        (bearer(KEY_A[:-1]), "unknown API key"),
        ({"X-API-Key": WRONG}, "unknown API key"),
        ({"Authorization": f"Basic {KEY_A}"}, "the Authorization header must be 'Bearer <key>'"),
        ({"Authorization": KEY_A}, "the Authorization header must be 'Bearer <key>'"),
        (
            {**bearer(KEY_A), "X-API-Key": KEY_B},
            "send one API key: Authorization and X-API-Key disagree",
        ),
    ],
)
def test_no_key_or_a_wrong_one_is_a_401(server, headers, message):
    for method, path, body in (
        ("POST", "/search", {"question": "refund", "tenant": "A", "rerank": False}),
        ("POST", "/search", {"question": "refund", "rerank": False}),
        ("GET", "/openapi.json", None),
        ("GET", "/docs", None),
        ("GET", "/no-such-page", None),
    ):
        status, text = server.raw(method, path, body, headers)
        assert status == 401, (path, text)
        assert json.loads(text) == {"error": message}
        assert all(key not in text for key in KEYS)


def test_a_body_tenant_other_than_the_keys_is_a_403(server):
    for tenant in ("B", "a", "A ", 'A" OR "B', "*", "{{tenant}}"):
        status, text = server.raw(
            "POST",
            "/search",
            {"question": "refund", "tenant": tenant, "rerank": False},
            bearer(KEY_A),
        )
        assert status == 403, (tenant, text)
        assert json.loads(text)["error"] == (
            f"tenant: {tenant!r} is not the tenant of this API key; leave tenant out (the key's "
            "tenant is searched) or use that tenant's key"
        )
        assert B_SECRET not in text and KEY_A not in text


def test_the_tenant_comes_from_the_key(server):
    for headers, tenant in (
        (bearer(KEY_A), "A"),
        (bearer(KEY_A2), "A"),
        ({"X-API-Key": KEY_A}, "A"),
        (bearer(KEY_B), "B"),
    ):
        for body in (
            {"question": "refund late delivery", "rerank": False, "k": 10},
            {"question": "refund late delivery", "rerank": False, "k": 10, "tenant": tenant},
        ):
            status, answer = server.request("POST", "/search", body, headers)
            assert status == 200, answer
            assert answer["tenant"] == tenant and answer["hits"]
            assert {hit["tenant"] for hit in answer["hits"]} == {tenant}


@pytest.mark.parametrize("mode", SEARCH_MODES)
def test_key_a_never_sees_tenant_b(server, mode):
    options = [
        {"rerank": False},
        {"rerank": True},
        {"rerank": False, "expand": "parent"},
        {"rerank": False, "expand": "window", "merge_adjacent": True, "prompt_order": True},
        {"rerank": False, "filters": {"tags": ["billing", "support"], "lang": "en"}},
        {"rerank": False, "filters": {"published_from": "2000-01-01", "decay_scale": "3650d"}},
    ]
    seen_a = 0
    for question in (*QUESTIONS, "Tenant B secret", B_SECRET.lower()):
        for option in options:
            body = {"question": question, "mode": mode, "k": 20, "candidates": 50, **option}
            status, text = server.raw("POST", "/search", body, bearer(KEY_A))
            assert status == 200, (body, text)
            answer = json.loads(text)
            assert {hit["tenant"] for hit in answer["hits"]} <= {"A"}, body
            assert B_SECRET not in json.dumps(answer["hits"]), body
            seen_a += len(answer["hits"])
            status, answer = server.request("POST", "/search", body, bearer(KEY_B))
            assert status == 200, (body, answer)
            assert {hit["tenant"] for hit in answer["hits"]} <= {"B"}, body
    assert seen_a > 0


def test_the_openapi_of_a_keyed_server(server):
    status, schema = server.request("GET", "/openapi.json", headers=bearer(KEY_B))
    assert status == 200
    request_schema = schema["components"]["schemas"]["KeyedSearchRequest"]
    assert request_schema["required"] == ["question"]  # the tenant comes from the key
    assert {"401", "403"} <= set(schema["paths"]["/search"]["post"]["responses"])


def test_no_key_in_any_log_line_or_output(server, captured, capfd):
    """Runs last in this module (pytest keeps file order): every request above went through the
    server with uvicorn's access log on and the loader's log at DEBUG."""
    server.raw("POST", "/search?x=1", {"question": "refund", "rerank": False}, bearer(KEY_A))
    server.raw("POST", "/search", {"question": "refund", "tenant": "B"}, {"X-API-Key": KEY_A})
    server.raw("POST", "/search", {"question": "refund"}, bearer(WRONG))
    output = capfd.readouterr()
    text = "\n".join(captured.lines) + output.out + output.err
    assert '"POST /search?x=1 HTTP/1.1" 200' in text  # the access log was captured
    assert '"POST /search HTTP/1.1" 401' in text and '"POST /search HTTP/1.1" 403' in text
    for key in KEYS:
        assert key not in text


def test_a_malformed_key_file_stops_serve_with_one_line(tmp_path: Path):
    bad = tmp_path / "keys.toml"
    bad.write_text(f'[keys]\n"{KEY_A}" = "A"\n"{KEY_A}" = "B"\n', encoding="utf-8")
    missing = tmp_path / "missing.toml"
    for path, message in (
        (bad, f"api_keys_file {str(bad)!r} is not valid TOML (at line 3, column"),
        (missing, f"api_keys_file {missing} does not exist; point api_keys_file"),
    ):
        with contextlib.chdir(tmp_path):
            result = CliRunner().invoke(
                cli, ["serve", "--port", "1"], env={"LOADER_API_KEYS_FILE": str(path)}
            )
        assert result.exit_code == ConfigError.exit_code, result.output
        assert result.stderr.startswith(f"Error: {message}")
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.output
        assert KEY_A not in result.output


def test_create_app_refuses_a_key_file_that_binds_no_key(settings, tmp_path: Path):
    empty = tmp_path / "keys.toml"
    empty.write_text("[keys]\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="holds no keys"):
        create_app(settings.replace(api_keys_file=str(empty)), load_models=False)
