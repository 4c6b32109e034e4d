"""`loader judgments snapshot` and `compare` on a real node: a snapshot taken from the command
line, a document pushed that outranks the graded answer of one question, and the comparison's
figures checked by hand against the rankings the node returns now; the gate's exit codes
(10 past --threshold, 0 within it, 12 without a snapshot); another tenant's snapshot answered as
a missing one; and no search of the command in the query log. `loader judgments
delete-snapshot`: another tenant's snapshot exits 12 as an unknown one and is kept; the tenant's
own is deleted, and deleting it again exits 12.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from loader.cli import cli
from loader.eval.set_searches import set_rankings
from loader.index.apply import apply_config
from loader.ingest.sync import push
from loader.query.judgments import create_query_set, find_query_set, save_grade
from loader.query.snapshots import list_snapshots
from tests.conftest import cleanup_owned
from tests.integration.serve.test_judging_snapshots import (
    DOCS,
    OUTRANKING,
    QUESTIONS,
    _chunk_of,
    _logged,
    _ndcg_one_answer,
)

pytestmark = pytest.mark.integration

ANSWERS = {0: "timetable.md", 1: "parking.md"}  # question 2 stays ungraded


@pytest.fixture
def harbour(client, base_settings, embedder, tmp_path) -> Iterator:
    """``DOCS`` for tenants A and B, the query log on, and each tenant's set ``harbour``
    with A's questions 0 and 1 graded."""
    docs = tmp_path / "harbour"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    alias = f"t-set-searches-{uuid.uuid4().hex[:8]}"
    settings = base_settings.replace(index_name=alias, query_log="ubi", rerank="off")
    try:
        apply_config(settings, dimension=embedder.dimension, client=client)
        for tenant in ("A", "B"):
            assert push(docs, settings, tenant=tenant, client=client, embedder=embedder).failed == 0
            create_query_set(client, alias, tenant, "harbour", questions=QUESTIONS)
        set_a = create_query_set(client, alias, "A", "harbour", questions=QUESTIONS).set_id
        for number, source in ANSWERS.items():
            save_grade(client, alias, "A", set_a, number, _chunk_of(client, alias, "A", source), 2)
        yield settings
    finally:
        cleanup_owned(client, alias)


def _cli(settings, *args: str):
    where = ["--url", settings.opensearch_url, "--index", settings.index_name]
    env = {"LOADER_QUERY_LOG": "ubi", "LOADER_RERANK": "off"}
    return CliRunner().invoke(cli, ["judgments", *args, *where], env=env)


