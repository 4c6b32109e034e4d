"""The judging workbench in Debian's headless Chromium (issue #54): the save state in view in a
1366x768 window while a save is slow, clear and undo, raters, live scores, the in-page search.

Reuses the index, keys and browser of ``test_judging_browser`` (its fixtures, imported: one
index of the fixture documents for tenants A and B, per module). With
``JUDGE_SCREENSHOTS=<folder>`` it saves the question list, a question with live scores and the
raters view there (guide/images/ holds the ones the guide shows).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from fastapi.responses import JSONResponse

from loader.cli import cli
from loader.ingest.sync import push
from loader.query.judgments import create_query_set, judging_state
from loader.query.query_log import queries_index
from loader.serve.app import create_app
from tests.integration.serve.http_server import Server
from tests.integration.serve.test_judging_browser import (  # noqa: F401 (fixtures)
    KEY_A,
    KEY_B,
    _cli,
    _count,
    _import_set,
    _screenshot,
    _sign_in,
    _stored,
    _wait,
    browser,
    judged,
    server,
)

pytestmark = pytest.mark.integration

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support import expected_conditions as ec  # noqa: E402

WIDTH, HEIGHT = 1366, 768  # a common laptop window


class HeldGrades:
    """A middleware that holds each grade's POST while ``held`` (at most 60 s): a save as slow
    as the test needs, whatever the machine's load; with ``failing``, it answers 503 instead and
    nothing is stored."""

    def __init__(self) -> None:
        self.held = False
        self.failing = False

    async def __call__(self, request, call_next):
        if request.method == "POST" and request.url.path.endswith("/grade") and self.held:
            for _ in range(600):
                if not self.held:
                    break
                await asyncio.sleep(0.1)
        if request.method == "POST" and request.url.path.endswith("/grade") and self.failing:
            return JSONResponse({"error": "the server is down"}, status_code=503)
        return await call_next(request)


@pytest.fixture(scope="module")
def held_server(judged, embedder) -> Iterator[tuple[Server, HeldGrades]]:  # noqa: F811
    settings, _, _ = judged
    app = create_app(settings, embedder=embedder)
    held = HeldGrades()
    app.middleware("http")(held)
    with Server(app) as running:
        yield running, held


@pytest.fixture
def laptop_window(browser) -> Iterator:  # noqa: F811
    """The browser's viewport at exactly 1366x768 for one test."""
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False},
    )
    try:
        yield browser
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def _in_view(driver, element) -> bool:
    """Whether ``element`` is wholly inside the window's viewport and shown."""
    return driver.execute_script(
        "const r = arguments[0].getBoundingClientRect();"
        "return r.width > 0 && r.height > 0 && r.top >= 0 && r.left >= 0 &&"
        " r.bottom <= window.innerHeight && r.right <= window.innerWidth;",
        element,
    )


def test_the_save_state_stays_in_view_while_a_save_is_slow(
    judged,  # noqa: F811
    held_server,
    laptop_window,
    client,
    tmp_path,
):
    settings, _, _ = judged
    running, held = held_server
    driver = laptop_window
    set_id = _import_set(settings, tmp_path, "in-view", ["refund to the original payment method"])
    _sign_in(driver, running, KEY_A)
    driver.get(f"http://127.0.0.1:{running.port}/judge/sets/{set_id}/0")
    rows = _wait(driver, ec.presence_of_all_elements_located((By.CSS_SELECTOR, ".result")))
    assert driver.execute_script("return [window.innerWidth, window.innerHeight]") == [
        WIDTH,
        HEIGHT,
    ]
    first = rows[0].get_attribute("data-chunk-id")
    body = driver.find_element(By.TAG_NAME, "body")
    status = driver.find_element(By.ID, "status")
    held.held = True
    try:
        body.send_keys("2")  # the first result; the selection moves to the second
        body.send_keys(Keys.ARROW_UP)
        body.send_keys("1")  # the first result again: two grades wait for it
        _wait(driver, lambda d: status.text == "saving 2…")
        # At the top, then scrolled to the bottom: the state stays in the window.
        driver.execute_script("window.scrollTo(0, 0)")
        assert _in_view(driver, status) and status.text == "saving 2…"
        driver.execute_script("window.scrollTo(0, document.body.scrollHeight)")
        assert driver.execute_script("return window.scrollY") > 200  # it did scroll
        assert _in_view(driver, status) and status.text == "saving 2…"
        assert _in_view(driver, driver.find_element(By.ID, "skip"))
        driver.execute_script("window.scrollTo(0, 0)")
        badge = rows[0].find_element(By.CSS_SELECTOR, ".pending-count")
        assert badge.text == "saving 2" and _in_view(driver, badge)  # beside the row
    finally:
        held.held = False
    _wait(driver, lambda d: status.text == "saved")
    assert not badge.is_displayed()
    assert _stored(client, settings, set_id) == {first: 1}
    # A failed save's retry hint is in view too, at the bottom of the page.
    driver.execute_script("window.scrollTo(0, document.body.scrollHeight)")
    held.failing = True
    try:
        body.send_keys("0")
        _wait(driver, lambda d: status.text.startswith("not saved: the server is down"))
        assert "press r to retry" in status.text and _in_view(driver, status)
        assert _in_view(driver, driver.find_element(By.ID, "retry"))
    finally:
        held.failing = False
    body.send_keys("r")
    _wait(driver, lambda d: status.text == "saved")


