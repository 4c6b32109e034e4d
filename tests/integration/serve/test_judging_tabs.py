"""One rater's question open in two tabs of one browser, in Debian's headless Chromium: a grade
stored in one tab shows in the other (a BroadcastChannel; the other tab's re-read of its grades
is refused in that test, so only the message can tell it), an undo in the other tab never saves
again the grade the first one replaced, and a grade stored from another device (a plain HTTP
session) shows once the tab is looked at again (``GET /judge/sets/<id>/<n>/grades``). Each
failed before the page told its tabs, each kept the grade shown when it was opened.

And the route itself against the real node: the signed-in rater's grades and "can't tell" of
one question, 401 without a session, 404 for another tenant's set (as for one that does not
exist) and for a question the set does not have.

Reuses the index, keys and browser of ``test_judging_browser`` (its fixtures, imported).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.integration.serve.http_server import signed_in
from tests.integration.serve.test_judging_browser import (  # noqa: F401 (fixtures)
    KEY_A,
    KEY_B,
    _import_set,
    _sign_in,
    _stored,
    _wait,
    browser,
    judged,
    server,
)

pytestmark = pytest.mark.integration

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as ec  # noqa: E402

QUESTION = ["refund to the original payment method"]
SHOWN_SECONDS = 15  # a message between tabs, or a re-read, takes well under a second


@pytest.fixture
def two_tabs(browser) -> Iterator[tuple[str, str]]:  # noqa: F811
    """The browser's window handles of its first tab and a second one; the second is closed
    after the test."""
    first = browser.current_window_handle
    browser.switch_to.new_window("tab")
    second = browser.current_window_handle
    try:
        yield first, second
    finally:
        browser.switch_to.window(second)
        browser.close()
        browser.switch_to.window(first)


def _open(driver, port: int, set_id: str) -> list:
    driver.get(f"http://127.0.0.1:{port}/judge/sets/{set_id}/0")
    return _wait(driver, ec.presence_of_all_elements_located((By.CSS_SELECTOR, ".result")))


def _press(driver, key: str) -> None:
    """``key`` on the page, and back once every grade is stored."""
    driver.find_element(By.TAG_NAME, "body").send_keys(key)
    status = driver.find_element(By.ID, "status")
    _wait(driver, lambda d: status.text == "saved")


def _shows(driver, chunk_id: str, grade: str) -> bool:
    """Whether the row of ``chunk_id`` shows ``grade`` (``""``: ungraded) as its stored one."""
    row = driver.find_element(By.CSS_SELECTOR, f'.result[data-chunk-id="{chunk_id}"]')
    chosen = [b.get_attribute("data-grade") for b in row.find_elements(By.CSS_SELECTOR, ".chosen")]
    return row.get_attribute("data-grade") == grade and chosen == ([grade] if grade else [])


def _refuse_rereads(driver) -> None:
    """This page's GET of its grades fails as an unreachable server's would: only another
    tab's message can change what it shows."""
    driver.execute_script(
        "const fetched = window.fetch;"
        "window.fetch = (url, options) => String(url).endsWith('/grades')"
        "  ? Promise.reject(new TypeError('refused by the test')) : fetched(url, options);"
    )


def test_a_grade_stored_in_one_tab_shows_in_the_other(
    judged,  # noqa: F811
    server,  # noqa: F811
    browser,  # noqa: F811
    two_tabs,
    client,
    tmp_path,
):
    settings, _, _ = judged
    first, second = two_tabs
    set_id = _import_set(settings, tmp_path, "two-tabs", QUESTION)
    browser.switch_to.window(first)
    _sign_in(browser, server, KEY_A)
    rows = _open(browser, server.port, set_id)
    chunk = rows[0].get_attribute("data-chunk-id")
    browser.switch_to.window(second)
    _open(browser, server.port, set_id)
    _refuse_rereads(browser)
    assert _shows(browser, chunk, "")

    browser.switch_to.window(first)
    _press(browser, "2")  # the first result, selected on load
    assert _stored(client, settings, set_id) == {chunk: 2}
    browser.switch_to.window(second)
    _wait(browser, lambda d: _shows(d, chunk, "2"), SHOWN_SECONDS)
    # A key there is a change again: 1 replaces the 2 the first tab stored.
    _press(browser, "1")
    assert _stored(client, settings, set_id) == {chunk: 1}
    browser.switch_to.window(first)
    _wait(browser, lambda d: _shows(d, chunk, "1"), SHOWN_SECONDS)


