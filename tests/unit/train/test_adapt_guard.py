"""The held-out measure of `loader adapt`: the chunks its queries were cut from are not in the
pool the positives are ranked among (each holds its query word for word, so it would outrank the
positive for any model), and a gain is a gain only when it is above 0 with 95 % confidence."""

from __future__ import annotations

import numpy as np

from loader.train.guard import Guard, gain_lower_bound
from loader.train.negatives import wrong_candidates
from loader.train.pairs import mine_pairs
from tests.unit.train.test_pairs import LATE, UPI, chunk

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


def test_a_gain_within_the_noise_of_the_queries_is_not_a_gain():
    rng = np.random.default_rng(1)
    stock = rng.choice([0.0, 0.1, 0.25, 0.5, 1.0], size=600)
    # 30 queries of 600 move from rank 2 to rank 1 and 27 from rank 1 to rank 2: +0.0025 of MRR,
    # what another draw of the queries could take away.
    lucky = stock.copy()
    lucky[np.flatnonzero(stock == 0.5)[:30]] = 1.0
    lucky[np.flatnonzero(stock == 1.0)[:27]] = 0.5
    assert lucky.mean() > stock.mean()
    assert gain_lower_bound(stock, lucky, seed=0) <= 0.0
    # A third of the queries gain a rank: the whole interval is above 0.
    better = stock.copy()
    better[::3] = np.minimum(1.0, 2 * stock[::3] + (stock[::3] == 0) * 0.1)
    assert 0.0 < gain_lower_bound(stock, better, seed=0) < better.mean() - stock.mean()
    # A loss is never kept, and the bound does not depend on the order of the queries.
    assert gain_lower_bound(better, stock, seed=0) < 0.0
    order = rng.permutation(600)
    shuffled = gain_lower_bound(stock[order], better[order], seed=0)
    assert abs(shuffled - gain_lower_bound(stock, better, seed=0)) < 0.003


def _unit(vector):
    vector = np.asarray(vector, dtype=float)
    return vector / np.linalg.norm(vector)


def test_a_candidate_scored_as_close_as_the_positive_is_not_a_negative():
    query = _unit([1.0, 0.0, 0.0])
    positive = _unit([0.8, 0.6, 0.0])  # cosine 0.8; the ceiling at a 5 % margin is 0.76
    candidates = np.array([
        _unit([0.95, 0.31, 0.0]),   # 0.95: closer than the positive, another right answer
        _unit([0.77, 0.0, 0.64]),   # 0.77: within 5 % of it
        _unit([0.75, 0.66, 0.0]),   # 0.75: far enough below it to be wrong
        _unit([0.1, 0.0, 0.99]),    # an easy negative
    ])  # fmt: skip
    assert wrong_candidates(query, positive, candidates, 0.05) == [2, 3]
    # No margin: only what scores above the positive is skipped.
    assert wrong_candidates(query, positive, candidates, 0.0) == [1, 2, 3]
    # A positive the model scores below 0 lowers the ceiling by its magnitude, not its sign.
    assert wrong_candidates(query, -positive, candidates, 0.05) == []
