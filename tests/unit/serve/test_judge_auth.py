"""The judging page's sign-in, session and same-origin token, without a cluster (nothing here
reaches one: every refusal comes before the first cluster call)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient  # noqa: E402

from loader.errors import ConfigError  # noqa: E402
from loader.serve.app import create_app  # noqa: E402
from loader.serve.auth import Sessions, session_key, session_key_file  # noqa: E402
from loader.serve.judge_page import COOKIE  # noqa: E402
from loader.settings import Settings  # noqa: E402

KEY_A = "judge-unit-key-a-0123456789"
FORM = {"content-type": "application/x-www-form-urlencoded"}


@pytest.fixture
def app_client(tmp_path: Path) -> TestClient:
    keys = tmp_path / "keys.toml"
    keys.write_text(f'[keys]\n"{KEY_A}" = "A"\n', encoding="utf-8")
    keys.chmod(0o600)
    settings = Settings(api_keys_file=str(keys), query_log="ubi", rerank="off")
    return TestClient(create_app(settings, client=object(), load_models=False))


def _signed_in(app_client, tmp_path) -> tuple[str, str]:
    """Key A's session cookie on ``app_client`` and the page's token for it."""
    login = app_client.post(
        "/judge/login", content=f"key={KEY_A}", headers=FORM, follow_redirects=False
    )
    cookie = login.cookies[COOKIE]
    return cookie, Sessions(session_key(tmp_path / "keys.toml")).csrf(cookie)


def test_the_page_needs_a_session_and_the_api_a_key(app_client):
    answer = app_client.get("/judge", follow_redirects=False)
    assert (answer.status_code, answer.headers["location"]) == (303, "/judge/login")
    assert app_client.post("/judge/sets/x/0/grade", json={}).status_code == 401
    assert app_client.get("/log").status_code == 401  # the API itself still needs a key
    login = app_client.get("/judge/login")
    assert login.status_code == 200 and 'name="key"' in login.text
    assert "script-src 'self'" in login.headers["content-security-policy"]


def test_a_wrong_key_signs_no_one_in(app_client):
    answer = app_client.post("/judge/login", content="key=nope", headers=FORM)
    assert answer.status_code == 401 and "unknown API key" in answer.text
    assert COOKIE not in answer.cookies


def test_a_session_holds_the_tenant_not_the_key_and_posts_need_the_token(app_client):
    answer = app_client.post(
        "/judge/login", content=f"key={KEY_A}", headers=FORM, follow_redirects=False
    )
    assert answer.status_code == 303
    cookie = answer.headers["set-cookie"]
    assert KEY_A not in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
    grade = {"chunk_id": "c", "grade": 2}
    refused = app_client.post("/judge/sets/x/0/grade", json=grade)
    assert refused.status_code == 403 and "X-CSRF-Token" in refused.json()["error"]
    wrong = app_client.post("/judge/sets/x/0/grade", json=grade, headers={"X-CSRF-Token": "0"})
    assert wrong.status_code == 403


def test_another_origin_cannot_sign_in(app_client):
    answer = app_client.post(
        "/judge/login",
        content=f"key={KEY_A}",
        headers={**FORM, "Origin": "http://evil.example"},
    )
    assert answer.status_code == 403


def _app(tmp_path: Path) -> TestClient:
    keys = tmp_path / "keys.toml"
    if not keys.exists():
        keys.write_text(f'[keys]\n"{KEY_A}" = "A"\n', encoding="utf-8")
        keys.chmod(0o600)
    settings = Settings(api_keys_file=str(keys), query_log="ubi", rerank="off")
    return TestClient(create_app(settings, client=object(), load_models=False))


def test_a_cookie_signed_before_a_restart_is_accepted_after(tmp_path):
    before = _app(tmp_path)
    cookie, token = _signed_in(before, tmp_path)
    after = _app(tmp_path)  # a new app: what a restart of loader serve makes
    # A set id no OpenSearch document can have: refused (404) after the session and its token
    # are accepted, before any cluster call; a session the server does not know would be a 401.
    answer = after.post(
        f"/judge/sets/{'x' * 600}/0/grade",
        json={"chunk_id": "c", "grade": 2},
        headers={"X-CSRF-Token": token},
        cookies={COOKIE: cookie},
    )
    assert answer.status_code == 404, answer.text
    assert "no query set has an id of 600 characters" in answer.json()["error"]
    key_file = session_key_file(tmp_path / "keys.toml")
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert session_key(tmp_path / "keys.toml") == bytes.fromhex(key_file.read_text())


def test_an_oversize_chunk_id_is_the_callers_fault(tmp_path):
    app_client = _app(tmp_path)
    cookie, token = _signed_in(app_client, tmp_path)
    answer = app_client.post(
        "/judge/sets/abc/0/grade",
        json={"chunk_id": "c" * 513, "grade": 2},
        headers={"X-CSRF-Token": token},
        cookies={COOKIE: cookie},
    )
    assert answer.status_code == 422 and "chunk_id: 1 to 512 bytes" in answer.text
    # A lone surrogate (a broken escape) is no chunk's id: OpenSearch refused the term query
    # with a 400, which answered 502.
    answer = app_client.post(
        "/judge/sets/abc/0/grade",
        content='{"chunk_id": "c\\ud800", "grade": 2}',
        headers={"X-CSRF-Token": token, "content-type": "application/json"},
        cookies={COOKIE: cookie},
    )
    assert answer.status_code == 422 and "chunk_id" in answer.text, answer.text


@pytest.mark.parametrize("problem", ["group-readable", "symlink", "fifo", "not a key"])
def test_a_session_key_file_that_is_not_private_and_whole_is_refused(tmp_path, problem):
    keys = tmp_path / "keys.toml"
    key_file = session_key_file(keys)
    if problem == "group-readable":
        key_file.write_text("ab" * 32)
        key_file.chmod(0o640)
    elif problem == "symlink":
        (tmp_path / "elsewhere").write_text("ab" * 32)
        (tmp_path / "elsewhere").chmod(0o600)
        key_file.symlink_to(tmp_path / "elsewhere")
    elif problem == "fifo":
        os.mkfifo(key_file, 0o600)
    else:
        key_file.write_text("not a key")
        key_file.chmod(0o600)
    with pytest.raises(ConfigError) as caught:
        session_key(keys)
    message = str(caught.value)
    assert str(key_file) in message and "ab" * 32 not in message


def test_a_folder_that_takes_no_key_file_keeps_a_key_per_process(tmp_path, caplog):
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("root writes anywhere")
        assert session_key(folder / "keys.toml") is None
    finally:
        folder.chmod(0o700)
    assert "signs every judge out" in caplog.text


@pytest.mark.parametrize(
    "cookie, token",
    [("\xe9.1.\xe9", None), ("forged.1.sig", "\xe9" * 64), (None, "\xe9" * 64)],
    ids=["cookie", "token-without-session", "token"],
)
def test_a_cookie_or_token_beyond_ascii_is_refused_not_a_500(app_client, cookie, token):
    """Header values arrive as Latin-1 text; hmac.compare_digest raises TypeError on
    non-ASCII strings, which answered 500 before the comparison was made on bytes."""
    forged = cookie is not None
    if not forged:  # a real session, a forged token
        signed_in = app_client.post(
            "/judge/login", content=f"key={KEY_A}", headers=FORM, follow_redirects=False
        )
        cookie = signed_in.cookies[COOKIE]
        app_client.cookies.clear()
    headers = {"cookie": f"{COOKIE}={cookie}".encode("latin-1")}
    if token is not None:
        headers["x-csrf-token"] = token.encode("latin-1")
    grade = app_client.post(
        "/judge/sets/x/0/grade", json={"chunk_id": "c", "grade": 2}, headers=headers
    )
    assert grade.status_code == (401 if forged else 403), grade.text
    if forged:  # signed out: sent to the sign-in page (a session would ask the cluster)
        page = app_client.get("/judge", headers=headers, follow_redirects=False)
        assert (page.status_code, page.headers["location"]) == (303, "/judge/login")


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/judge/sets/abc/0/need", '{"need": "what \\ud800 it asks"}', "need"),
        ("/judge/sets/abc/0/grade", '{"chunk_id": "c", "grade": 1, "note": "x \\udfff"}', "note"),
        ("/judge/sets/abc/0/grade", '{"chunk_id": "c", "grade": "?", "note": "\\ud83d"}', "reason"),
    ],
)
def test_a_note_or_need_holding_a_lone_surrogate_is_refused_before_it_is_stored(
    tmp_path, path, body, field
):
    """A need holding a lone surrogate (a broken escape, as a pasted half of an emoji sends)
    was stored, answered 500, and then every look at the question (its page, for every rater
    of the tenant) and `loader judgments export` failed on it: refused first, naming the field,
    before any cluster call."""
    app_client = _app(tmp_path)
    cookie, token = _signed_in(app_client, tmp_path)
    answer = app_client.post(
        path,
        content=body,
        headers={"X-CSRF-Token": token, "content-type": "application/json"},
        cookies={COOKIE: cookie},
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"].startswith(f"{field}: ") and "surrogate" in answer.text
