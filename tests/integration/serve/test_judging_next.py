"""What to judge next on the judging page (issue #54, item 8), over plain HTTP: with the tenant's
own learned model served, the question list shows how far the model moves fusion's top 10 and
"judge next" follows it; another tenant, without a model, is ordered by the modes' disagreement
and never by the first tenant's model; the page's searches, reranked or not, never reach the
query log.

Reuses the index and keys of ``test_judging_browser`` (tenants A and B, the query log on), with
``HARBOUR_DOCS`` pushed beside its three documents for both tenants, so a top 10 has documents
to move: the test's model (trained on synthetic questions whose answer alone has its words in
its heading) lifts a section whose heading holds the question's words. With
``JUDGE_SCREENSHOTS=<folder>`` it saves the list sorted by model moves for guide/judging.md.
"""

from __future__ import annotations

import html
import http.client
import json
import math
import os
import re
from collections.abc import Iterator

import pytest
from selenium.webdriver.common.by import By

from loader.eval.live import ranking_difference, top_documents
from loader.eval.runner import CHUNKS_PER_DOCUMENT, DEFAULT_CANDIDATES
from loader.ingest.sync import push
from loader.models.rerank.learned import LearnedReranker
from loader.query.judgments import set_id_for
from loader.query.query_log import queries_index
from loader.query.request import SearchRequest
from loader.query.search import search
from loader.serve.app import create_app
from loader.serve.judge_scores import NEXT_BY
from tests.integration.serve.http_server import Server, signed_in
from tests.integration.serve.test_judging_browser import (  # noqa: F401 (fixtures)
    KEY_A,
    KEY_B,
    _cli,
    _count,
    _screenshot,
    _sign_in,
    _wait,
    browser,
    judged,
)
from tests.unit.models.rerank.test_learned_files import train

pytestmark = pytest.mark.integration

QUESTIONS = [
    "ferry timetable",
    "compensation for late deliveries",
    "bicycle tickets on the ferry",
    "wallet top up",
    "harbour parking",
]
HARBOUR_DOCS = {
    "timetable.md": "# Harbour guide\n\n## Ferry timetable\n\nSailings leave the harbour at "
    "seven, nine and noon. In winter the last sailing is at four.\n",
    "bicycles.md": "# Harbour guide\n\n## Bicycle tickets on the ferry\n\nA bicycle rides free "
    "on the morning sailings. Ask at the kiosk.\n",
    **{
        f"notes-{n}.md": f"# Island notes {n}\n\nThe ferry timetable changes in winter; the "
        f"ferry timetable is posted at the ferry office. Harbour parking costs {n} euros; "
        "bicycle tickets on the ferry are sold on board.\n"
        for n in range(1, 7)
    },
}


@pytest.fixture(scope="module")
def model_server(judged, client, embedder, tmp_path_factory) -> Iterator:  # noqa: F811
    """A server whose settings name a folder of learned models holding tenant A's only."""
    settings, _, _ = judged
    docs = tmp_path_factory.mktemp("harbour")
    for name, text in HARBOUR_DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    for tenant in ("A", "B"):
        report = push(docs, settings, tenant=tenant, client=client, embedder=embedder)
        assert report.failed == 0, report
    client.indices.refresh(index=settings.index_name)
    models = tmp_path_factory.mktemp("learned-models")
    train(models / "A", rounds=300, seed=1, tenant="A")  # enough trees to move a top 10
    served = settings.replace(rerank="auto", learned_reranker=str(models))
    with Server(create_app(served, embedder=embedder)) as running:
        yield running, served, models


def _import(settings, tmp_path, tenant: str) -> str:
    path = tmp_path / f"next-{tenant}.json"
    sets = {"name": "next", "description": "", "sampling": "manual"}
    sets["querySetQueries"] = [{"queryText": question} for question in QUESTIONS]
    path.write_text(json.dumps(sets))
    _cli(settings, "judgments", "import", str(path), "--tenant", tenant, "--name", "next")
    return set_id_for(tenant, "next")


def _page(server: Server, key: str, path: str) -> str:
    cookie, _ = signed_in(server, key)
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=300)
    connection.request("GET", path, headers={"Cookie": cookie})
    response = connection.getresponse()
    body = response.read().decode()
    assert response.status == 200, body[:500]
    return body


def _column(page: str, name: str) -> dict[int, float | None]:
    """Each row's number -> the value of its ``name`` cell."""
    rows = re.findall(r'<tr data-number="(\d+)">(.*?)</tr>', page, re.S)
    values = {}
    for number, row in rows:
        cell = re.search(rf'<td class="{name}">([^<]*)</td>', row)
        if cell is not None:
            values[int(number)] = None if cell.group(1) == "–" else float(cell.group(1))
    return values


def _next(page: str) -> tuple[int, str]:
    """The number "judge next" links to, and what it says chose it."""
    number = re.search(r'id="judge-next">.*?/(\d+)" class="question"', page, re.S).group(1)
    by = html.unescape(re.search(r'<span id="next-by">([^<]*)</span>', page).group(1))
    return int(number), by


