"""Trying fusion settings on a judged set, on a real node: a trial with the applied settings (in
each hybrid mode) gives the very rankings and nDCG@10 of the live scores; a trial that gives BM25
all of RRF's weight puts the BM25 mode's own documents first, scored by hand from their ranks;
another tenant's set is a 404, the tenant's own trial never shows another tenant's chunks and
nothing is logged; a bad or an index-changing setting is a 422 naming it (exit code 2 on the
command line), no session a 401, no token a 403, a cluster that is down a 503.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from loader.cli import cli
from loader.eval.live import question_score, top_documents
from loader.eval.set_searches import judged_hits
from loader.index.apply import apply_config
from loader.ingest.sync import push
from loader.modes import HYBRID_MODES
from loader.query.judgments import create_query_set, save_grade
from loader.query.query_log import queries_index
from loader.serve.app import create_app
from tests.conftest import cleanup_owned
from tests.integration.serve.http_server import Server, free_port, signed_in

pytestmark = pytest.mark.integration

KEY_A = "trial-key-a-Vb6nQ2xL8pR4tW1y"
KEY_B = "trial-key-b-Jk3mZ7cH5sD9fG0a"
TOPICS = {
    "ferry.md": ("Ferry timetable", "Sailings leave the harbour at seven, nine and noon."),
    "parking.md": ("Harbour parking", "Parking costs four euros a day at the north gate."),
    "bicycles.md": ("Bicycles", "A bicycle rides free on the morning sailings."),
    "cafe.md": ("The cafe", "The cafe by the pier serves soup, bread and coffee."),
    "tickets.md": ("Tickets", "Buy ferry tickets at the kiosk or on board; E1043 is a day pass."),
    "weather.md": ("Weather", "Sailings stop when the wind blows above force eight."),
    "lockers.md": ("Lockers", "Lockers by the harbour office keep bags for two euros."),
    "dogs.md": ("Dogs", "Dogs travel free on the ferry if kept on a lead."),
}
QUESTIONS = [
    "when does the ferry leave",
    "where can I park my car at the harbour",
    "can I take my bicycle on the ferry",
    "what does ticket E1043 give",
    "is there coffee near the pier",
]
ANSWERS = {0: "ferry.md", 1: "parking.md", 2: "bicycles.md", 3: "tickets.md", 4: "cafe.md"}


@pytest.fixture(scope="module")
def harbour(client, base_settings, embedder, tmp_path_factory) -> Iterator:
    """``TOPICS`` for tenants A and B, A alone with a page that outranks its ferry answer, a set
    of ``QUESTIONS`` for each graded with ``ANSWERS``, keys for both; the query log on."""
    root = tmp_path_factory.mktemp("trials")
    keys = root / "api-keys.toml"
    keys.write_text(f'[keys]\n"{KEY_A}" = "A"\n"{KEY_B}" = "B"\n', encoding="utf-8")
    keys.chmod(0o600)
    docs = root / "harbour"
    docs.mkdir()
    for name, (heading, text) in TOPICS.items():
        (docs / name).write_text(f"# Harbour guide\n\n## {heading}\n\n{text}\n", encoding="utf-8")
    own = root / "only-a"
    own.mkdir()
    (own / "ferry-faq.md").write_text(
        "# Ferry\n\n## When does the ferry leave\n\nWhen does the ferry leave? The ferry leaves "
        "when the ferry timetable says the ferry leaves.\n",
        encoding="utf-8",
    )
    alias = f"t-trials-{uuid.uuid4().hex[:8]}"
    settings = base_settings.replace(
        index_name=alias, query_log="ubi", rerank="off", api_keys_file=str(keys)
    )
    try:
        apply_config(settings, dimension=embedder.dimension, client=client)
        for tenant, folders in (("A", (docs, own)), ("B", (docs,))):
            for folder in folders:
                report = push(folder, settings, tenant=tenant, client=client, embedder=embedder)
                assert report.failed == 0, report
        sets = {}
        for tenant in ("A", "B"):
            sets[tenant] = create_query_set(client, alias, tenant, "ferries", questions=QUESTIONS)
            for number, source in ANSWERS.items():
                query = {
                    "bool": {"filter": [{"term": {"tenant": tenant}}, {"term": {"source": source}}]}
                }
                found = client.search(index=alias, body={"query": query, "size": 1})
                chunk = found["hits"]["hits"][0]["_source"]["chunk_id"]
                save_grade(client, alias, tenant, sets[tenant].set_id, number, chunk, 2)
        client.indices.refresh(index=alias)
        yield settings, sets
    finally:
        cleanup_owned(client, alias)


def _try(server, cookie, token, set_id, settings) -> tuple[int, dict]:
    return server.request(
        "POST", f"/judge/sets/{set_id}/trials", {"settings": settings},
        {"Cookie": cookie, "X-CSRF-Token": token},
    )  # fmt: skip


def _logged(client, alias: str) -> int:
    client.indices.refresh(index=queries_index(alias))
    return client.count(index=queries_index(alias))["count"]


def _same_up_to_ties(ranking: list[str], hits: list, why: tuple) -> None:
    """``ranking`` is the live ``hits``' top documents, but for the order within a run of equal
    scores: OpenSearch orders tied collapsed hits by a hash map of the collapse keys, whose seed
    changes with each start of the node, so no client can know that order."""
    live = top_documents(hits)
    scores = [score for _chunk, _source, score in hits][: len(live)]
    assert len(ranking) == len(live), why
    start = 0
    while start < len(live):
        end = start
        while end < len(live) and scores[end] == scores[start]:
            end += 1
        assert set(ranking[start:end]) == set(live[start:end]), (why, ranking, live)
        start = end


def test_the_applied_settings_give_the_live_scores(harbour, client, embedder):
    settings, sets = harbour
    set_a = sets["A"].set_id
    quiet = settings.replace(query_log="off")
    logged = _logged(client, settings.index_name)
    with Server(create_app(settings, embedder=embedder)) as server:
        cookie, token = signed_in(server, KEY_A)
        for mode in HYBRID_MODES:
            status, result = _try(server, cookie, token, set_a, {"search_mode": mode})
            assert status == 200, result
            assert (result["mode_now"], result["mode_trial"]) == (settings.search_mode, mode)
            for row, question in zip(result["questions"], QUESTIONS, strict=True):
                where = {"client": client, "embedder": embedder}
                for side, searched in (("now", settings.search_mode), ("trial", mode)):
                    hits = judged_hits(quiet, question, "A", searched, **where)
                    _same_up_to_ties(row["rankings"][side], hits, (mode, side, question))
                    score = question_score(hits, [{"source": ANSWERS[row["number"]], "grade": 2}])
                    assert row[side] == pytest.approx(score), (mode, side, question)
            if mode == settings.search_mode:
                assert result["counts"] == {"better": 0, "worse": 0, "unchanged": 5}
                assert result["toml"] == [f'search_mode = "{mode}"']
        # The page's searches are no user's: nothing logged.
        assert _logged(client, settings.index_name) == logged


def test_all_of_rrf_weight_on_bm25_ranks_as_bm25_by_hand(harbour, client, embedder):
    """rrf_bm25_weight = 1 leaves the vector side no weight: the documents BM25 finds come first
    in BM25's own order (none of these questions but 3 holds an identifier)."""
    settings, sets = harbour
    quiet = settings.replace(query_log="off")
    with Server(create_app(settings, embedder=embedder)) as server:
        cookie, token = signed_in(server, KEY_A)
        status, result = _try(server, cookie, token, sets["A"].set_id, {"rrf_bm25_weight": "1"})
    assert status == 200, result
    assert result["toml"] == ["rrf_bm25_weight = 1.0"]
    assert result["fusion_trial"]["weights"][:2] == [pytest.approx(0.4), 0.0]
    deltas = []
    for row in result["questions"]:
        if row["number"] == 3:
            continue
        bm25 = top_documents(judged_hits(quiet, QUESTIONS[row["number"]], "A", "bm25",
                                         client=client, embedder=None))  # fmt: skip
        assert row["rankings"]["trial"][: len(bm25)] == bm25
        answer = ANSWERS[row["number"]]
        expected = 1 / math.log2(1 + bm25.index(answer) + 1)
        assert row["trial"] == pytest.approx(expected)
        assert row["delta"] == pytest.approx(row["trial"] - row["now"])
        deltas.append(row["delta"])
    # A's ferry page says the question's words most often: BM25 alone puts it above the answer.
    assert result["questions"][0]["rankings"]["trial"][0] == "ferry-faq.md"
    assert result["questions"][0]["trial"] == pytest.approx(1 / math.log2(3))
    means = result["means"]
    assert means["delta"] == pytest.approx(means["trial"] - means["now"])
    counts = result["counts"]
    assert sum(counts.values()) == means["questions"] == 5


