"""The click model without a cluster: simulated readers whose true grades are known, the log read
tenant by tenant, the prior, the grades and the questions file they are written as."""

from __future__ import annotations

import json
import random

import pytest
from click.testing import CliRunner

from loader.cli import cli
from loader.errors import ConfigError
from loader.eval.datasets import load_questions
from loader.eval.judgments import graded_qrels, read_judgment_file
from loader.train.click_export import click_questions_lines
from loader.train.clicks import (
    ClickGrading,
    ClickModel,
    Impression,
    click_judgments,
    click_through_rates,
    fit_position_model,
    impressions_from_log,
)

# A reader clicks a result when they examine it (1/rank) and find it attractive; how attractive
# a chunk is depends on its true grade, with spread within a grade.
ATTRACTIVENESS = {0: (0.02, 0.12), 1: (0.22, 0.42), 2: (0.55, 0.85)}
SEEDS = range(5)


def examined(rank: int) -> float:
    return 1.0 / (rank + 1)


def simulated_log(
    seed: int,
    *,
    questions: int = 40,
    chunks: int = 8,
    searches: int = 200,
    ranker_noise: float = 2.0,
    reorder: float = 0.7,
    misclick: float = 0.01,
) -> tuple[dict[tuple[str, str], int], list[Impression]]:
    """True grades per (question, chunk), and searches by readers with a position bias.

    Each question's chunks are ranked by a first-stage score loosely tied to the grade
    (``ranker_noise``), jittered per search (``reorder``: rewrites, spellings, modes reorder
    results as in real logs); a reader also clicks any result by mistake with ``misclick``.
    """
    rng = random.Random(seed)
    truth: dict[tuple[str, str], int] = {}
    impressions = []
    for q in range(questions):
        question = f"question {q}"
        grades = [rng.choice((0, 0, 0, 1, 1, 2)) for _ in range(chunks)]
        attractive = [rng.uniform(*ATTRACTIVENESS[grade]) for grade in grades]
        first_stage = [grade + rng.gauss(0, ranker_noise) for grade in grades]
        ids = [f"q{q}-c{c}" for c in range(chunks)]
        truth.update({(question, ids[c]): grades[c] for c in range(chunks)})
        for _ in range(searches):
            scores = [score + rng.gauss(0, reorder) for score in first_stage]
            order = sorted(range(chunks), key=lambda c: -scores[c])
            clicked = frozenset(
                ids[c]
                for rank, c in enumerate(order)
                if rng.random() < examined(rank) * attractive[c] or rng.random() < misclick
            )
            impressions.append(Impression(question, tuple(ids[c] for c in order), clicked))
    return truth, impressions


def kendall_tau_b(xs: list[float], ys: list[float]) -> float:
    concordant = discordant = only_x = only_y = 0
    for i in range(len(xs)):
        for j in range(i + 1, len(xs)):
            dx = (xs[i] > xs[j]) - (xs[i] < xs[j])
            dy = (ys[i] > ys[j]) - (ys[i] < ys[j])
            if dx and dy:
                concordant += dx == dy
                discordant += dx != dy
            elif dx:
                only_x += 1
            elif dy:
                only_y += 1
    pairs = concordant + discordant
    return (concordant - discordant) / ((pairs + only_x) * (pairs + only_y)) ** 0.5


def mean_tau(truth: dict[tuple[str, str], int], estimates: dict[tuple[str, str], float]) -> float:
    """Kendall's tau-b between each question's true grades and the estimates, averaged over the
    questions whose chunks are not all graded alike."""
    by_question: dict[str, list[tuple[str, str]]] = {}
    for pair in truth:
        by_question.setdefault(pair[0], []).append(pair)
    taus = [
        kendall_tau_b([truth[p] for p in pairs], [estimates[p] for p in pairs])
        for pairs in by_question.values()
        if len({truth[p] for p in pairs}) > 1  # all graded alike: no order to get right
    ]
    return sum(taus) / len(taus)


@pytest.fixture(scope="module")
def simulated() -> list[tuple[dict[tuple[str, str], int], list[Impression], ClickModel]]:
    """Five seeded logs of 40 questions, 8 chunks, 200 searches each, with their fitted models."""
    logs = []
    for seed in SEEDS:
        truth, impressions = simulated_log(seed)
        logs.append((truth, impressions, fit_position_model(impressions)))
    return logs


def test_position_corrected_estimates_order_chunks_closer_to_the_truth_than_raw_ctr(simulated):
    """Measured (tau-b against the true grades, PBM / raw CTR): 0.745/0.683, 0.787/0.729,
    0.773/0.648, 0.771/0.697, 0.773/0.724: a mean gain of 0.074, the least 0.049."""
    gains = []
    for truth, impressions, model in simulated:
        corrected = mean_tau(truth, model.attractiveness)
        raw = mean_tau(truth, click_through_rates(impressions))
        assert corrected - raw > 0.01, (corrected, raw)
        gains.append(corrected - raw)
    assert sum(gains) / len(gains) > 0.03, gains


