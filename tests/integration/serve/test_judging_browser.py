"""The judging loop in a real browser: searches logged through `loader serve` (query_log = "ubi",
API keys), a query set sampled from the log, three questions judged on /judge with key presses and
clicks in Debian's headless Chromium (selenium with /usr/bin/chromedriver; never a downloaded
driver), exported, and measured by `loader eval`, whose figures are checked against the grades.

Three grades pressed 0.05 s apart on a server that takes 0.5 s per save are each stored on the
chunk selected when its key was pressed; a save that fails says so, and r stores it. Hostile
questions and chunks (``<script>``, ``"><img onerror=...>``, a 1 MB line, a right-to-left
override) are asserted to be text in the browser's DOM, the override shown, not obeyed; a key of
tenant B gets 403 on tenant A's query, 404 on its set and grades (as for a set that does not
exist), and nothing is written. One browser session for the module.

With ``JUDGE_SCREENSHOTS=<folder>`` the test also saves the judging page and the
side-by-side view as PNG there (guide/images/ holds the ones the guide shows).
"""

from __future__ import annotations

import asyncio
import csv
import json
import math
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.responses import JSONResponse

from loader.cli import cli
from loader.index.apply import apply_config
from loader.ingest.sync import push
from loader.query.judgments import judging_state, judgments_index, set_id_for
from loader.query.query_log import events_index, queries_index
from loader.serve.app import create_app
from tests.conftest import cleanup_owned
from tests.integration.serve.http_server import Server, signed_in

webdriver = pytest.importorskip("selenium.webdriver")
CHROMEDRIVER = "/usr/bin/chromedriver"
CHROMIUM = "/usr/bin/chromium"
if not (os.path.exists(CHROMEDRIVER) and os.path.exists(CHROMIUM)):
    pytest.skip(
        "needs Debian's chromium and chromium-driver (scripts/setup.sh --tests)",
        allow_module_level=True,
    )

from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support import expected_conditions as ec  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

KEY_A = "judge-key-a-Zp3m9QvR2xL7wT4nB8"
KEY_B = "judge-key-b-Vb7nM2qX5zC8rT1yU4"
FIXTURE_DOCS = Path(__file__).parents[2] / "fixtures" / "eval" / "docs"
SCRIPT = "<script>window.__pwned = 1</script> refund"
IMG = '"><img src=x onerror="window.__pwned = 2"> refund'
LONG_LINE = ("refund " * 150_000)[:1_000_000]
HOSTILE_TEXT = (
    "Hostile note\n\nThis note quotes <script>window.__pwned = 3</script> and "
    '"><img src=x onerror="window.__pwned = 4"> about a refund onerror script img. '
    "Reversed: \u202eevil\u202c.\n"
)
BIDI = "refund \u202eevil\u202c policy"  # shown as "refund licy op live" if obeyed
# 20 searches: the first question most often, in several spellings (one after normalisation).
LOGGED = [
    *["compensation for late deliveries"] * 3,
    "Compensation for late deliveries?",
    "  COMPENSATION   for late deliveries ",
    *["UPI bank account 48 hours"] * 4,
    *["missing item photo"] * 3,
    *["card payments accepted"] * 3,
    *["refund to the original payment method"] * 2,
    "wallet top up",
    SCRIPT,
    IMG,
]
assert len(LOGGED) == 20


@pytest.fixture(scope="module")
def judged(client, base_settings, embedder, tmp_path_factory) -> Iterator:
    """An index of the fixture documents (plus a hostile note) for tenants A and B, with the
    query log on, and API keys for both."""
    root = tmp_path_factory.mktemp("judging")
    keys = root / "api-keys.toml"
    keys.write_text(f'[keys]\n"{KEY_A}" = "A"\n"{KEY_B}" = "B"\n', encoding="utf-8")
    keys.chmod(0o600)
    docs = root / "docs"
    shutil.copytree(FIXTURE_DOCS, docs)
    (docs / "hostile.txt").write_text(HOSTILE_TEXT, encoding="utf-8")
    alias = f"t-judging-{uuid.uuid4().hex[:8]}"
    settings = base_settings.replace(
        index_name=alias, query_log="ubi", rerank="off", api_keys_file=str(keys)
    )
    try:
        plan = apply_config(settings, dimension=embedder.dimension, client=client)
        made = {c.name for c in plan.changes if c.kind == "query log index"}
        assert made == {f"{alias}-ubi_queries", f"{alias}-ubi_events", f"{alias}-judgments"}
        for tenant in ("A", "B"):
            report = push(docs, settings, tenant=tenant, client=client, embedder=embedder)
            assert report.failed == 0, report
        yield settings, docs, root
    finally:
        cleanup_owned(client, alias)


