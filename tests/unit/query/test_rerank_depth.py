"""The rerank stage reorders the first ``candidate_depth`` candidates of a reranker that has one
(a learned model: the depth it learnt at), and leaves the others after them in retrieval order,
their scores still falling with the rank."""

from __future__ import annotations

from loader.query.result import SearchHit
from loader.query.search import _rerank, rerank_depth


class _Reversing:
    """Scores the candidates it is given in reverse order, and remembers how many."""

    kind, name = "learned", "reversing"

    def __init__(self, depth):
        self.candidate_depth = depth
        self.given = 0

    def lookup(self, query, hits):
        return None

    def score(self, query, hits, answers=None):
        self.given = len(hits)
        return [float(position) for position in range(len(hits))]


def _hits(count):
    hits = []
    for rank in range(1, count + 1):
        hit = SearchHit(chunk_id=f"c{rank}", doc_id="d", body="b", text="b")
        hit.scores["retrieval"], hit.ranks["retrieval"] = 1.0 / rank, rank
        hits.append(hit)
    return hits


def test_only_the_depth_learnt_at_is_reranked():
    reranker = _Reversing(3)
    ranked = _rerank(reranker, None, _hits(5), None)
    assert reranker.given == 3
    assert [hit.chunk_id for hit in ranked] == ["c3", "c2", "c1", "c4", "c5"]
    assert [hit.ranks["rerank"] for hit in ranked] == [1, 2, 3, 4, 5]
    scores = [hit.final_score for hit in ranked]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == 5
    # Without a depth (a cross-encoder), or deeper than the candidates: all of them.
    assert rerank_depth(_Reversing(None), 5) == 5 and rerank_depth(_Reversing(9), 5) == 5
    assert [h.chunk_id for h in _rerank(_Reversing(None), None, _hits(3), None)] == [
        "c3", "c2", "c1"
    ]  # fmt: skip
