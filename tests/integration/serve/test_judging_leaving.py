"""A fast rater on the judging page, in Debian's headless Chromium: a key pressed while the next
question is still opening grades nothing on the question being left (it once graded the selected
result there: a grade meant for the next question, stored on this one), and a click on a grade
button never scrolls the page under the pointer (the selection moved on and scrolled the next
result into view, so the second click of a double-click could land on another result); and a
double-click is one grade, which one u undoes.

Reuses the index, keys and browser of ``test_judging_browser`` (its fixtures, imported).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator

import pytest

from loader.serve.app import create_app
from tests.integration.serve.http_server import Server
from tests.integration.serve.test_judging_browser import (  # noqa: F401 (fixtures)
    KEY_A,
    _import_set,
    _sign_in,
    _stored,
    _wait,
    browser,
    judged,
    server,
)
from tests.integration.serve.test_judging_workbench import laptop_window  # noqa: F401

pytestmark = pytest.mark.integration

from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as ec  # noqa: E402

QUESTIONS = ["refund to the original payment method", "card payments accepted"]
_SECOND_QUESTION = re.compile(r"^/judge/sets/[^/]+/1$")


class HeldQuestion:
    """A middleware that holds the page of question 1 (``GET /judge/sets/<id>/1``) while
    ``held`` (at most 60 s): a next question as slow to open as the test needs."""

    def __init__(self) -> None:
        self.held = False

    async def __call__(self, request, call_next):
        if request.method == "GET" and _SECOND_QUESTION.match(request.url.path):
            for _ in range(600):
                if not self.held:
                    break
                await asyncio.sleep(0.1)
        return await call_next(request)


@pytest.fixture(scope="module")
def slow_next(judged, embedder) -> Iterator[tuple[Server, HeldQuestion]]:  # noqa: F811
    settings, _, _ = judged
    app = create_app(settings, embedder=embedder)
    held = HeldQuestion()
    app.middleware("http")(held)
    with Server(app) as running:
        yield running, held


def _press(driver, *keys: str, gap_ms: int) -> None:
    """Press ``keys`` on the page ``gap_ms`` apart, from the page's own timers (the driver
    would wait for a navigation to finish before sending the next key itself). The first waits
    ``gap_ms`` too: pressed at once, a key that navigates started the navigation before the
    script's command returned, and chromedriver held that command until the held page was let
    go, which the test can only do once it returns (the 60 s cap: the test took 63 s)."""
    driver.execute_script(
        "const keys = arguments[0], gap = arguments[1];"
        "keys.forEach((key, i) => setTimeout(() => document.body.dispatchEvent("
        "  new KeyboardEvent('keydown', {key: key, bubbles: true})), (i + 1) * gap));",
        list(keys),
        gap_ms,
    )


def test_a_key_pressed_while_the_next_question_opens_grades_nothing_here(
    judged,  # noqa: F811
    slow_next,
    browser,  # noqa: F811
    client,
    tmp_path,
):
    settings, _, _ = judged
    running, held = slow_next
    set_id = _import_set(settings, tmp_path, "leaving", QUESTIONS)
    _sign_in(browser, running, KEY_A)
    browser.get(f"http://127.0.0.1:{running.port}/judge/sets/{set_id}/0")
    _wait(browser, ec.presence_of_all_elements_located((By.CSS_SELECTOR, ".result")))
    held.held = True
    try:
        _press(browser, "ArrowRight", "2", "0", gap_ms=300)  # 2 and 0: meant for question 2
        time.sleep(2)  # the keys are pressed, question 2 is still opening
        assert _stored(client, settings, set_id) == {}
    finally:
        held.held = False
    _wait(browser, ec.url_contains(f"/judge/sets/{set_id}/1"))
    _wait(browser, ec.presence_of_all_elements_located((By.CSS_SELECTOR, ".result")))
    assert _stored(client, settings, set_id) == {}


def test_a_click_grades_without_moving_the_page(
    judged,  # noqa: F811
    server,  # noqa: F811
    laptop_window,  # noqa: F811
    client,
    tmp_path,
):
    settings, _, _ = judged
    driver = laptop_window
    set_id = _import_set(settings, tmp_path, "clicks", QUESTIONS[:1])
    _sign_in(driver, server, KEY_A)
    driver.get(f"http://127.0.0.1:{server.port}/judge/sets/{set_id}/0")
    rows = _wait(driver, ec.presence_of_all_elements_located((By.CSS_SELECTOR, ".result")))
    assert len(rows) >= 3
    button = rows[1].find_element(By.CSS_SELECTOR, '.grade[data-grade="1"]')
    # The second result's button just above the status bar, the third result under it.
    bar = driver.find_element(By.ID, "statusbar").rect["y"]
    driver.execute_script(
        "window.scrollBy(0, arguments[0].getBoundingClientRect().bottom - arguments[1] + 4)",
        button,
        bar,
    )
    before = driver.execute_script("return window.scrollY")
    third = driver.execute_script("return arguments[0].getBoundingClientRect().bottom", rows[2])
    assert third > bar  # under the status bar: selecting it by key scrolls it into view
    ActionChains(driver).move_to_element(button).click().perform()
    status = driver.find_element(By.ID, "status")
    _wait(driver, lambda d: status.text == "saved")
    assert driver.execute_script("return window.scrollY") == before  # nothing moved
    assert "selected" in rows[2].get_attribute("class")  # the selection moved on, unscrolled
    ActionChains(driver).click().perform()  # the same place: the same button
    _wait(driver, lambda d: status.text == "saved")
    chunk = rows[1].get_attribute("data-chunk-id")
    assert _stored(client, settings, set_id) == {chunk: 1}


def test_a_double_click_is_one_grade_which_one_undo_takes_back(
    judged,  # noqa: F811
    server,  # noqa: F811
    browser,  # noqa: F811
    client,
    tmp_path,
):
    settings, _, _ = judged
    set_id = _import_set(settings, tmp_path, "double", QUESTIONS[:1])
    _sign_in(browser, server, KEY_A)
    browser.get(f"http://127.0.0.1:{server.port}/judge/sets/{set_id}/0")
    rows = _wait(browser, ec.presence_of_all_elements_located((By.CSS_SELECTOR, ".result")))
    button = rows[0].find_element(By.CSS_SELECTOR, '.grade[data-grade="2"]')
    ActionChains(browser).double_click(button).perform()
    status = browser.find_element(By.ID, "status")
    _wait(browser, lambda d: status.text == "saved")
    chunk = rows[0].get_attribute("data-chunk-id")
    assert _stored(client, settings, set_id) == {chunk: 2}
    browser.find_element(By.TAG_NAME, "body").send_keys("u")  # one undo: ungraded again
    _wait(browser, lambda d: status.text == "saved" and rows[0].get_attribute("data-grade") == "")
    assert _stored(client, settings, set_id) == {}