def test_grades_from_the_estimates_match_the_true_grades(simulated):
    """The stated thresholds (0.2, 0.5) on the corrected estimate give the true grade to 0.88 to
    0.92 of the pairs; on raw CTR, which rank makes smaller, to 0.60 to 0.62."""
    grading = ClickGrading(min_impressions=1)
    for truth, impressions, model in simulated:
        judged = {(j.question, j.chunk_id): j.grade for j in click_judgments(model, grading)}
        assert judged.keys() == truth.keys()
        right = sum(judged[pair] == grade for pair, grade in truth.items()) / len(truth)
        ctr = click_through_rates(impressions)
        raw_right = sum(grading.grade(ctr[p]) == grade for p, grade in truth.items()) / len(truth)
        assert right > 0.8 and right > raw_right + 0.15, (right, raw_right)


def test_varied_rankings_recover_the_examination_curve():
    """Without misclicks or the prior, EM finds the simulation's 1/rank: measured within 0.012 of
    it at every rank."""
    _, impressions = simulated_log(0, questions=20, searches=1000, misclick=0.0)
    model = fit_position_model(impressions, prior_impressions=0)
    assert model.identified == [True] * 8 and model.varied_pairs == 158  # of 160 pairs
    for rank, examination in enumerate(model.examination):
        assert examination == pytest.approx(examined(rank), abs=0.05)


def test_one_fixed_ranking_keeps_the_first_guess_and_divides_ctr_by_it():
    _, impressions = simulated_log(0, questions=10, reorder=0.0)
    model = fit_position_model(impressions, prior_impressions=0)
    assert model.varied_pairs == 0
    assert model.identified == [True] + [False] * 7
    assert model.examination == pytest.approx([examined(rank) for rank in range(8)])
    ctr = click_through_rates(impressions)
    rank_of = {(i.question, c): r for i in impressions for r, c in enumerate(i.shown)}
    for pair, rate in ctr.items():
        expected = rate / examined(rank_of[pair])
        if expected < 0.99:
            assert model.attractiveness[pair] == pytest.approx(expected, abs=1e-3), pair


def logged(query_id: str, question: str, shown: list[str], tenant: str = "A") -> dict:
    """A ``ubi_queries`` source as ``loader.query.query_log`` writes it (the fields read here)."""
    return {
        "query_id": query_id,
        "user_query": question,
        "query_response_hit_ids": shown,
        "query_attributes": {"tenant": tenant},
    }


def event(query_id: str, tenant: str = "A", action: str = "click", **attributes) -> dict:
    """A ``ubi_events`` source: ``object_id`` and/or ``position`` in its attributes."""
    body: dict = {"tenant": tenant}
    if "object_id" in attributes:
        body["object"] = {"object_id": attributes["object_id"], "object_id_field": "chunk_id"}
    if "position" in attributes:
        body["position"] = {"ordinal": attributes["position"]}
    return {"action_name": action, "query_id": query_id, "event_attributes": body}


def test_the_log_is_read_for_one_tenant_and_clicks_name_a_shown_chunk():
    queries = [
        logged("a1", "Refund time?", ["c1", "c2", "c3"]),
        logged("a2", "refund time", ["c2", "c1"]),
        logged("b1", "refund time", ["b-c1", "b-c2"], tenant="B"),
        logged("a3", "   ", ["c1"]),  # no question: not a search to learn from
        logged("a4", "nothing shown", []),
        # Hand-written entries of the wrong shape are passed by, not a crash.
        {"query_id": "x1", "user_query": "q", "query_attributes": "A"},
        {**logged("x2", "q", []), "query_response_hit_ids": "c1"},
    ]
    events = [
        event("a1", object_id="c2"),
        event("a1", object_id="c2", position=2),  # the same chunk twice: one click
        event("a1", position=3),  # no object id: the chunk at position 3
        event("a2", object_id="c9"),  # not shown on that search
        event("a2", position=True),  # not a position
        event("a2", position=7),  # beyond what was shown
        event("a2", action="answered", object_id="c2"),  # not a click
        event("b1", object_id="b-c1", tenant="B"),  # B's own click
        event("b1", object_id="b-c1"),  # says tenant A, names B's query: ignored
        event("b1", position=1),
        {"action_name": "click", "query_id": "a2", "event_attributes": ["A"]},
        {**event("a2", position=1), "event_attributes": {"tenant": "A", "position": 1}},
    ]
    assert impressions_from_log(queries, events, "A") == [
        Impression("Refund time?", ("c1", "c2", "c3"), frozenset({"c2", "c3"})),
        Impression("refund time", ("c2", "c1"), frozenset()),
    ]
    assert impressions_from_log(queries, events, "B") == [
        Impression("refund time", ("b-c1", "b-c2"), frozenset({"b-c1"}))
    ]