def _press(driver, *keys: str) -> None:
    """Press ``keys`` on the page, then wait until every save is stored."""
    body = driver.find_element(By.TAG_NAME, "body")
    for key in keys:
        body.send_keys(key)
    status = driver.find_element(By.ID, "status")
    _wait(driver, lambda d: status.text == "saved")


def _chosen(row) -> list[str]:
    return [b.get_attribute("data-grade") for b in row.find_elements(By.CSS_SELECTOR, ".chosen")]


def test_clear_and_undo(judged, server, browser, client, tmp_path):  # noqa: F811
    settings, _, _ = judged
    set_id = _import_set(settings, tmp_path, "undo", ["card payments accepted"])
    _sign_in(browser, server, KEY_A)
    browser.get(f"http://127.0.0.1:{server.port}/judge/sets/{set_id}/0")
    rows = _wait(browser, ec.presence_of_all_elements_located((By.CSS_SELECTOR, ".result")))
    first, second = (row.get_attribute("data-chunk-id") for row in rows[:2])
    _press(browser, "2", "1")
    assert _stored(client, settings, set_id) == {first: 2, second: 1}
    _press(browser, Keys.ARROW_UP, "x")  # the second back to ungraded: its grade is deleted
    assert _stored(client, settings, set_id) == {first: 2}
    assert _chosen(rows[1]) == []
    _press(browser, "u")  # the clear undone: 1 again
    assert _stored(client, settings, set_id) == {first: 2, second: 1}
    assert _chosen(rows[1]) == ["1"]
    _press(browser, "u")  # the second's grade undone: ungraded, as before it
    assert _stored(client, settings, set_id) == {first: 2}
    _press(browser, Keys.ARROW_UP, "0")  # a grade over a grade...
    assert _stored(client, settings, set_id) == {first: 0}
    _press(browser, "u")  # ...undone restores the previous one
    assert _stored(client, settings, set_id) == {first: 2}
    assert _chosen(rows[0]) == ["2"]
    # After a reload the page knows the stored grades: x clears one, u brings it back.
    browser.refresh()
    rows = _wait(browser, ec.presence_of_all_elements_located((By.CSS_SELECTOR, ".result")))
    _press(browser, "x")
    assert _stored(client, settings, set_id) == {}
    _press(browser, "u")
    assert _stored(client, settings, set_id) == {first: 2}


ALICE = "judge-key-alice-Hq4vX8mP2sL6nR0t"
BOB = "judge-key-bob-Wc3zK7yN1bF5jD9g"
CAROL = "judge-key-carol-Tn6pR1vB8mQ3xZ5k"  # tenant C: the in-page search's own corpus


@pytest.fixture(scope="module")
def raters_server(judged, embedder) -> Iterator[Server]:  # noqa: F811
    """Serve over the same index with two named keys of tenant A (alice, bob), B's key and
    C's (carol)."""
    settings, _, root = judged
    keys = root / "rater-keys.toml"
    keys.write_text(
        f'[keys]\n"{ALICE}" = {{ tenant = "A", name = "alice" }}\n'
        f'"{BOB}" = {{ tenant = "A", name = "bob" }}\n"{KEY_B}" = "B"\n'
        f'"{CAROL}" = {{ tenant = "C", name = "carol" }}\n',
        encoding="utf-8",
    )
    keys.chmod(0o600)
    app = create_app(settings.replace(api_keys_file=str(keys)), embedder=embedder)
    with Server(app) as running:
        yield running