def test_a_snapshot_then_a_push_is_the_hand_computed_loss_and_the_gate_says_so(
    harbour, client, embedder, tmp_path
):
    settings = harbour
    alias = settings.index_name
    logged = _logged(client, alias)
    a = ("--tenant", "A", "--name", "harbour")

    none_yet = _cli(settings, "compare", *a)
    assert none_yet.exit_code == 12, none_yet.output
    assert "query set 'harbour' of tenant 'A' has no snapshot" in none_yet.output

    taken = _cli(settings, "snapshot", *a, "--label", "before the FAQ", "--json")
    assert taken.exit_code == 0, taken.output
    summary = json.loads(taken.stdout)
    assert (summary["label"], summary["questions"]) == ("before the FAQ", 3)
    assert summary["served"]["learned"] is None and "hybrid-rrf" in summary["columns"]

    same = _cli(settings, "compare", *a, "--json")  # nothing changed: every delta 0
    assert same.exit_code == 0, same.output
    unchanged = json.loads(same.stdout)
    assert unchanged["snapshot"]["snapshot"] == summary["snapshot"]
    for column in unchanged["columns"]:
        assert unchanged["counts"][column] == {"better": 0, "worse": 0, "unchanged": 2}, column

    faq = tmp_path / "faq"
    faq.mkdir()
    (faq / "ferry-faq.md").write_text(OUTRANKING, encoding="utf-8")
    assert push(faq, settings, tenant="A", client=client, embedder=embedder).failed == 0
    client.indices.refresh(index=alias)

    # By hand: the served column (search_mode, no learned model) from the node's rankings now.
    served = settings.search_mode
    quiet = settings.replace(query_log="off")
    now = set_rankings(quiet, QUESTIONS, "A", client=client, embedder=embedder)
    after = [_ndcg_one_answer(now[n][served], answer) for n, answer in ANSWERS.items()]
    assert after[0] < 1.0 and after[1] == 1.0  # the FAQ passed the timetable, not parking

    gated = _cli(settings, "compare", *a, "--against", summary["snapshot"], "--json")
    assert gated.exit_code == 10, gated.output  # a drop of more than 0.01
    result = json.loads(gated.stdout)
    assert result["served_column"] == served
    mean = result["means"][served]
    assert (mean["then"], mean["now"]) == pytest.approx((1.0, sum(after) / 2))
    assert result["counts"][served] == {"better": 0, "worse": 1, "unchanged": 1}
    assert f"{served}: mean nDCG@10 1.0000 -> {sum(after) / 2:.4f}" in gated.stderr

    within = _cli(settings, "compare", *a, "--threshold", "0.5")
    assert within.exit_code == 0, within.output
    line = next(x for x in within.stdout.splitlines() if x.strip().startswith(f"{served} "))
    assert line.endswith("0 better, 1 worse, 1 unchanged  (served)"), line
    assert f"1.0000 -> {sum(after) / 2:.4f} ({sum(after) / 2 - 1:+.4f}) over 2" in line

    # Tenant B names A's snapshot: the answer of a snapshot that never was.
    crossing = _cli(settings, "compare", "--tenant", "B", "--name", "harbour", "--against",
                    summary["snapshot"])  # fmt: skip
    invented = _cli(settings, "compare", "--tenant", "B", "--name", "harbour", "--against",
                    "0123456789abcdef0123")  # fmt: skip
    assert crossing.exit_code == invented.exit_code == 12, crossing.output
    assert crossing.output.replace(summary["snapshot"], "X") == invented.output.replace(
        "0123456789abcdef0123", "X"
    )
    assert _logged(client, alias) == logged  # scoring a set is no user's search


def test_delete_snapshot_deletes_the_tenants_own_and_answers_12_for_any_other(harbour, client):
    settings = harbour
    alias = settings.index_name
    a = ("--tenant", "A", "--name", "harbour")
    taken = _cli(settings, "snapshot", *a, "--label", "to delete", "--json")
    assert taken.exit_code == 0, taken.output
    sid = json.loads(taken.stdout)["snapshot"]
    set_a = find_query_set(client, alias, "A", "harbour").set_id

    def listed() -> list[str]:
        return [s.snapshot_id for s in list_snapshots(client, alias, "A", set_a)]

    unknown = "0123456789abcdef0123"
    b = ("--tenant", "B", "--name", "harbour")
    shown = _cli(settings, "snapshots", *a)
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.startswith(f"{sid}  ") and "'to delete'" in shown.stdout
    as_json = json.loads(_cli(settings, "snapshots", *a, "--json").stdout)
    assert [s["snapshot"] for s in as_json["snapshots"]] == [sid]
    assert json.loads(_cli(settings, "snapshots", *b, "--json").stdout)["snapshots"] == []
    crossing = _cli(settings, "delete-snapshot", *b, sid)
    invented = _cli(settings, "delete-snapshot", *b, unknown)
    assert crossing.exit_code == invented.exit_code == 12, crossing.output
    assert crossing.output.replace(sid, "X") == invented.output.replace(unknown, "X")
    assert f"snapshot {sid!r} does not exist" in crossing.stderr
    assert listed() == [sid]  # B deleted nothing

    deleted = _cli(settings, "delete-snapshot", *a, sid)
    assert deleted.exit_code == 0, deleted.output
    assert deleted.stdout == f"snapshot {sid} of query set 'harbour' (tenant 'A') deleted\n"
    assert listed() == []
    assert _cli(settings, "snapshots", *a).stdout == (
        "query set 'harbour' (tenant 'A') has no snapshot\n"
    )
    again = _cli(settings, "delete-snapshot", *a, sid, "--json")
    assert again.exit_code == 12, again.output
    missing = {"error": f"snapshot {sid!r} does not exist", "exit_code": 12}
    assert json.loads(again.stdout) == missing