@pytest.fixture(scope="module")
def server(judged, embedder) -> Iterator[Server]:
    settings, _, _ = judged
    with Server(create_app(settings, embedder=embedder)) as running:
        yield running


SAVE_SECONDS = 0.5  # each grade's save on the slow server


class SlowGrades:
    """A middleware that holds each grade's POST ``SAVE_SECONDS`` before the app stores it; with
    ``failing``, it answers 503 instead and nothing is stored."""

    def __init__(self) -> None:
        self.failing = False

    async def __call__(self, request, call_next):
        if request.method == "POST" and request.url.path.endswith("/grade"):
            await asyncio.sleep(SAVE_SECONDS)
            if self.failing:
                return JSONResponse({"error": "the server is down"}, status_code=503)
        return await call_next(request)


@pytest.fixture(scope="module")
def slow_server(judged, embedder) -> Iterator[tuple[Server, SlowGrades]]:
    settings, _, _ = judged
    app = create_app(settings, embedder=embedder)
    slow = SlowGrades()
    app.middleware("http")(slow)
    with Server(app) as running:
        yield running, slow


@pytest.fixture(scope="module")
def browser() -> Iterator:
    previous = os.environ.get("SE_OFFLINE")
    os.environ["SE_OFFLINE"] = "true"  # selenium's manager never fetches a driver
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1280,1000",
        "--disable-gpu",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(120)
    try:
        yield driver
    finally:
        driver.quit()
        if previous is None:
            os.environ.pop("SE_OFFLINE", None)
        else:
            os.environ["SE_OFFLINE"] = previous


def _cli(settings, *args: str):
    result = CliRunner().invoke(
        cli, [*args, "--url", settings.opensearch_url, "--index", settings.index_name]
    )
    assert result.exit_code == 0, result.output
    return result


def _count(client, index: str, query: dict) -> int:
    client.indices.refresh(index=index)
    return client.count(index=index, body={"query": query})["count"]


def _wait(driver, condition, seconds: float = 60):
    return WebDriverWait(driver, seconds).until(condition)


def _sign_in(driver, server: Server, key: str) -> None:
    driver.delete_all_cookies()
    driver.get(f"http://127.0.0.1:{server.port}/judge/login")
    driver.find_element(By.ID, "key").send_keys(key)
    driver.find_element(By.ID, "sign-in").click()
    _wait(driver, ec.presence_of_element_located((By.CSS_SELECTOR, "ul.sets")))


def _selected(driver):
    return driver.find_element(By.CSS_SELECTOR, ".result.selected")


def _grade_by_key(driver, key: str) -> str:
    """Press ``key`` on the selected result; its chunk id once the grade is shown as saved."""
    row = _selected(driver)
    chunk_id = row.get_attribute("data-chunk-id")
    driver.find_element(By.TAG_NAME, "body").send_keys(key)
    _wait(
        driver,
        lambda d: (
            "chosen"
            in row.find_element(By.CSS_SELECTOR, f'.grade[data-grade="{key}"]').get_attribute(
                "class"
            )
        ),
    )
    return chunk_id


def _grade_by_click(driver, row_number: int, grade: int) -> str:
    row = driver.find_elements(By.CSS_SELECTOR, ".result")[row_number]
    button = row.find_element(By.CSS_SELECTOR, f'.grade[data-grade="{grade}"]')
    button.click()
    _wait(driver, lambda d: "chosen" in button.get_attribute("class"))
    return row.get_attribute("data-chunk-id")


def _rows(driver) -> dict[str, str]:
    """chunk id -> source of each pooled result on the page."""
    return {
        row.get_attribute("data-chunk-id"): row.find_element(By.CSS_SELECTOR, ".source").text
        for row in driver.find_elements(By.CSS_SELECTOR, ".result")
    }