def test_two_raters_grades_are_both_kept_with_their_kappa(
    judged,  # noqa: F811
    raters_server,
    browser,  # noqa: F811
    client,
    tmp_path,
):
    settings, _, _ = judged
    set_id = _import_set(settings, tmp_path, "raters", ["compensation for late deliveries"])
    page = f"http://127.0.0.1:{raters_server.port}/judge/sets/{set_id}"
    given = {"alice": "2210", "bob": "2111"}
    for rater, key in (("alice", ALICE), ("bob", BOB)):
        _sign_in(browser, raters_server, key)
        browser.get(f"{page}/0")
        rows = _wait(browser, ec.presence_of_all_elements_located((By.CSS_SELECTOR, ".result")))
        assert f"rater {rater}" in browser.find_element(By.CSS_SELECTOR, ".tenant").text
        for row in rows:  # each rater sees only their own grades: bob starts from none
            assert _chosen(row) == []
        _press(browser, *given[rater])
    chunk_ids = [row.get_attribute("data-chunk-id") for row in rows[:4]]
    ratings = judging_state(client, settings.index_name, "A", set_id).ratings[0]
    assert {c: {r: g.grade for r, g in ratings[c].items()} for c in chunk_ids} == {
        chunk: {"alice": int(a), "bob": int(b)}
        for chunk, a, b in zip(chunk_ids, given["alice"], given["bob"], strict=True)
    }
    # By hand: pairs (2,2) (2,1) (1,1) (0,1); p_o = 2/4; alice gave 2 twice, 1 once, 0 once,
    # bob 2 once, 1 three times: p_e = (2*1 + 1*3) / 16 = 5/16; kappa = (8/16 - 5/16) / (11/16).
    browser.get(f"{page}/agreement")
    kappa = _wait(browser, ec.presence_of_element_located((By.CSS_SELECTOR, "#kappas .kappa")))
    assert kappa.text == f"{3 / 11:.3f}"
    if "JUDGE_SCREENSHOTS" in os.environ:
        _screenshot(browser, "judging-raters.png")
    progress = browser.find_elements(By.CSS_SELECTOR, "#progress tbody tr")
    assert [r.text for r in progress] == ["alice 4 1 of 1", "bob 4 1 of 1"]
    settle = browser.find_elements(By.CSS_SELECTOR, "#disagreements tbody tr")
    assert [r.get_attribute("data-chunk-id") for r in settle] == sorted(chunk_ids[1:4:2])
    # Exported resolved (the mean rounded down), and saying so.
    out = tmp_path / "raters.jsonl"
    _cli(settings, "judgments", "export", "--tenant", "A", "--name", "raters", "-o", str(out))
    line = json.loads(out.read_text().splitlines()[0])
    assert line["resolution"] == "the mean of the raters' grades, rounded down"
    exported = {j["chunk_id"]: (j["grade"], j["raters"]) for j in line["judgments"]}
    assert {c: exported[c] for c in chunk_ids} == {
        chunk_ids[0]: (2, {"alice": 2, "bob": 2}),
        chunk_ids[1]: (1, {"alice": 2, "bob": 1}),
        chunk_ids[2]: (1, {"alice": 1, "bob": 1}),
        chunk_ids[3]: (0, {"alice": 0, "bob": 1}),
    }
    # Raters stay within their tenant: B's key sees no agreement of A's set.
    _sign_in(browser, raters_server, KEY_B)
    browser.get(f"{page}/agreement")
    assert "404" in browser.title and not browser.find_elements(By.ID, "kappas")


def _score_cells(row) -> dict[str, str]:
    return {
        cell.get_attribute("data-mode"): cell.text
        for cell in row.find_elements(By.CSS_SELECTOR, ".score")
    }


