"""`loader serve` without a cluster: the API key file, the constant-time lookup, the key headers,
the mapping of cluster failures to statuses and public messages, and the body as a thin layer
over the library's request."""

from __future__ import annotations

import logging
import socket
import stat
from pathlib import Path

import opensearchpy
import pytest

pytest.importorskip("fastapi")

from loader.cluster.client import cluster_errors  # noqa: E402
from loader.errors import ConfigError, LoaderError, QueryError  # noqa: E402
from loader.query.request import EXPANSIONS, SearchFilters, SearchRequest  # noqa: E402
from loader.serve import app as serve  # noqa: E402
from loader.serve import auth  # noqa: E402
from loader.serve import body as body_models  # noqa: E402
from loader.serve import service as service_module  # noqa: E402
from loader.serve.app import create_app  # noqa: E402
from loader.serve.auth import ApiKeys, presented_key  # noqa: E402
from loader.settings import SEARCH_MODES, Settings  # noqa: E402

KEY_A = "key-a-0123456789abcdef"
KEY_A2 = "key-a-second-0123456789"
KEY_B = "key-b-0123456789abcdef"
GOOD = f'[keys]\n"{KEY_A}" = "A"\n"{KEY_A2}" = "A"  # a second key\n"{KEY_B}" = "B"\n'


def write(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "api-keys.toml"
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return path


def test_key_file_binds_keys_to_tenants(tmp_path: Path) -> None:
    keys = ApiKeys.from_file(write(tmp_path, GOOD))
    assert len(keys) == 3 and keys.tenants == ["A", "B"]
    assert keys.tenant_for(KEY_A) == "A" and keys.tenant_for(KEY_A2) == "A"
    assert keys.tenant_for(KEY_B) == "B"
    for unknown in ("", None, KEY_A[:-1], KEY_A + "x", KEY_A.upper(), " " + KEY_A, "A", "B"):
        assert keys.tenant_for(unknown) is None, unknown


def test_keys_are_kept_only_as_digests(tmp_path: Path) -> None:
    keys = ApiKeys.from_file(write(tmp_path, GOOD))
    assert KEY_A not in repr(keys) and KEY_A not in str(vars(keys))
    assert all(len(digest) == 32 for digest, _tenant, _name in keys._entries)


def test_lookup_compares_every_key_in_constant_time(monkeypatch) -> None:
    keys = ApiKeys([(KEY_A, "A"), (KEY_A2, "A"), (KEY_B, "B")])
    calls: list[tuple[bytes, bytes]] = []
    real = auth.hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        assert len(a) == len(b) == 32  # digests: equal lengths whatever the key's length
        return real(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", counting)
    for key, tenant in ((KEY_A, "A"), (KEY_B, "B"), ("wrong-key-0123456789", None), ("x", None)):
        calls.clear()
        assert keys.tenant_for(key) == tenant
        assert len(calls) == 3  # no early exit on a match or a mismatch


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "holds no keys"),
        ("[keys]\n", "holds no keys"),
        ("keys = 3\n", "holds no keys"),
        (f'"{KEY_A}" = "A"\n', "entries outside the [keys] table"),
        (f'[keys]\n"{KEY_A}" = "A"\n[other]\nx = 1\n', "entries outside the [keys] table"),
        (f'[keys]\n"{KEY_A}" = \n', "is not valid TOML (at line 2, column 28)"),
        (f'[keys]\n"{KEY_A}" = "A"\n"{KEY_A}" = "B"\n', "is not valid TOML"),
        (f'[keys."{KEY_A}"]\n[keys."{KEY_A}"]\n', "is not valid TOML"),
        (f'{{"{KEY_A}": "A"}}', "is not valid TOML"),  # JSON is not the format
        (f'[keys]\n"{KEY_A}" = ""\n', "the tenant of key number 1 is not a non-empty string"),
        (f'[keys]\n"{KEY_A}" = 7\n', "the tenant of key number 1 is not a non-empty string"),
        # every search with the key would be refused: no caller could do anything about it
        (f'[keys]\n"{KEY_A}" = "acme "\n', "key number 1 must not start or end with whitespace"),
        (f'[keys]\n"{KEY_A}" = "A"\n"shrt" = "B"\n', "key number 2 (tenant 'B') is not 16"),
        ('[keys]\n"with blank 0123456789" = "A"\n', "key number 1 (tenant 'A') is not 16"),
        ('[keys]\n"ключ-0123456789abcdef" = "A"\n', "printable ASCII"),
        (f'[keys]\n"{KEY_A}" = "{"t" * 300}"\n', "longer than 256 characters"),
    ],
)
def test_malformed_key_files_name_the_file_never_a_key(tmp_path, text, message) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as raised:
        ApiKeys.from_file(path)
    error = str(raised.value)
    assert error.startswith(f"api_keys_file {str(path)!r}") and message in error, error
    assert KEY_A not in error and "shrt" not in error and "blank" not in error
    assert "ключ" not in error and "\n" not in error