def test_undo_never_saves_again_a_grade_another_tab_replaced(
    judged,  # noqa: F811
    server,  # noqa: F811
    browser,  # noqa: F811
    two_tabs,
    client,
    tmp_path,
):
    settings, _, _ = judged
    first, second = two_tabs
    set_id = _import_set(settings, tmp_path, "undo-two-tabs", QUESTION)
    browser.switch_to.window(first)
    _sign_in(browser, server, KEY_A)
    rows = _open(browser, server.port, set_id)
    chunk = rows[0].get_attribute("data-chunk-id")
    _press(browser, "0")  # stored before either tab's change below
    browser.switch_to.window(second)
    _open(browser, server.port, set_id)
    _press(browser, "1")  # the second tab's change: its undo would save 0 again
    assert _stored(client, settings, set_id) == {chunk: 1}

    browser.switch_to.window(first)
    button = f'.result[data-chunk-id="{chunk}"] .grade[data-grade="2"]'
    browser.find_element(By.CSS_SELECTOR, button).click()
    _wait(browser, lambda d: browser.find_element(By.ID, "status").text == "saved")
    assert _stored(client, settings, set_id) == {chunk: 2}

    browser.switch_to.window(second)
    _press(browser, "u")  # the first tab replaced that change: nothing of it is left to undo
    assert _stored(client, settings, set_id) == {chunk: 2}
    assert _shows(browser, chunk, "2")


def test_a_grade_stored_elsewhere_shows_once_the_tab_is_looked_at_again(
    judged,  # noqa: F811
    server,  # noqa: F811
    browser,  # noqa: F811
    two_tabs,
    client,
    tmp_path,
):
    settings, _, _ = judged
    first, second = two_tabs
    set_id = _import_set(settings, tmp_path, "other-device", QUESTION)
    browser.switch_to.window(first)
    _sign_in(browser, server, KEY_A)
    rows = _open(browser, server.port, set_id)
    chunk, note = rows[1].get_attribute("data-chunk-id"), "the policy, not the steps"
    browser.switch_to.window(second)  # the rater looks at another tab meanwhile
    # Another device of the same rater (its own session, no tab of this browser) stores a grade.
    cookie, token = signed_in(server, KEY_A)
    status, body = server.raw(
        "POST",
        f"/judge/sets/{set_id}/0/grade",
        {"chunk_id": chunk, "grade": 1, "note": note},
        {"Cookie": cookie, "X-CSRF-Token": token},
    )
    assert status == 200, body
    assert _stored(client, settings, set_id) == {chunk: 1}

    browser.switch_to.window(first)  # back to the question's tab
    _wait(browser, lambda d: _shows(d, chunk, "1"), SHOWN_SECONDS)
    field = browser.find_element(By.CSS_SELECTOR, f'.result[data-chunk-id="{chunk}"] .note')
    assert field.get_attribute("value") == note


def test_the_grades_route_answers_the_rater_of_the_tenant_only(
    judged,  # noqa: F811
    server,  # noqa: F811
    client,
    tmp_path,
):
    settings, _, _ = judged
    set_id = _import_set(settings, tmp_path, "grades-route", QUESTION)
    cookie, token = signed_in(server, KEY_A)
    page = server.raw("GET", f"/judge/sets/{set_id}/0", headers={"Cookie": cookie})[1]
    chunks = [part.split('"')[0] for part in page.split('data-chunk-id="')[1:]]
    assert len(chunks) >= 2
    path = f"/judge/sets/{set_id}/0"
    status, body = server.raw("GET", f"{path}/grades", headers={"Cookie": cookie})
    assert (status, json.loads(body)) == (200, {"grades": {}})
    for chunk, grade, note in ((chunks[0], 2, ""), (chunks[1], "?", "two policies disagree")):
        status, body = server.raw(
            "POST",
            f"{path}/grade",
            {"chunk_id": chunk, "grade": grade, "note": note},
            {"Cookie": cookie, "X-CSRF-Token": token},
        )
        assert status == 200, body
    status, body = server.raw("GET", f"{path}/grades", headers={"Cookie": cookie})
    assert status == 200, body
    assert json.loads(body) == {
        "grades": {
            chunks[0]: {"grade": 2, "note": ""},
            chunks[1]: {"grade": "?", "note": "two policies disagree"},
        }
    }
    assert _stored(client, settings, set_id) == {chunks[0]: 2}  # what the node holds

    status, body = server.raw("GET", f"{path}/grades")  # no session
    assert status == 401, body
    cookie_b, _ = signed_in(server, KEY_B)
    status, body = server.raw("GET", f"{path}/grades", headers={"Cookie": cookie_b})
    assert status == 404, body  # as for a set that does not exist: B learns nothing of A's
    assert chunks[0] not in body and "two policies" not in body
    status, body = server.raw("GET", f"/judge/sets/{set_id}/7/grades", headers={"Cookie": cookie})
    assert status == 404, body