def test_live_scores_equal_loader_evals_on_the_export(
    judged,  # noqa: F811
    server,  # noqa: F811
    browser,  # noqa: F811
    tmp_path,
):
    settings, docs, _ = judged
    questions = ["compensation for late deliveries", "UPI bank account 48 hours", "wallet top up"]
    set_id = _import_set(settings, tmp_path, "live", questions)
    _sign_in(browser, server, KEY_A)
    page = f"http://127.0.0.1:{server.port}/judge/sets/{set_id}"
    browser.get(f"{page}/0")
    _wait(browser, ec.presence_of_all_elements_located((By.CSS_SELECTOR, ".result")))
    live = browser.find_element(By.ID, "live-scores")
    _wait(browser, lambda d: "–" in live.text)  # nothing graded yet: no score
    _press(browser, "0", "2", "1")  # the scores follow the saves
    # The newest answer, with the three grades: under load an answer to the first save's
    # refresh came last and the panel showed one grade's scores (a page fixed since).
    _wait(browser, lambda d: live.get_attribute("data-state") == "current")
    assert "–" not in live.text and "…" not in live.text
    shown = _score_cells(live)
    if "JUDGE_SCREENSHOTS" in os.environ:
        browser.execute_script("window.scrollTo(0, 0)")
        _screenshot(browser, "judging-live-scores.png")
    browser.get(f"{page}/1")
    _wait(browser, ec.presence_of_all_elements_located((By.CSS_SELECTOR, ".result")))
    _press(browser, "2")
    # The list: each question's judged count and scores; the third has none (nothing graded).
    browser.get(f"{page}/questions")
    table = _wait(browser, ec.presence_of_element_located((By.ID, "questions")))
    rows = table.find_elements(By.CSS_SELECTOR, "tbody tr")
    assert [r.find_element(By.CSS_SELECTOR, ".judged").text for r in rows] == ["3", "1", "0"]
    first = _score_cells(rows[0])
    assert {mode: first[mode] for mode in shown} == {m: s.split()[-1] for m, s in shown.items()}
    assert set(_score_cells(rows[2]).values()) == {"–"}
    means = _score_cells(browser.find_element(By.ID, "set-means"))
    if "JUDGE_SCREENSHOTS" in os.environ:
        _screenshot(browser, "judging-questions.png")
    # What to judge next: how far the modes' top 10 disagree needs no grade; the link is the
    # question this rater has not judged that they disagree on most (here the only one left).
    apart = [float(r.find_element(By.CSS_SELECTOR, ".disagree").text) for r in rows]
    assert all(0.0 <= value <= 1.0 for value in apart)
    next_link = browser.find_element(By.CSS_SELECTOR, "#judge-next a")
    assert next_link.get_attribute("href").endswith(f"/{set_id}/2")
    browser.find_element(By.CSS_SELECTOR, 'a.sort[data-sort="disagree"]').click()
    _wait(browser, ec.url_contains("sort=disagree"))
    by_disagreement = [
        float(cell.text) for cell in browser.find_elements(By.CSS_SELECTOR, "td.disagree")
    ]
    assert by_disagreement == sorted(apart, reverse=True)
    # Sorted by the widest spread between modes: unscored last.
    browser.find_element(By.CSS_SELECTOR, 'a.sort[data-sort="spread"]').click()
    _wait(browser, ec.url_contains("sort=spread"))
    order = [
        r.get_attribute("data-number")
        for r in browser.find_elements(By.CSS_SELECTOR, "#questions tbody tr")
    ]
    assert order[-1] == "2"
    # loader eval on the exported file, over the same documents: the same nDCG@10 per mode.
    out = tmp_path / "live.jsonl"
    _cli(settings, "judgments", "export", "--tenant", "A", "--name", "live", "-o", str(out))
    result = CliRunner().invoke(
        cli,
        [
            "eval",
            str(out),
            "--docs",
            str(docs),
            "--mode",
            "bm25",
            "--mode",
            "vector",
            "--no-rerank",
            "--json",
            "--url",
            settings.opensearch_url,
            "--index-prefix",
            f"{settings.index_name}-live",
            "--out-dir",
            str(tmp_path / "eval"),
        ],
    )
    assert result.exit_code == 0, result.output
    configurations = json.loads(result.stdout)["configurations"]
    assert sorted(c["mode"] for c in configurations) == ["bm25", "vector"]
    for configuration in configurations:
        mode = configuration["mode"]
        assert means[mode] == f"{configuration['metrics']['ndcg@10']:.3f}", mode