def test_missing_or_unreadable_key_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigError, match=r"^api_keys_file .*nope.toml does not exist; point"):
        ApiKeys.from_file(missing)
    with pytest.raises(ConfigError, match="is a directory, not a regular file"):
        ApiKeys.from_file(tmp_path)
    binary = tmp_path / "keys.bin"
    binary.write_bytes(b"\xff\xfe[keys]")
    with pytest.raises(ConfigError, match="is not UTF-8 text"):
        ApiKeys.from_file(binary)


def test_a_key_file_others_can_read_is_warned_about(tmp_path, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="loader.serve.auth"):
        ApiKeys.from_file(write(tmp_path, GOOD, mode=0o644))
    assert "can be read by other users; chmod 600" in caplog.text
    assert KEY_A not in caplog.text
    caplog.clear()
    path = write(tmp_path, GOOD, mode=stat.S_IRUSR | stat.S_IWUSR)
    with caplog.at_level(logging.WARNING, logger="loader.serve.auth"):
        ApiKeys.from_file(path)
    assert caplog.text == ""


def test_create_app_reads_the_key_file_up_front(tmp_path: Path) -> None:
    path = write(tmp_path, f'[keys]\n"{KEY_A}" = \n')
    settings = Settings(api_keys_file=str(path))
    with pytest.raises(ConfigError, match="is not valid TOML") as raised:
        create_app(settings, client=object(), load_models=False)
    assert KEY_A not in str(raised.value)
    with pytest.raises(ConfigError, match="does not exist"):
        create_app(Settings(api_keys_file=str(tmp_path / "missing.toml")), load_models=False)
    assert create_app(Settings(api_keys_file=str(write(tmp_path, GOOD))), load_models=False)


@pytest.mark.parametrize(
    ("headers", "key", "reason"),
    [
        ({"authorization": f"Bearer {KEY_A}"}, KEY_A, None),
        ({"authorization": f"bearer   {KEY_A} "}, KEY_A, None),
        ({"x-api-key": KEY_A}, KEY_A, None),
        ({"authorization": f"Bearer {KEY_A}", "x-api-key": KEY_A}, KEY_A, None),
        ({"authorization": f"Bearer {KEY_A}", "x-api-key": KEY_B}, None, "disagree"),
        ({"authorization": f"Basic {KEY_A}"}, None, "must be 'Bearer <key>'"),
        ({"authorization": "Bearer "}, None, "must be 'Bearer <key>'"),
        ({"authorization": KEY_A}, None, "must be 'Bearer <key>'"),
        ({}, None, "an API key is required"),
        ({"x-api-key": "  "}, None, "an API key is required"),
    ],
)
def test_presented_key(headers, key, reason) -> None:
    got_key, got_reason = presented_key(headers)
    assert got_key == key
    assert (got_reason is None) == (reason is None)
    if reason:
        assert reason in got_reason and KEY_A not in got_reason and KEY_B not in got_reason