def test_a_sweep_scores_each_value_as_its_own_trial_does(harbour, embedder):
    """A sweep fuses every value from one search of the lists: each value's means and counts
    are what that value's own trial gives, and the answer's table is the best value's."""
    settings, sets = harbour
    set_a = sets["A"].set_id
    values = [0.2, 0.6, 1.0]
    with Server(create_app(settings, embedder=embedder)) as server:
        cookie, token = signed_in(server, KEY_A)
        single = {}
        for value in values:
            status, single[value] = _try(server, cookie, token, set_a, {"rrf_bm25_weight": value})
            assert status == 200, single[value]
        status, swept = server.request(
            "POST", f"/judge/sets/{set_a}/trials",
            {"settings": {"rrf_bm25_weight": 0.5}, "sweep": {"rrf_bm25_weight": values}},
            {"Cookie": cookie, "X-CSRF-Token": token},
        )  # fmt: skip
        assert status == 422 and "sweep it or set it" in swept["error"], swept
        status, swept = server.request(
            "POST", f"/judge/sets/{set_a}/trials", {"sweep": {"rrf_bm25_weight": values}},
            {"Cookie": cookie, "X-CSRF-Token": token},
        )  # fmt: skip
    assert status == 200, swept
    rows = swept["sweep"]["values"]
    assert [row["value"] for row in rows] == values
    for row in rows:
        assert row["means"] == single[row["value"]]["means"], row["value"]
        assert row["counts"] == single[row["value"]]["counts"], row["value"]
    trials = [single[value]["means"]["trial"] for value in values]
    best = values[trials.index(max(trials))]
    assert swept["sweep"]["best"] == best
    assert swept["questions"] == single[best]["questions"]
    assert swept["toml"] == [f"rrf_bm25_weight = {best}"]

    where = ["--tenant", "A", "--name", "ferries", "--index", settings.index_name,
             "--url", settings.opensearch_url]  # fmt: skip
    ran = CliRunner().invoke(cli, ["judgments", "try", *where, "--sweep", "rrf_bm25_weight=0.2,1"])
    assert ran.exit_code == 0, ran.output
    assert f"  rrf_bm25_weight = 1.0: {single[1.0]['means']['trial']:.4f}" in ran.output
    assert f"  rrf_bm25_weight = 0.2: {single[0.2]['means']['trial']:.4f}" in ran.output
    for bad in ("rrf_bm25_weight=0.2", "rrf_bm25_weight=0.2,0.2", "chunk_strategy=fixed,x"):
        ran = CliRunner().invoke(cli, ["judgments", "try", *where, "--sweep", bad])
        assert ran.exit_code == 2, (bad, ran.output)