def _ndcg(ranked: list[str], qrels: dict[str, int], k: int = 10) -> float:
    gains = [qrels.get(doc, 0) for doc in ranked[:k]]
    ideal = sorted(qrels.values(), reverse=True)[:k]

    def dcg(values):
        return sum(value / math.log2(position + 2) for position, value in enumerate(values))

    return dcg(gains) / dcg(ideal)


def test_log_sample_judge_export_eval(judged, server, browser, client, tmp_path):
    settings, docs, _ = judged
    alias = settings.index_name
    # 1. Twenty searches through serve, each logged in the UBI shape.
    query_ids = []
    for question in LOGGED:
        status, body = server.request(
            "POST",
            "/search",
            {"question": question, "mode": "bm25", "k": 3},
            {"Authorization": f"Bearer {KEY_A}"},
        )
        assert status == 200, body
        query_ids.append(body["query_id"])
    assert all(query_ids) and len(set(query_ids)) == 20
    assert _count(client, queries_index(alias), {"term": {"query_attributes.tenant": "A"}}) == 20
    logged = client.get(index=queries_index(alias), id=query_ids[0])["_source"]
    assert logged["user_query"] == LOGGED[0]
    assert logged["query_attributes"]["mode"] == "bm25"
    assert logged["query_response_hit_ids"] == [
        r["chunk_id"] for r in logged["query_attributes"]["results"]
    ]
    assert KEY_A not in json.dumps(logged) and "vector" not in json.dumps(logged)
    status, body = server.request(
        "POST",
        "/events",
        {
            "query_id": query_ids[0],
            "action_name": "click",
            "object_id": logged["query_response_hit_ids"][0],
            "position": 1,
        },
        {"Authorization": f"Bearer {KEY_A}"},
    )
    assert status == 201, body

    # A key of B: neither an event on A's query nor a search as A; nothing is written.
    events_before = _count(client, events_index(alias), {"match_all": {}})
    status, body = server.request(
        "POST",
        "/events",
        {"query_id": query_ids[0], "action_name": "click"},
        {"Authorization": f"Bearer {KEY_B}"},
    )
    assert status == 403, body
    assert _count(client, events_index(alias), {"match_all": {}}) == events_before

    # Each tenant's log through its own key only.
    status, body = server.request(
        "GET", "/log?limit=50", headers={"Authorization": f"Bearer {KEY_A}"}
    )
    assert status == 200 and len(body["queries"]) == 20
    assert {q["query_attributes"]["tenant"] for q in body["queries"]} == {"A"}
    status, body = server.request("GET", "/log", headers={"Authorization": f"Bearer {KEY_B}"})
    assert (status, body) == (200, {"queries": []})
    status, body = server.request(
        "GET", "/log?tenant=A", headers={"Authorization": f"Bearer {KEY_B}"}
    )
    assert status == 403, body

    # 2. Sample 5: the most frequent, deduplicated after normalisation.
    out = _cli(
        settings, "judgments", "sample", "--tenant", "A", "--name", "top5", "--size", "5", "--json"
    )
    sampled = json.loads(out.stdout)["questions"]
    assert len(sampled) == 5
    assert sampled[0] == "compensation for late deliveries"
    assert sampled[1] == "UPI bank account 48 hours"
    set_id = set_id_for("A", "top5")

    # 3. Judge 3 of them in the browser, with keys and clicks; skip the fourth.
    _sign_in(browser, server, KEY_A)
    browser.find_element(By.LINK_TEXT, "top5").click()
    _wait(browser, ec.url_contains(f"/judge/sets/{set_id}/0"))
    assert browser.find_element(By.ID, "question").text == sampled[0]
    expected: dict[int, dict[str, int]] = {0: {}, 1: {}, 2: {}}
    sources: dict[str, str] = {}
    sources |= _rows(browser)
    expected[0][_grade_by_key(browser, "2")] = 2  # the first result answers it
    expected[0][_grade_by_key(browser, "0")] = 0  # the selection moved on: not relevant
    expected[0][_grade_by_click(browser, 2, 1)] = 1
    if "JUDGE_SCREENSHOTS" in os.environ:
        _screenshot(browser, "judging-page.png")
    browser.find_element(By.TAG_NAME, "body").send_keys(Keys.ARROW_RIGHT)
    _wait(browser, ec.url_contains(f"/judge/sets/{set_id}/1"))
    sources |= _rows(browser)
    expected[1][_grade_by_click(browser, 0, 2)] = 2
    browser.find_element(By.TAG_NAME, "body").send_keys(Keys.ARROW_RIGHT)
    _wait(browser, ec.url_contains(f"/judge/sets/{set_id}/2"))
    sources |= _rows(browser)
    expected[2][_grade_by_key(browser, "1")] = 1
    expected[2][_grade_by_key(browser, "2")] = 2
    browser.find_element(By.TAG_NAME, "body").send_keys(Keys.ARROW_RIGHT)
    _wait(browser, ec.url_contains(f"/judge/sets/{set_id}/3"))
    browser.find_element(By.TAG_NAME, "body").send_keys("s")
    # Skipping resumes where the judge stopped: the first question neither judged nor skipped.
    _wait(browser, ec.url_contains(f"/judge/sets/{set_id}/4"))

    state = judging_state(client, settings.index_name, "A", set_id)
    assert {
        n: {c: g.grade for c, g in grades.items()} for n, grades in state.grades.items()
    } == expected
    assert state.skipped == {3}

    # The side-by-side view of question 1: two modes' lists with what moved.
    browser.get(f"http://127.0.0.1:{server.port}/judge/sets/{set_id}/0/compare?a=bm25&b=vector")
    columns = browser.find_elements(By.CSS_SELECTOR, "section.column")
    assert [c.find_element(By.TAG_NAME, "h2").text for c in columns] == ["bm25", "vector"]
    moves = [m.text for m in browser.find_elements(By.CSS_SELECTOR, ".move")]
    assert moves and all(re.fullmatch(r"=|new|[▲▼]\d+", move) for move in moves)
    badges = {
        row.get_attribute("data-chunk-id"): row.find_element(By.CSS_SELECTOR, ".grade-badge").text
        for row in columns[0].find_elements(By.CSS_SELECTOR, "li.row")
    }
    for chunk_id, grade in expected[0].items():
        if chunk_id in badges:
            assert badges[chunk_id] == str(grade)
    if "JUDGE_SCREENSHOTS" in os.environ:
        _screenshot(browser, "side-by-side.png")

    # A key of B can neither see nor judge A's set; nothing is written.
    cookie, token = signed_in(server, KEY_B)
    grades_before = _count(client, judgments_index(alias), {"term": {"kind": "grade"}})
    # 404, as for a set that does not exist: B learns nothing of A's sets.
    status, body = server.raw("GET", f"/judge/sets/{set_id}/0", headers={"Cookie": cookie})
    assert status == 404, body
    status, body = server.raw(
        "POST",
        f"/judge/sets/{set_id}/0/grade",
        {"chunk_id": next(iter(expected[0])), "grade": 0},
        {"Cookie": cookie, "X-CSRF-Token": token},
    )
    assert status == 404, body
    cookie_a, token_a = signed_in(server, KEY_A)
    status, body = server.raw(  # A's own session without its token
        "POST",
        f"/judge/sets/{set_id}/0/grade",
        {"chunk_id": next(iter(expected[0])), "grade": 0},
        {"Cookie": cookie_a},
    )
    assert status == 403, body
    assert _count(client, judgments_index(alias), {"term": {"kind": "grade"}}) == grades_before

    # 4. Export, and measure with loader eval over the same documents.
    questions = tmp_path / "top5.jsonl"
    _cli(settings, "judgments", "export", "--tenant", "A", "--name", "top5", "-o", str(questions))
    lines = [json.loads(line) for line in questions.read_text().splitlines()]
    assert [line["question"] for line in lines] == sampled[:3]
    qrels = {}
    for line, number in zip(lines, range(3), strict=True):
        judged_grades = {j["chunk_id"]: j["grade"] for j in line["judgments"]}
        assert judged_grades == expected[number]
        per_source: dict[str, int] = {}
        for chunk_id, grade in expected[number].items():
            if grade:
                per_source[sources[chunk_id]] = max(grade, per_source.get(sources[chunk_id], 0))
        qrels[line["id"]] = per_source
        assert line["source"] == max(per_source, key=per_source.get) or per_source[
            line["source"]
        ] == max(per_source.values())
    out_dir = tmp_path / "eval"
    result = CliRunner().invoke(
        cli,
        [
            "eval",
            str(questions),
            "--docs",
            str(docs),
            "--mode",
            "bm25",
            "--no-rerank",
            "--json",
            "--url",
            settings.opensearch_url,
            "--index-prefix",
            f"{alias}-eval",
            "--out-dir",
            str(out_dir),
        ],
    )
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout)["configurations"][0]["metrics"]
    run: dict[str, list[str]] = {}
    for row in (out_dir / "runs" / "structure_bm25.trec").read_text().splitlines():
        qid, _, doc, _rank, _score, _tag = row.split()
        run.setdefault(qid, []).append(doc)
    expected_ndcg = sum(_ndcg(run.get(q, []), qrels[q]) for q in qrels) / len(qrels)
    assert metrics["ndcg@10"] == pytest.approx(expected_ndcg, abs=1e-4)
    first_relevant = [
        next((1 / (i + 1) for i, doc in enumerate(run.get(q, [])[:10]) if doc in qrels[q]), 0.0)
        for q in qrels
    ]
    assert metrics["mrr@10"] == pytest.approx(sum(first_relevant) / len(qrels), abs=1e-4)

    # SRW formats out and back in: the same questions and grades.
    srw = tmp_path / "top5-judgments.json"
    _cli(
        settings,
        "judgments",
        "export",
        "--tenant",
        "A",
        "--name",
        "top5",
        "--format",
        "srw-judgments",
        "-o",
        str(srw),
    )
    body = json.loads(srw.read_text())
    assert body["type"] == "IMPORT_JUDGMENT"
    assert {r["docId"]: r["rating"] for r in body["judgmentRatings"][0]["ratings"]} == {
        chunk_id: f"{grade:.3f}" for chunk_id, grade in expected[0].items()
    }
    _cli(settings, "judgments", "import", str(srw), "--tenant", "A", "--name", "roundtrip")
    again = judging_state(client, settings.index_name, "A", set_id_for("A", "roundtrip"))
    assert {
        n: {c: g.grade for c, g in grades.items()} for n, grades in again.grades.items()
    } == expected

    # Quepid's ratings CSV on its nDCG scale (0-3) out and back in: the same grades.
    ratings = tmp_path / "top5-ratings.csv"
    scale = ("--rating-scale", "3")
    _cli(settings, "judgments", "export", "--tenant", "A", "--name", "top5",
         "--format", "quepid-csv", *scale, "-o", str(ratings))  # fmt: skip
    rows = list(csv.reader(ratings.read_text().splitlines()))
    assert rows[0] == ["query", "docid", "rating"]
    assert {(q, d): r for q, d, r in rows[1:] if q == body["judgmentRatings"][0]["query"]} == {
        (body["judgmentRatings"][0]["query"], chunk_id): str({0: 0, 1: 2, 2: 3}[grade])
        for chunk_id, grade in expected[0].items()
    }
    _cli(settings, "judgments", "import", str(ratings), *scale, "--tenant", "A", "--name", "qp")
    again = judging_state(client, settings.index_name, "A", set_id_for("A", "qp"))
    assert {
        n: {c: g.grade for c, g in grades.items()} for n, grades in again.grades.items()
    } == expected