def test_the_prior_keeps_a_chunk_shown_twice_from_an_extreme_estimate():
    """Two clicks in two impressions at rank 1 is not a certainty: with 2 pseudo-impressions at
    0.1 the estimate is (2 + 0.2) / (2 + 2); only without the prior is it 1."""
    common = [
        Impression("q", ("a", "b"), frozenset({"a"} if n % 4 == 0 else ())) for n in range(40)
    ]
    rare = [Impression("q", ("rare", "a"), frozenset({"rare"}))] * 2
    smoothed = fit_position_model(common + rare)
    assert smoothed.attractiveness["q", "rare"] == pytest.approx(0.55, abs=1e-6)
    # Nothing was ever clicked at rank 2: without its own prior (10 pseudo-impressions at 1/2)
    # its examination fell to 0, and its chunks' estimates to whatever the prior said.
    assert smoothed.examination[1] > 0.3
    unsmoothed = fit_position_model(common + rare, prior_impressions=0)
    assert unsmoothed.attractiveness["q", "rare"] == pytest.approx(1.0, abs=1e-3)
    judged = click_judgments(fit_position_model(common + rare), ClickGrading(min_impressions=3))
    # "rare" is not graded (2 impressions); "b", never clicked at rank 2, is not relevant.
    assert {(j.chunk_id, j.grade, j.impressions, j.clicks) for j in judged} == {
        ("a", 1, 42, 10),
        ("b", 0, 40, 0),
    }


def test_a_chunk_never_clicked_is_not_lifted_to_a_grade_by_a_log_full_of_clicks():
    """Every search clicks its first result: the log's mean attractiveness is high, and a prior
    at that mean graded the never-clicked chunk at rank 3 1 (0.23); at 0.1 both stay at 0."""
    impressions = [Impression("q", ("a", "b", "c"), frozenset({"a"}))] * 10
    judged = click_judgments(fit_position_model(impressions), ClickGrading())
    assert [(j.chunk_id, j.grade) for j in judged] == [("a", 2), ("b", 0), ("c", 0)]
    assert all(j.estimate < 0.1 for j in judged[1:])


def test_grades_follow_the_stated_thresholds():
    grading = ClickGrading()
    assert [grading.grade(e) for e in (0.0, 0.199, 0.2, 0.499, 0.5, 1.0)] == [0, 0, 1, 1, 2, 2]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"min_impressions": 0}, "min_impressions: must be at least 1, got 0"),
        (
            {"grade_1_at": 0.6, "grade_2_at": 0.5},
            "grade_1_at, grade_2_at: need 0 < grade_1_at < grade_2_at <= 1, got 0.6 and 0.5",
        ),
        ({"prior_impressions": -1}, "prior_impressions: must be 0 or more, got -1"),
    ],
)
def test_bad_grading_is_refused_by_name(options, message):
    with pytest.raises(ConfigError) as raised:
        ClickGrading(**options)
    assert str(raised.value) == message


def test_the_cli_refuses_crossed_thresholds_before_any_cluster():
    result = CliRunner().invoke(
        cli,
        ["judgments", "clicks", "-o", "x.jsonl", "--grade-1-at", "0.6", "--grade-2-at", "0.5"]
        + ["--url", "http://127.0.0.1:9"],
    )
    assert result.exit_code == 2
    assert result.stderr == (
        "Error: grade_1_at, grade_2_at: need 0 < grade_1_at < grade_2_at <= 1, got 0.6 and 0.5\n"
    )