def _cluster_error(cause: Exception) -> LoaderError:
    """What ``cluster_errors`` makes of ``cause`` on a cluster whose URL holds a user."""
    settings = Settings(opensearch_url="http://admin@10.0.0.7:9200")
    try:
        with cluster_errors(settings, "searching"):
            raise cause
    except LoaderError as error:
        return error
    raise AssertionError("cluster_errors let the exception through")


@pytest.mark.parametrize(
    ("cause", "status", "message"),
    [
        (opensearchpy.ConnectionTimeout("TIMEOUT", "read timed out", None), 503, "in time"),
        (opensearchpy.ConnectionError("N/A", "refused", None), 503, "cannot connect"),
        (opensearchpy.SSLError("N/A", "bad cert", None), 503, "cannot connect"),
        (opensearchpy.TransportError(429, "too_many", {}), 503, "overloaded"),
        (opensearchpy.AuthenticationException(401, "x", {}), 502, "credentials"),
        (opensearchpy.NotFoundError(404, "index_not_found", {}), 502, "loader apply"),
        (opensearchpy.TransportError(500, "boom", {"error": "stack"}), 502, "failed the request"),
    ],
)
def test_cluster_failures_map_to_statuses_without_the_url(cause, status, message) -> None:
    error = _cluster_error(cause)
    got_status, got_message = error.http_status, error.public_message
    assert got_status == status and message in got_message
    assert "10.0.0.7" not in got_message and "admin" not in got_message
    assert "stack" not in got_message and "details" not in got_message


def test_a_bad_request_is_a_400_with_the_servers_reason() -> None:
    error = QueryError("OpenSearch refused the search as a bad request: parse_exception: bad")
    assert (error.http_status, error.public_message) == (400, str(error))


def test_the_body_becomes_the_librarys_request_with_the_settings_defaults() -> None:
    settings = Settings(search_mode="bm25", rerank=False, top_k=3, candidates=9)
    body = serve.SearchRequest.model_validate({"question": "refund", "tenant": "A"})
    request = body.to_request(settings, "A")
    assert isinstance(request, SearchRequest)
    assert (request.mode, request.rerank, request.k, request.candidates) == ("bm25", False, 3, 9)
    full = serve.SearchRequest.model_validate(
        {
            "question": "refund",
            "tenant": "A",
            "mode": "vector",
            "rerank": True,
            "k": 2,
            "filters": {"tags": ["billing"], "published_from": "now-1y"},
            "expand": "parent",
            "prompt_order": True,
        }
    )
    request = full.to_request(settings, "A")
    assert (request.mode, request.rerank, request.k, request.expand) == (
        "vector",
        True,
        2,
        "parent",
    )
    assert request.filters == SearchFilters(tags=("billing",), published_from="now-1y")
    assert request.prompt_order and not request.merge_adjacent


def test_the_library_checks_what_pydantic_lets_through() -> None:
    body = serve.SearchRequest.model_validate(
        {"question": " ", "tenant": "A", "filters": {"published_from": "2020-13-45"}}
    )
    with pytest.raises(ConfigError, match="question is empty"):
        body.to_request(Settings(), "A")


def test_the_body_types_come_from_the_settings_and_the_request() -> None:
    assert body_models.SearchMode.__args__ == SEARCH_MODES
    assert body_models.Expansion.__args__ == EXPANSIONS
    schema = body_models.SearchRequest.model_json_schema()
    modes = [option for option in schema["properties"]["mode"]["anyOf"] if "enum" in option]
    assert modes[0]["enum"] == list(SEARCH_MODES)


def test_serve_on_a_port_in_use_is_a_config_error_not_the_clusters_code() -> None:
    from click.testing import CliRunner

    from loader.cli import cli

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=rf"^cannot listen on 127\.0\.0\.1:{port} \("):
            serve.run_server(Settings(), port=port)
        result = CliRunner().invoke(cli, ["serve", "--port", str(port)])
    assert result.exit_code == 2, result.output
    assert "choose another --host or --port" in result.output
    with pytest.raises(ConfigError, match=r"^cannot listen on 203\.0\.113\.7:"):
        serve.run_server(Settings(), host="203.0.113.7")  # TEST-NET-3: no interface has it


