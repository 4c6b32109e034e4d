"""The cluster helpers' own waiting, on _cat/shards rows as OpenSearch returns them (no cluster is
started: the rows are the ones a settled index gave after a node loss, issue #52)."""

from __future__ import annotations

import pytest

from tests.integration.multinode.cluster_fixtures import counted_copies


def copy(shard: str, prirep: str, docs: str | None, state: str = "STARTED") -> dict:
    return {"index": "t-x", "shard": shard, "prirep": prirep, "state": state, "docs": docs,
            "node": f"n{shard}{prirep}"}  # fmt: skip


def test_copies_are_read_again_until_every_one_reports_its_count():
    reported = [copy("0", "p", "20"), copy("0", "r", "20")]
    reads = iter([[copy("0", "p", "20"), copy("0", "r", None)], reported])
    assert counted_copies(lambda: next(reads), timeout=5, interval=0) == reported


def test_a_copy_that_never_reports_its_count_fails_naming_it():
    rows = [copy("0", "p", "20"), copy("0", "r", None)]
    named = r"1 of 2 shard copies not started or without a document count after 0 s: "
    named += r"\[\{.*'prirep': 'r', 'state': 'STARTED', 'docs': None, 'node': 'n0r'\}\]$"
    with pytest.raises(AssertionError, match=named):
        counted_copies(lambda: rows, timeout=0.05, interval=0.01)