def test_the_questions_file_is_what_eval_reads_marked_implicit(tmp_path):
    impressions = [
        *[Impression("Refund time?", ("c1", "c2", "gone"), frozenset({"c1"}))] * 3,
        Impression("refund time", ("c2", "c1"), frozenset()),
        *[Impression("card fees", ("c3",), frozenset())] * 5,
    ]
    model = fit_position_model(impressions)
    judgments = click_judgments(model, ClickGrading(min_impressions=2))
    chunks = {  # "gone" is no longer one of the tenant's chunks
        "c1": {"source": "refunds.md", "heading_path": ["Refunds", "Time"]},
        "c2": {"source": "payments.md", "heading_path": []},
        "c3": {"source": "payments.md", "heading_path": ["Cards"]},
    }
    lines = click_questions_lines(impressions, judgments, chunks)
    assert len(lines) == 1  # "card fees": never clicked, every grade 0, left out
    line = lines[0]
    assert {k: v for k, v in line.items() if k != "judgments"} == {
        "id": "q1",
        "question": "Refund time?",
        "source": "refunds.md",
        "heading_path": ["Refunds", "Time"],
        "implicit": True,
        "model": "pbm",
    }
    c1 = model.attractiveness["refund time", "c1"]
    assert line["judgments"] == [
        {
            "chunk_id": "c1",
            "source": "refunds.md",
            "heading_path": ["Refunds", "Time"],
            "grade": 2,
            "estimate": round(c1, 4),
            "impressions": 4,
            "clicks": 3,
        },
        {
            "chunk_id": "c2",
            "source": "payments.md",
            "heading_path": [],
            "grade": 0,
            "estimate": round(model.attractiveness["refund time", "c2"], 4),
            "impressions": 4,
            "clicks": 0,
        },
    ]
    path = tmp_path / "clicks.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    (question,) = load_questions(path)
    assert question.metadata["implicit"] is True
    assert graded_qrels(question.metadata["judgments"]) == {"refunds.md": 2}
    # What training reads a questions file with: grades by chunk id.
    assert read_judgment_file(path).grades == {0: {"c1": 2, "c2": 0}}


class _LogClient:
    """The query log of tenant "A" and its chunks, answered as OpenSearch would: ``searches``
    logged searches ``(question, shown chunk ids)``, ``clicks`` ``(search number, chunk id)``."""

    def __init__(self, searches, clicks) -> None:
        self.indices = self
        self.queries = [
            {
                "query_id": f"s{n}",
                "user_query": question,
                "query_response_hit_ids": list(shown),
                "timestamp": f"2026-12-03T07:{n // 60:02d}:{n % 60:02d}.000Z",
                "query_attributes": {"tenant": "A"},
            }
            for n, (question, shown) in enumerate(searches)
        ]
        self.events = [
            {
                "query_id": f"s{n}",
                "action_name": "click",
                "event_attributes": {"tenant": "A", "object": {"object_id": chunk_id}},
            }
            for n, chunk_id in clicks
        ]

    def exists(self, index):
        return True

    def refresh(self, index):
        return None

    def search(self, *, index, body):
        if index.endswith("-ubi_queries"):
            found = self.queries
        elif index.endswith("-ubi_events"):
            found = self.events
        else:  # the chunks the judgments name
            ids = body["query"]["bool"]["filter"][0]["terms"]["chunk_id"]
            found = [{"chunk_id": i, "source": f"{i}.md", "heading_path": ""} for i in ids]
        return {"hits": {"hits": [{"_source": source} for source in found]}}


def _export(client, tmp_path, **grading):
    from loader.settings import Settings
    from loader.train.click_export import export_click_judgments

    settings = Settings(index_name="docs")
    path = tmp_path / "clicks.jsonl"
    return export_click_judgments(client, settings, "A", path, ClickGrading(**grading)), path


def test_nothing_to_export_has_a_code_of_its_own_and_says_how_far_short_it_fell(tmp_path):
    """Issue #52: "nothing to export" exited 7 (a document's code), and with --min-impressions 10
    a log of 476 searches graded 4 questions without saying why the rest were not."""
    from loader.errors import InputError, NotEnoughEvidenceError

    # 3 questions: shown 4, 6 and 6 times, each clicked on its first chunk every time.
    searches = [("refunds", ("c1", "c2"))] * 4 + [("upi", ("c3",))] * 6 + [("cards", ("c4",))] * 6
    clicks = [(n, shown[0]) for n, (_question, shown) in enumerate(searches)]
    client = _LogClient(searches, clicks)
    with pytest.raises(NotEnoughEvidenceError) as raised:
        _export(client, tmp_path)
    assert raised.value.exit_code == 15 and not isinstance(raised.value, InputError)
    assert str(raised.value) == (
        "tenant 'A': 16 logged searches and 16 clicks, and no chunk of its own was shown 10 "
        "times with an estimate of 0.2 or more; nothing to export. 3 of 3 questions fell short "
        "of --min-impressions 10: their most-shown chunk was shown 4 to 6 times (median 6); "
        "lower --min-impressions, or wait for more searches and clicks"
    )
    assert not (tmp_path / "clicks.jsonl").exists()
    summary, path = _export(client, tmp_path, min_impressions=5)
    assert summary.questions == 2 and path.exists()
    assert summary.shortfall.line() == (
        "1 of 3 questions fell short of --min-impressions 5: their most-shown chunk was shown 4 "
        "times (median 4)"
    )
    assert summary.to_dict()["short_questions"] == 1
    assert summary.to_dict()["short_most_shown"] == {"min": 4, "median": 4, "max": 4}
    no_clicks = _LogClient(searches[:1], [])
    with pytest.raises(NotEnoughEvidenceError, match="1 logged searches and no click on them"):
        _export(no_clicks, tmp_path)