def test_the_client_has_a_connection_per_search_thread() -> None:
    # Under 40 concurrent searches a pool of urllib3's default 10 discarded connections.
    import anyio
    import anyio.to_thread

    async def threads() -> float:
        return anyio.to_thread.current_default_thread_limiter().total_tokens

    assert anyio.run(threads) == service_module.SEARCH_THREADS
    service = service_module.SearchService(Settings(), None, None, None)
    service.start(load_models=False)  # connects; no request is sent
    (connection,) = service.client.transport.connection_pool.connections
    assert connection.pool.pool.maxsize == service_module.SEARCH_THREADS


class _FailingClient:
    """A client whose every call raises what no route expects, quoting the cluster's password."""

    def __getattr__(self, name: str):
        raise RuntimeError(f"{name} failed for https://admin:{PASSWORD}@10.0.0.7")


PASSWORD = "Sw0rdfish-Zq81x"


def test_whatever_a_route_raises_is_a_500_in_the_apis_shape_its_log_masked(caplog) -> None:
    from fastapi.testclient import TestClient

    settings = Settings(
        opensearch_url=f"https://admin:{PASSWORD}@10.0.0.7:9200", query_log="ubi", rerank="off"
    )
    app = create_app(settings, client=_FailingClient(), load_models=False)
    with caplog.at_level(logging.WARNING), TestClient(app) as http:
        answer = http.get("/log", params={"tenant": "A"})
        event = http.post("/events", json={"query_id": "q", "action_name": "click", "tenant": "A"})
    for response in (answer, event):
        assert response.status_code == 500
        assert response.json() == {"error": "the server failed; its log has the reason"}
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "RuntimeError" in logged and "answering GET /log" in logged
    assert PASSWORD not in logged and "Sw0rdfish" not in logged


class _LoggingClient:
    """``FakeClient``'s answers, and a query log that keeps what is written to it."""

    def __init__(self) -> None:
        from tests.unit.query.fakes import CORPUS, FakeClient

        self.searches = FakeClient({"q": CORPUS, "r": CORPUS})
        self.logged: list[dict] = []
        self.indices = self  # indices.exists: the log exists

    def exists(self, index: str) -> bool:
        return True

    def search_template(self, **kwargs):
        return self.searches.search_template(**kwargs)

    def index(self, *, index: str, id: str, body: dict) -> dict:
        self.logged.append(body)
        return {"result": "created"}


def test_a_search_answer_names_its_reranker_and_logs_the_clients_session() -> None:
    """Issue #52: ``POST /search`` refused a ``client_id`` (422), so every search served was
    logged with client_id "" and the ``worst`` sampler took them all for one user's follow-ups;
    and the answer did not say which reranker ran."""
    from fastapi.testclient import TestClient

    from loader.query.judgments import sample_questions
    from tests.unit.query.fakes import SETTINGS, FakeEmbedder, FakeReranker

    settings = SETTINGS.replace(query_log="ubi", index_name="docs-log-test")
    client = _LoggingClient()
    app = create_app(
        settings,
        client=client,
        embedder=FakeEmbedder(),
        reranker=FakeReranker(),
        load_models=False,
    )
    with TestClient(app) as http:
        first = http.post("/search", json={"question": "r", "tenant": "A", "client_id": "u-1"})
        second = http.post("/search", json={"question": "q", "tenant": "A", "client_id": "u-2"})
        off = http.post("/search", json={"question": "q", "tenant": "A", "rerank": False})
        refused = [
            http.post("/search", json={"question": "q", "tenant": "A", "client_id": bad})
            for bad in ("two words", "x" * 129, 5)
        ]
    assert first.status_code == second.status_code == 200, first.text
    assert first.json()["reranker"] == {"kind": "fake", "model": "fake"}
    assert first.json()["rerank_skipped"] == ""
    assert (off.json()["reranker"], off.json()["rerank_skipped"]) == (None, "off")
    assert [answer.status_code for answer in refused] == [422, 422, 422]
    assert all("client_id" in answer.text for answer in refused)
    logged = client.logged
    assert [entry["client_id"] for entry in logged] == ["u-1", "u-2", ""]
    assert logged[0]["query_attributes"]["reranker"] == {"kind": "fake", "model": "fake"}
    # Two users a second apart: "q" of u-2 is no follow-up of "r" of u-1, so the worst sampler
    # ranks them alike (by name); one user's "r" then "q" makes "r" the worse (followed up).
    timed = [entry | {"timestamp": f"2026-12-03T07:00:0{n}.000Z"} for n, entry in enumerate(logged)]
    assert sample_questions(timed[:2], [], 2, "worst") == ["q", "r"]
    one_user = [entry | {"client_id": "u-1"} for entry in timed[:2]]
    assert sample_questions(one_user, [], 2, "worst") == ["r", "q"]


