"""Text an older version stored with a lone surrogate (an information need, a grade's note, a
"can't tell" reason, before they were refused where they enter) reads back as U+FFFD on a real
node: the question's page and `loader judgments export` go on instead of failing on it."""

from __future__ import annotations

import json

import pytest

from loader.eval.judgments import export
from loader.index.apply import apply_config
from loader.ingest.sync import push
from loader.query.judgments import (
    create_query_set,
    grade_doc_id,
    judging_state,
    judgments_index,
    save_grade,
)
from tests.integration.serve.test_judging_snapshots import _chunk_of

pytestmark = pytest.mark.integration

BROKEN = "refund \ud800 account"  # half of an emoji's escape, as a pasted one sends


def test_a_stored_lone_surrogate_reads_back_as_a_replacement_character(
    client, base_settings, embedder, unique_name, tmp_path
):
    settings = base_settings.replace(index_name=unique_name, query_log="ubi", rerank="off")
    apply_config(settings, dimension=embedder.dimension, client=client)
    docs = tmp_path / "kb"
    docs.mkdir()
    (docs / "refunds.md").write_text("# Refunds\n\nRefunds go back to the card.\n", "utf-8")
    assert push(docs, settings, tenant="A", client=client, embedder=embedder).failed == 0
    set_id = create_query_set(client, unique_name, "A", "kb", questions=["refund card"]).set_id
    chunk = _chunk_of(client, unique_name, "A", "refunds.md")
    save_grade(client, unique_name, "A", set_id, 0, chunk, 2, rater="alice", note="fine")
    index = judgments_index(unique_name)
    # As the older version stored them: the need, the note and a second rater's reason.
    graded = client.get(index=index, id=grade_doc_id(set_id, 0, chunk, "alice"))["_source"]
    client.index(
        index=index, id=grade_doc_id(set_id, 0, chunk, "alice"), body=graded | {"note": BROKEN}
    )
    for kind, text, rater in (("need", "need", ""), ("cant_tell", "note", "bob")):
        body = {"kind": kind, "tenant": "A", "query_set": set_id, "question_index": 0, text: BROKEN}
        if kind == "cant_tell":
            body |= {"chunk_id": chunk, "rater": rater}
        client.index(index=index, body=body, params={"refresh": "true"})

    state = judging_state(client, unique_name, "A", set_id)
    shown = "refund \ufffd account"
    assert state.needs[0] == shown
    assert state.cant_tell[0][chunk]["bob"] == shown
    assert [grade.note for grade in state.grades[0].values()] == [shown]

    path = tmp_path / "kb.jsonl"
    assert export(client, unique_name, "A", "kb", "questions", path) == 1
    line = json.loads(path.read_text(encoding="utf-8"))
    assert line["information_need"] == shown