def _click(driver, element) -> None:
    """Click ``element`` scrolled to the window's middle: selenium's own scrolling leaves it at
    the bottom edge, under the fixed status bar, where no one clicks."""
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    element.click()


B_LOOKALIKE = "Quokka zebra refunds\n\nQuokka zebra refunds: the quokka zebra desk pays in 9 days."
C_LOOKALIKE = "Quokka refunds\n\nRefunds of quokka orders: the zebra desk pays in 3 days.\n"


def test_a_chunk_found_by_the_in_page_search_is_graded_and_exported(
    judged,  # noqa: F811
    raters_server,
    browser,  # noqa: F811
    client,
    embedder,
    tmp_path,
):
    settings, docs, _ = judged
    alias = settings.index_name
    # Tenant C: the fixture documents and 30 notes on card payments (so each mode's ranks 6-10
    # hold results its top 5 leave out), and a note on quokka refunds; tenant B holds text
    # closer to the search than C's own: it must never show.
    corpus = tmp_path / "corpus-C"
    shutil.copytree(docs, corpus)
    for number in range(30):
        (corpus / f"card-note-{number}.md").write_text(
            f"Card note {number}\n\nCard payments {number}: terminal {number * 7} accepts "
            f"cards of scheme {number % 4} for orders over {number * 3} rupees.\n",
            encoding="utf-8",
        )
    (corpus / "quokka.md").write_text(C_LOOKALIKE, encoding="utf-8")
    lookalike = tmp_path / "quokka-B"
    lookalike.mkdir()
    (lookalike / "quokka.md").write_text(B_LOOKALIKE, encoding="utf-8")
    for folder, tenant in ((corpus, "C"), (lookalike, "B")):
        report = push(folder, settings, tenant=tenant, client=client, embedder=embedder)
        assert report.failed == 0, report
    set_id = create_query_set(
        client, alias, "C", "find", strategy="imported", questions=["card payments accepted"]
    ).set_id
    logged_before = _count(client, queries_index(alias), {"match_all": {}})
    _sign_in(browser, raters_server, CAROL)
    page = f"http://127.0.0.1:{raters_server.port}/judge/sets/{set_id}/0"
    browser.get(page)
    pooled = {
        r.get_attribute("data-chunk-id")
        for r in _wait(browser, ec.presence_of_all_elements_located((By.CSS_SELECTOR, ".result")))
    }
    found_id = None
    for mode in ("bm25", "hybrid-rrf"):
        box = browser.find_element(By.ID, "find-text")
        box.clear()
        box.send_keys("quokka zebra refunds 9 days 2")  # typed keys grade nothing
        browser.find_element(By.CSS_SELECTOR, f'#find-mode option[value="{mode}"]').click()
        browser.find_element(By.ID, "find-button").click()
        _wait(browser, ec.url_contains(f"find_mode={mode}"))
        texts = [e.text for e in browser.find_elements(By.CSS_SELECTOR, ".result .text")]
        assert not any("9 days" in text for text in texts), mode  # never B's chunk
        found = browser.find_elements(By.CSS_SELECTOR, ".result.found")
        assert found and any("3 days" in f.text for f in found), mode
        for row in browser.find_elements(By.CSS_SELECTOR, ".result"):
            chunk = row.get_attribute("data-chunk-id")
            query = {"bool": {"filter": [{"term": {"chunk_id": chunk}}]}}
            owners = client.search(index=alias, body={"query": query, "_source": ["tenant"]})
            assert {h["_source"]["tenant"] for h in owners["hits"]["hits"]} == {"C"}, chunk
        found_id = next(f for f in found if "3 days" in f.text).get_attribute("data-chunk-id")
    assert _stored_of(client, alias, set_id) == {}  # the typed "2" graded nothing
    row = browser.find_element(By.CSS_SELECTOR, f'.result[data-chunk-id="{found_id}"]')
    _click(browser, row.find_element(By.CSS_SELECTOR, '.grade[data-grade="2"]'))
    status = browser.find_element(By.ID, "status")
    _wait(browser, lambda d: status.text == "saved")
    # Ranks 6-10 of each mode (side by side's) are gradable too.
    browser.get(f"{page}/compare")
    browser.find_element(By.ID, "grade-deeper").click()
    _wait(browser, ec.url_contains("depth=10"))
    deep = [
        r
        for r in browser.find_elements(By.CSS_SELECTOR, ".result")
        if r.get_attribute("data-chunk-id") not in pooled
    ]
    assert deep, "no result ranked 6-10 that the top 5 of the modes left out"
    _click(browser, deep[0].find_element(By.CSS_SELECTOR, '.grade[data-grade="1"]'))
    status = browser.find_element(By.ID, "status")
    _wait(browser, lambda d: status.text == "saved")
    deep_id = deep[0].get_attribute("data-chunk-id")
    assert _stored_of(client, alias, set_id) == {found_id: 2, deep_id: 1}
    # The page's own searches never reach the query log.
    assert _count(client, queries_index(alias), {"match_all": {}}) == logged_before
    out = tmp_path / "find.jsonl"
    _cli(settings, "judgments", "export", "--tenant", "C", "--name", "find", "-o", str(out))
    line = json.loads(out.read_text().splitlines()[0])
    assert {j["chunk_id"]: j["grade"] for j in line["judgments"]} == {found_id: 2, deep_id: 1}
    assert line["source"] == "quokka.md"