def test_a_key_may_name_its_holder(tmp_path: Path) -> None:
    text = (
        f'[keys]\n"{KEY_A}" = {{ tenant = "A", name = "alice" }}\n"{KEY_A2}" = "A"\n'
        f'"{KEY_B}" = {{ tenant = "B" }}\n'
    )
    keys = ApiKeys.from_file(write(tmp_path, text))
    assert keys.holder_for(KEY_A) == ("A", "alice")
    assert keys.holder_for(KEY_A2) == ("A", "key 2")  # unnamed: its position
    assert keys.holder_for(KEY_B) == ("B", "key 3")
    assert keys.tenant_for(KEY_A) == "A" and keys.holder_for("unknown-key-0123456789") is None


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('{ tenant = "A", name = "" }', "the name of key number 1 is not 1 to 64 printable"),
        ('{ tenant = "A", name = 3 }', "the name of key number 1 is not 1 to 64 printable"),
        ('{ tenant = "A", name = "a\\u0000b" }', "the name of key number 1 is not 1 to 64"),
        ('{ tenant = "A", role = "x" }', "key number 1 has fields other than tenant and name"),
        ('{ name = "alice" }', "the tenant of key number 1 is not a non-empty string"),
    ],
)
def test_a_bad_name_or_table_is_refused_naming_the_key_number(
    tmp_path: Path, entry: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        ApiKeys.from_file(write(tmp_path, f'[keys]\n"{KEY_A}" = {entry}\n'))
    assert KEY_A not in str(info.value)


@pytest.mark.parametrize(
    ("path", "content_type", "body", "said"),
    [
        # curl -d without -H sends a form's type: the JSON in it was never read.
        ("/search", "application/x-www-form-urlencoded", '{"question": "q", "tenant": "A"}',
         "Content-Type: application/json"),
        ("/search", "text/plain", '{"question": "q", "tenant": "A"}', "Content-Type"),
        ("/events", "multipart/form-data; boundary=x", '{"query_id": "q"}', "Content-Type"),
        ("/search", "application/json", "", "the body is empty"),
        ("/search", "application/json", "[]", "the body must be a JSON object"),
    ],
)  # fmt: skip
def test_a_body_that_is_no_json_object_says_what_to_send(path, content_type, body, said) -> None:
    """The 422 of a body FastAPI never read as JSON (no JSON Content-Type), an empty body or a
    JSON array said only "Input should be a valid dictionary or object to extract fields from"
    (or "Field required") naming no field: nothing told the caller what to change."""
    from fastapi.testclient import TestClient

    app = create_app(Settings(query_log="ubi", rerank="off"), client=object(), load_models=False)
    with TestClient(app) as http:
        answer = http.post(path, content=body, headers={"content-type": content_type})
    assert answer.status_code == 422, answer.text
    assert said in answer.json()["error"], answer.json()
