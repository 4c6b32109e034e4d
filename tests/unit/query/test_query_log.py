"""The query log's documents, without a cluster: what one search writes (``query_document``)."""

from __future__ import annotations

import pytest

from loader.errors import ConfigError
from loader.query.query_log import log_entry
from loader.query.request import MAX_CLIENT_ID_CHARS, SearchRequest
from tests.unit.query.fakes import SETTINGS, run


def _logged(**options):
    result = run(**options)
    request = SearchRequest.from_settings(SETTINGS, "q", **{"tenant": "A", **options})
    entry = log_entry(request, result, query_log="ubi", index_name="docs")
    return entry.body


def test_the_logged_search_names_the_reranker_that_ran_and_the_clients_session() -> None:
    """Issue #52: the log said ``reranked`` but not by what, and every search served over HTTP
    was logged with client_id "", so the ``worst`` sampler took all of them for one user."""
    body = _logged(client_id="web-5f1c2a9e")
    assert body["client_id"] == "web-5f1c2a9e"
    attributes = body["query_attributes"]
    assert attributes["reranker"] == {"kind": "fake", "model": "fake"}
    assert attributes["reranked"] is True and attributes["rerank_skipped"] == ""
    off = _logged(rerank=False)
    assert off["client_id"] == "" and off["query_attributes"]["reranker"] is None
    assert off["query_attributes"]["rerank_skipped"] == "off"


@pytest.mark.parametrize(
    "client_id",
    ["a b", "tab\there", "line\n", "é-session", "x" * (MAX_CLIENT_ID_CHARS + 1), 7],
)
def test_a_client_id_is_bounded_visible_ascii(client_id) -> None:
    with pytest.raises(ConfigError, match="^client_id "):
        SearchRequest.from_settings(SETTINGS, "q", tenant="A", client_id=client_id)
    assert (
        SearchRequest.from_settings(
            SETTINGS, "q", tenant="A", client_id="x" * MAX_CLIENT_ID_CHARS
        ).client_id
        == "x" * MAX_CLIENT_ID_CHARS
    )


class _TimingOutLog:
    """A cluster whose query log exists and whose write times out (a paused node)."""

    def __init__(self) -> None:
        self.indices = self

    def exists(self, index: str) -> bool:
        return True

    def index(self, **_kwargs):
        import opensearchpy

        raise opensearchpy.ConnectionTimeout("TIMEOUT", "read timed out", None)


def test_a_log_write_that_times_out_says_so_not_to_run_apply(caplog) -> None:
    """A search whose log write timed out was answered, and the warning told the operator to
    run `loader apply`, which fixes a missing index, not a cluster that did not answer."""
    import logging

    from loader.query.query_log import LogEntry, record_search

    entry = LogEntry("docs-timeout-ubi_queries", "q-1", {"user_query": "q"})
    with caplog.at_level(logging.WARNING, "loader.query.query_log"):
        assert record_search(_TimingOutLog(), entry) == ""
    said = " ".join(record.getMessage() for record in caplog.records)
    assert "did not answer" in said and "loader apply" not in said, said