def test_tenants_statuses_and_the_command_line(harbour, client, embedder):
    settings, sets = harbour
    set_a, set_b = sets["A"].set_id, sets["B"].set_id
    with Server(create_app(settings, embedder=embedder)) as server:
        cookie, token = signed_in(server, KEY_A)
        cookie_b, token_b = signed_in(server, KEY_B)
        trial = {"rrf_bm25_weight": 0.9}
        status, answer = _try(server, cookie_b, token_b, set_a, trial)
        assert status == 404, answer
        status, mine = _try(server, cookie_b, token_b, set_b, trial)
        assert status == 200, mine
        for row in mine["questions"]:
            assert "ferry-faq.md" not in row["rankings"]["now"] + row["rankings"]["trial"]
        status, page = server.raw("GET", f"/judge/sets/{set_a}/try", headers={"Cookie": cookie})
        assert status == 200 and 'id="trial-rrf_bm25_weight"' in page
        status, page = server.raw(
            "GET", f"/judge/sets/{set_a}/questions", headers={"Cookie": cookie}
        )
        assert f'href="/judge/sets/{set_a}/try"' in page
        bad = {
            "chunk_strategy": "fixed",
            "embedding_model": "x",
            "rrf_bm25_weight": 1.5,
            "rrf_rank_constant": "0",
            "search_mode": "bm25",
            "no_such_setting": 1,
        }
        for name, value in bad.items():
            status, answer = _try(server, cookie, token, set_a, {name: value})
            assert status == 422 and f"'{name}'" in answer["error"], (name, answer)
        status, answer = server.request("POST", f"/judge/sets/{set_a}/trials", "{",
                                        {"Cookie": cookie, "X-CSRF-Token": token})  # fmt: skip
        assert status == 422 and answer["error"].startswith("settings: ")
        status, _ = _try(server, "", token, set_a, trial)
        assert status == 401
        status, _ = _try(server, cookie, "", set_a, trial)
        assert status == 403
        status, answer = _try(server, cookie, token, "0" * 20, trial)
        assert status == 404, answer
        status, result = _try(server, cookie, token, set_a, trial)

    where = ["--tenant", "A", "--name", "ferries", "--index", settings.index_name,
             "--url", settings.opensearch_url]  # fmt: skip
    ran = CliRunner().invoke(cli, ["judgments", "try", *where, "--set", "rrf_bm25_weight=0.9"])
    assert ran.exit_code == 0, ran.output
    assert f"mean nDCG@10 {result['means']['now']:.4f} -> {result['means']['trial']:.4f}" in (
        ran.output
    )
    assert "  rrf_bm25_weight = 0.9" in ran.output
    for assignment in ("chunk_target_tokens=100", "rrf_bm25_weight=2", "rrf_bm25_weight"):
        ran = CliRunner().invoke(cli, ["judgments", "try", *where, "--set", assignment])
        assert ran.exit_code == 2, (assignment, ran.output)
        assert "rrf_bm25_weight" in ran.output or "chunk_target_tokens" in ran.output

    with Server(create_app(settings, embedder=embedder)) as up:
        cookie, token = signed_in(up, KEY_A)
    down = settings.replace(opensearch_url=f"http://127.0.0.1:{free_port()}", request_timeout=2.0)
    with Server(create_app(down, load_models=False)) as server:
        status, answer = _try(server, cookie, token, set_a, trial)
        assert status == 503, answer