def _stored_of(client, alias: str, set_id: str) -> dict[str, int]:
    """Tenant C's grades of question 0 of ``set_id``: chunk id -> grade."""
    state = judging_state(client, alias, "C", set_id)
    return {chunk_id: grade.grade for chunk_id, grade in state.grades.get(0, {}).items()}


def test_a_need_a_note_and_cant_tell_are_stored_and_exported(
    judged,  # noqa: F811
    server,  # noqa: F811
    browser,  # noqa: F811
    client,
    tmp_path,
):
    settings, _, _ = judged
    set_id = _import_set(settings, tmp_path, "notes", ["refund to the original payment method"])
    _sign_in(browser, server, KEY_A)
    page = f"http://127.0.0.1:{server.port}/judge/sets/{set_id}/0"
    browser.get(page)
    rows = _wait(browser, ec.presence_of_all_elements_located((By.CSS_SELECTOR, ".result")))
    first, second = (row.get_attribute("data-chunk-id") for row in rows[:2])
    need = browser.find_element(By.ID, "need")
    need.send_keys("which account a refund goes back to <b>")
    browser.find_element(By.ID, "save-need").click()
    _wait(browser, lambda d: d.find_element(By.ID, "need-status").text == "need saved")
    note = rows[0].find_element(By.CSS_SELECTOR, ".note")
    note.send_keys("says the original method", Keys.ENTER)  # Enter hands the keys back
    _press(browser, "2")
    body = browser.find_element(By.TAG_NAME, "body")
    status = browser.find_element(By.ID, "status")
    body.send_keys("c")  # can't tell, without a reason: refused on the page, nothing sent
    _wait(browser, lambda d: status.text.startswith("can't tell: write why"))
    reason = rows[1].find_element(By.CSS_SELECTOR, ".note")
    assert browser.switch_to.active_element == reason
    reason.send_keys("the text stops mid-sentence", Keys.ENTER)
    _press(browser, "c")
    state = judging_state(client, settings.index_name, "A", set_id)
    assert {c: (g.grade, g.note) for c, g in state.grades[0].items()} == {
        first: (2, "says the original method")
    }
    assert state.cant_tell[0] == {second: {"key 1": "the text stops mid-sentence"}}
    assert state.needs[0] == "which account a refund goes back to <b>"
    browser.refresh()  # all shown again
    rows = _wait(browser, ec.presence_of_all_elements_located((By.CSS_SELECTOR, ".result")))
    assert browser.find_element(By.ID, "need").get_attribute("value").endswith("<b>")
    assert rows[0].find_element(By.CSS_SELECTOR, ".note").get_attribute("value") == (
        "says the original method"
    )
    assert _chosen(rows[1]) == ["?"]
    out = tmp_path / "notes.jsonl"
    _cli(settings, "judgments", "export", "--tenant", "A", "--name", "notes", "-o", str(out))
    line = json.loads(out.read_text().splitlines()[0])
    assert line["information_need"] == "which account a refund goes back to <b>"
    assert line["cant_tell"] == [
        {"chunk_id": second, "rater": "key 1", "reason": "the text stops mid-sentence"}
    ]
    assert {j["chunk_id"]: j.get("notes") for j in line["judgments"]} == {
        first: {"key 1": "says the original method"}
    }