def _widest(values: dict[int, float | None]) -> int:
    return min(
        values, key=lambda number: (values[number] is None, -(values[number] or 0.0), number)
    )


def test_judge_next_follows_the_tenants_own_model_else_the_modes(
    judged,  # noqa: F811
    model_server,
    client,
    browser,  # noqa: F811
    tmp_path,
):
    settings, _, _ = judged
    running, served, models = model_server
    alias = settings.index_name
    set_a, set_b = _import(settings, tmp_path, "A"), _import(settings, tmp_path, "B")
    logged = _count(client, queries_index(alias), {"match_all": {}})

    page_a = _page(running, KEY_A, f"/judge/sets/{set_a}/questions")
    moves = _column(page_a, "moves")
    assert sorted(moves) == list(range(len(QUESTIONS)))
    assert all(0.0 <= value <= 1.0 for value in moves.values() if value is not None)
    assert any(value for value in moves.values()), "the model moves no question's top 10"
    # Each figure is the model's own reranking of that question against fusion, as searched
    # by `loader eval` (one hit per document), in the mode the model reranks.
    model = LearnedReranker(models / "A")
    for number, question in enumerate(QUESTIONS):
        ranked = {}
        for reranker in (None, model):
            request = SearchRequest.from_settings(
                served, question, tenant="A", mode=served.search_mode, rerank=reranker is not None,
                k=DEFAULT_CANDIDATES, candidates=DEFAULT_CANDIDATES * CHUNKS_PER_DOCUMENT,
                one_per_document=True,
            )  # fmt: skip
            found = search(
                request, served.replace(query_log="off"), client=client, reranker=reranker
            )
            ranked[reranker] = top_documents(
                [(h.chunk_id, h.source, h.final_score) for h in found.hits]
            )
            chunks = {h.source: h.chunk_id for h in found.hits}
        if number == 0:
            first = (ranked, chunks)
        assert moves[number] == pytest.approx(
            ranking_difference(ranked[None], ranked[model]), abs=0.006
        )
    assert _next(page_a) == (_widest(moves), NEXT_BY["moves"])
    by_moves = _page(running, KEY_A, f"/judge/sets/{set_a}/questions?sort=moves")
    shown = [int(n) for n in re.findall(r'<tr data-number="(\d+)">', by_moves)]
    assert shown == sorted(moves, key=lambda n: (moves[n] is None, -(moves[n] or 0.0), n))

    # The model's live score beside the modes': a document graded 2, the model's nDCG@10 is
    # the one its own ranking gives (with one relevant document, 1 / log2(1 + its rank)).
    ranked, chunks = first
    document = next(d for d in ranked[model] if d in ranked[None] and d in chunks)
    cookie, token = signed_in(running, KEY_A)
    status, body = running.raw(
        "POST", f"/judge/sets/{set_a}/0/grade", {"chunk_id": chunks[document], "grade": 2},
        {"Cookie": cookie, "X-CSRF-Token": token},
    )  # fmt: skip
    assert status == 200, body
    status, body = running.raw("GET", f"/judge/sets/{set_a}/0/scores", headers={"Cookie": cookie})
    assert status == 200, body
    scores = json.loads(body)["scores"]
    for key, order in (("learned", ranked[model]), (served.search_mode, ranked[None])):
        assert scores[key] == pytest.approx(1 / math.log2(2 + order.index(document)), abs=1e-6)
    listed = _page(running, KEY_A, f"/judge/sets/{set_a}/questions")
    assert 'data-sort="learned"' in listed
    assert f'<td class="score" data-mode="learned">{scores["learned"]:.3f}</td>' in listed
    # In a browser, the question page's live scores gain the model's column from /scores.
    _sign_in(browser, running, KEY_A)
    browser.get(f"http://127.0.0.1:{running.port}/judge/sets/{set_a}/0")
    live = browser.find_element(By.ID, "live-scores")
    _wait(browser, lambda d: live.get_attribute("data-state") == "current")
    learned_cell = live.find_element(By.CSS_SELECTOR, '.score[data-mode="learned"] b')
    assert learned_cell.text == f"{scores['learned']:.3f}"
    if "JUDGE_SCREENSHOTS" in os.environ:
        browser.get(f"http://127.0.0.1:{running.port}/judge/sets/{set_a}/questions?sort=moves")
        _screenshot(browser, "judging-model-moves.png")

    # Tenant B has no model of its own: no model column, the modes' disagreement chooses.
    page_b = _page(running, KEY_B, f"/judge/sets/{set_b}/questions")
    assert 'class="moves"' not in page_b and "model moves" not in page_b
    assert 'data-sort="learned"' not in page_b
    assert _next(page_b) == (_widest(_column(page_b, "disagree")), NEXT_BY["disagree"])
    # Neither page's searches, fused or reranked, were logged.
    assert _count(client, queries_index(alias), {"match_all": {}}) == logged
