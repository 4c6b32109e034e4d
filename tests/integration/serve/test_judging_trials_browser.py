"""Trying settings in Chromium: the question list links the try page, the form is filled
(rrf_bm25_weight = 1: BM25 alone), Try is pressed, and question 1's row shows its score now,
tried (A's ferry page outranks the answer under BM25 alone: 1 / log2(3)) and the delta between
them; the means and the loader.toml line are shown. A bad value is refused, naming it. Two
values separated by a comma are a sweep: a row each, the best one marked.

With ``JUDGE_SCREENSHOTS=<folder>`` it saves the tried page (``judging-try.png``).

Reuses the index of ``test_judging_trials`` (its fixture, imported) and the browser of
``test_judging_browser``.
"""

from __future__ import annotations

import math
import os

import pytest

from loader.serve.app import create_app
from tests.integration.serve.http_server import Server
from tests.integration.serve.test_judging_browser import (  # noqa: F401 (fixtures)
    _screenshot,
    _sign_in,
    _wait,
    browser,
)
from tests.integration.serve.test_judging_trials import KEY_A, harbour  # noqa: F401 (fixture)

pytestmark = pytest.mark.integration

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as ec  # noqa: E402


def _try(driver, value: str) -> None:
    field = driver.find_element(By.ID, "trial-rrf_bm25_weight")
    field.clear()
    field.send_keys(value)
    driver.find_element(By.ID, "trial-try").click()


def test_the_form_tries_a_weight_and_shows_the_delta(harbour, browser, embedder):  # noqa: F811
    settings, sets = harbour
    set_id = sets["A"].set_id
    with Server(create_app(settings, embedder=embedder)) as server:
        _sign_in(browser, server, KEY_A)
        browser.get(f"http://127.0.0.1:{server.port}/judge/sets/{set_id}/questions")
        _wait(browser, ec.presence_of_element_located((By.ID, "try-settings")))
        browser.find_element(By.ID, "try-settings").click()
        _wait(browser, ec.presence_of_element_located((By.ID, "trial-form")))
        field = browser.find_element(By.ID, "trial-rrf_bm25_weight")
        assert field.get_attribute("value") == str(settings.rrf_bm25_weight)
        status = browser.find_element(By.ID, "trial-status")
        _try(browser, "7")
        _wait(browser, lambda d: status.text.startswith("not tried: setting 'rrf_bm25_weight'"))
        _try(browser, "1")
        _wait(browser, lambda d: status.text.startswith("tried on 5 graded questions"), 60)
        row = browser.find_element(By.CSS_SELECTOR, '#trial-questions tr[data-number="0"]')
        now = float(row.find_element(By.CSS_SELECTOR, ".now").text)
        tried = row.find_element(By.CSS_SELECTOR, ".trial").text
        assert tried == f"{1 / math.log2(3):.3f}"
        delta = row.find_element(By.CSS_SELECTOR, ".delta").text
        arrow = "▼" if now > float(tried) else "▲" if now < float(tried) else "="
        assert delta.startswith(arrow), (now, tried, delta)
        if arrow != "=":
            assert abs(float(delta[1:]) - abs(now - float(tried))) <= 0.0015
        assert browser.find_element(By.ID, "trial-toml").text == "rrf_bm25_weight = 1.0"
        assert browser.find_element(By.CSS_SELECTOR, "#trial-means .mode-trial").text == (
            settings.search_mode
        )
        # Two values of one setting: tried from the same searches, the best one's questions.
        _try(browser, "0.5, 1")
        _wait(browser, lambda d: "the best value of rrf_bm25_weight" in status.text, 60)
        rows = browser.find_elements(By.CSS_SELECTOR, "#trial-sweep tbody tr")
        values = [row.find_element(By.CSS_SELECTOR, ".value").text.split()[0] for row in rows]
        assert values == ["0.5", "1"]
        assert len(browser.find_elements(By.CSS_SELECTOR, "#trial-sweep tr.best")) == 1
        if "JUDGE_SCREENSHOTS" in os.environ:
            _screenshot(browser, "judging-try.png")