def _screenshot(driver, name: str) -> None:
    folder = Path(os.environ["JUDGE_SCREENSHOTS"])
    folder.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(folder / name))


def test_hostile_questions_and_chunks_render_as_text(judged, server, browser, tmp_path):
    settings, _, _ = judged
    query_set = tmp_path / "hostile.json"
    query_set.write_text(
        json.dumps(
            {
                "name": "hostile",
                "description": "",
                "sampling": "manual",
                "querySetQueries": [
                    {"queryText": SCRIPT},
                    {"queryText": IMG},
                    {"queryText": LONG_LINE},
                    {"queryText": BIDI},
                ],
            }
        )
    )
    _cli(settings, "judgments", "import", str(query_set), "--tenant", "A", "--name", "hostile")
    set_id = set_id_for("A", "hostile")
    _sign_in(browser, server, KEY_A)
    shown_bidi = "refund [U+202E]evil[U+202C] policy"  # the controls shown, not obeyed
    for number, question in enumerate((SCRIPT, IMG, LONG_LINE, BIDI)):
        browser.get(f"http://127.0.0.1:{server.port}/judge/sets/{set_id}/{number}")
        heading = _wait(browser, ec.presence_of_element_located((By.ID, "question")))
        shown = browser.execute_script("return arguments[0].textContent", heading)
        assert shown == (shown_bidi if question == BIDI else question)
        style = "return getComputedStyle(arguments[0]).unicodeBidi"
        assert browser.execute_script(style, heading) == "isolate"
        assert browser.find_elements(By.CSS_SELECTOR, "main img") == []
        assert browser.find_elements(By.CSS_SELECTOR, "main script") == []
        assert browser.execute_script("return window.__pwned") is None
        texts = browser.execute_script(
            "return Array.from(document.querySelectorAll('.result .text')).map(e => e.textContent)"
        )
        if number < 2:  # the hostile note is found, and shown as the text it is
            assert any("<script>window.__pwned = 3</script>" in text for text in texts), texts
            assert any('"><img src=x onerror="window.__pwned = 4">' in text for text in texts)
            assert any("Reversed: [U+202E]evil[U+202C]." in text for text in texts), texts
        assert not any("\u202e" in text for text in texts)


