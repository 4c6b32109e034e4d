"""Snapshots in Debian's headless Chromium: the question list's form takes one (the page's token
sent by judge.js), a refused label says why on the page, a document pushed after it shows as
``▼0.369`` on the question it outranks, and the list sorts by that column's change. A hostile
label is text. "Delete snapshot" deletes nothing when its confirmation is dismissed, and once
accepted deletes the snapshot and shows the list without the comparison. With
``JUDGE_SCREENSHOTS=<folder>`` it saves the list against the snapshot
(guide/images/judging-snapshots.png).

Reuses the index of ``test_judging_snapshots`` (its fixture and helpers, imported: its own
index per module) and the browser of ``test_judging_browser``.
"""

from __future__ import annotations

import math
import os

import pytest

from loader.ingest.sync import push
from loader.query.judgments import create_query_set, save_grade
from loader.query.snapshots import list_snapshots
from loader.serve.app import create_app
from tests.integration.serve.http_server import Server
from tests.integration.serve.test_judging_browser import (  # noqa: F401 (fixtures)
    _screenshot,
    _sign_in,
    _wait,
    browser,
)
from tests.integration.serve.test_judging_snapshots import (  # noqa: F401 (fixtures)
    KEY_A,
    OUTRANKING,
    QUESTIONS,
    _chunk_of,
    harbour,
)

pytestmark = pytest.mark.integration

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as ec  # noqa: E402

RANK_2 = 1 / math.log2(3)
HOSTILE = '"><img src=x onerror="window.__pwned = 1"> before'


def _take(driver, label: str) -> None:
    box = driver.find_element(By.ID, "snapshot-label")
    box.clear()
    box.send_keys(label)
    driver.find_element(By.ID, "snapshot-take").click()


def _cell(driver, number: int, mode: str) -> str:
    row = driver.find_element(By.CSS_SELECTOR, f'#questions tr[data-number="{number}"]')
    return row.find_element(By.CSS_SELECTOR, f'.score[data-mode="{mode}"]').text


def test_a_snapshot_taken_on_the_page_shows_what_a_push_changed(
    harbour,  # noqa: F811
    browser,  # noqa: F811
    client,
    embedder,
    tmp_path,
):
    settings, _ = harbour
    alias = settings.index_name
    set_id = create_query_set(client, alias, "A", "in-browser", questions=QUESTIONS).set_id
    for number, source in ((0, "timetable.md"), (1, "parking.md")):
        save_grade(client, alias, "A", set_id, number, _chunk_of(client, alias, "A", source), 2)
    with Server(create_app(settings, embedder=embedder)) as server:
        _sign_in(browser, server, KEY_A)
        page = f"http://127.0.0.1:{server.port}/judge/sets/{set_id}/questions"
        browser.get(page)
        _wait(browser, ec.presence_of_element_located((By.ID, "take-snapshot")))
        _take(browser, "   ")  # passes the field's "required", refused by the server
        status = browser.find_element(By.ID, "snapshot-status")
        _wait(browser, lambda d: status.text.startswith("not taken: label: give the snapshot"))
        _take(browser, "before the FAQ")
        _wait(browser, ec.url_contains("against="), 120)
        # Nothing changed yet: every compared score is "=".
        assert _cell(browser, 0, "bm25") == "1.000 ="
        counts = browser.find_element(By.CSS_SELECTOR, '#snapshot-counts tr[data-column="bm25"]')
        assert counts.find_element(By.CSS_SELECTOR, ".unchanged").text == "2"

        faq = tmp_path / "faq"
        faq.mkdir()
        (faq / "ferry-faq.md").write_text(OUTRANKING, encoding="utf-8")
        assert push(faq, settings, tenant="A", client=client, embedder=embedder).failed == 0
        client.indices.refresh(index=alias)
        browser.refresh()
        _wait(browser, ec.presence_of_element_located((By.ID, "snapshot-counts")))
        assert _cell(browser, 0, "bm25") == f"{RANK_2:.3f} ▼{1 - RANK_2:.3f}"
        counts = browser.find_element(By.CSS_SELECTOR, '#snapshot-counts tr[data-column="bm25"]')
        shown = {k: counts.find_element(By.CSS_SELECTOR, f".{k}").text for k in ("worse", "better")}
        assert shown == {"worse": "1", "better": "0"}
        browser.find_element(By.CSS_SELECTOR, 'a.sort[data-sort="delta-bm25"]').click()
        _wait(browser, ec.url_contains("sort=delta-bm25"))
        first = browser.find_element(By.CSS_SELECTOR, "#questions tbody tr")
        assert first.get_attribute("data-number") == "0"
        assert "against=" in browser.current_url  # the sort keeps the comparison
        if "JUDGE_SCREENSHOTS" in os.environ:
            _screenshot(browser, "judging-snapshots.png")

        # A hostile label is the characters it is, in the list of snapshots.
        _take(browser, HOSTILE)
        summary = (By.ID, "snapshot-summary")
        _wait(browser, lambda d: "before the FAQ" not in d.find_element(*summary).text)
        options = [o.text for o in browser.find_elements(By.CSS_SELECTOR, "#against option")]
        assert any(text.startswith(HOSTILE) for text in options)
        assert browser.execute_script("return window.__pwned") is None

        # Delete the hostile one: asked first (dismissed: nothing deleted), then accepted.
        labels = lambda: {s.label for s in list_snapshots(client, alias, "A", set_id)}  # noqa: E731
        assert labels() == {"before the FAQ", HOSTILE}
        browser.find_element(By.ID, "snapshot-delete").click()
        _wait(browser, ec.alert_is_present()).dismiss()
        assert labels() == {"before the FAQ", HOSTILE} and "against=" in browser.current_url
        browser.find_element(By.ID, "snapshot-delete").click()
        alert = _wait(browser, ec.alert_is_present())
        assert HOSTILE in alert.text
        alert.accept()
        _wait(browser, lambda d: "against=" not in d.current_url)
        _wait(browser, ec.presence_of_element_located((By.ID, "against")))
        options = [o.text for o in browser.find_elements(By.CSS_SELECTOR, "#against option")]
        assert not any(HOSTILE in text for text in options) and len(options) == 2
        assert labels() == {"before the FAQ"}
