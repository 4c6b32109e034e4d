"""The held-out measure of `loader adapt`: the chunks its queries were cut from are not in the
pool the positives are ranked among (each holds its query word for word, so it would outrank the
positive for any model)."""

from __future__ import annotations

from loader.eval.adapt import Guard
from loader.eval.pairs import mine_pairs
from tests.unit.eval.test_pairs import LATE, UPI, chunk

OTHER = (
    "Card payments are captured when the order is dispatched. A failed capture cancels the order "
    "and releases the hold on your card within a day."
)


def test_no_chunk_a_query_was_cut_from_competes_with_its_positive():
    chunks = [
        chunk(doc="d1", position=0, section="s1", heading="Late deliveries", body=LATE),
        chunk(doc="d1", position=1, section="s2", heading="UPI refunds", body=UPI),
        chunk(doc="d2", position=0, section="s3", heading="Card payments", body=OTHER,
              title="Payments"),
    ]  # fmt: skip
    pairs = mine_pairs(chunks)
    guard = Guard(pairs, chunks, seed=0)
    positives = {pair.positive for pair in guard.pairs}
    others = [passage for passage in guard.passages if passage not in positives]
    assert {pair.kind for pair in guard.pairs} == {"heading", "title", "cloze"}
    sources = {pair.chunk_id for pair in guard.pairs}
    assert all(c.content not in others for c in chunks if c.chunk_id in sources)
    for pair in guard.pairs:
        assert not any(pair.query in passage for passage in others), pair
    # every positive is one of the passages, at the index its query is scored against
    assert [guard.passages[target] for target in guard.targets] == [p.positive for p in guard.pairs]