def _import_set(settings, tmp_path: Path, name: str, questions: list[str]) -> str:
    """A query set of tenant A holding ``questions``; its id."""
    path = tmp_path / f"{name}.json"
    sets = {"name": name, "description": "", "sampling": "manual"}
    sets["querySetQueries"] = [{"queryText": question} for question in questions]
    path.write_text(json.dumps(sets))
    _cli(settings, "judgments", "import", str(path), "--tenant", "A", "--name", name)
    return set_id_for("A", name)


def _stored(client, settings, set_id: str) -> dict[str, int]:
    """What the judgments index holds for question 0 of ``set_id``: chunk id -> grade."""
    state = judging_state(client, settings.index_name, "A", set_id)
    return {chunk_id: grade.grade for chunk_id, grade in state.grades.get(0, {}).items()}


def test_fast_grades_on_a_slow_server_are_each_stored_on_their_chunk(
    judged, slow_server, browser, client, tmp_path
):
    settings, _, _ = judged
    server, slow = slow_server
    set_id = _import_set(settings, tmp_path, "fast", ["refund to the original payment method"])
    _sign_in(browser, server, KEY_A)
    browser.get(f"http://127.0.0.1:{server.port}/judge/sets/{set_id}/0")
    rows = _wait(browser, ec.presence_of_all_elements_located((By.CSS_SELECTOR, ".result")))
    chunk_ids = [row.get_attribute("data-chunk-id") for row in rows]
    assert len(chunk_ids) >= 4
    body = browser.find_element(By.TAG_NAME, "body")
    status = browser.find_element(By.ID, "status")
    for key in "210":  # three grades, far faster than one save
        body.send_keys(key)
        time.sleep(0.05)
    _wait(browser, lambda d: status.text == "saved")
    assert _stored(client, settings, set_id) == dict(zip(chunk_ids, (2, 1, 0), strict=False))
    for row, grade in zip(rows, (2, 1, 0), strict=False):
        chosen = row.find_elements(By.CSS_SELECTOR, ".grade.chosen")
        assert [button.get_attribute("data-grade") for button in chosen] == [str(grade)]

    # A save that fails says so and keeps the grade; r sends it again, and then it is stored.
    slow.failing = True
    body.send_keys("1")  # the fourth result, selected after the third grade
    _wait(browser, lambda d: status.text.startswith("not saved: the server is down"))
    assert "1 grade kept; press r to retry" in status.text
    assert chunk_ids[3] not in _stored(client, settings, set_id)
    assert "unsaved" in rows[3].get_attribute("class")
    slow.failing = False
    body.send_keys("r")
    _wait(browser, lambda d: status.text == "saved")
    assert _stored(client, settings, set_id)[chunk_ids[3]] == 1
