"""The judging page's sign-in, session and same-origin token, without a cluster (nothing here
reaches one: every refusal comes before the first cluster call)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient  # noqa: E402

from loader.query.judge_page import COOKIE  # noqa: E402
from loader.query.serve import create_app  # noqa: E402
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
