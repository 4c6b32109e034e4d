"""The search request's checks, in one place: every refusal is a ``ConfigError`` naming the
parameter, raised before any model loads or any request is sent."""

from __future__ import annotations

import dataclasses
import datetime

import pytest

from loader.errors import ConfigError
from loader.query.request import (
    MAX_QUESTION_CHARS,
    SearchFilters,
    SearchRequest,
    check_date,
    check_time_value,
    truncate_question,
)
from loader.settings import SEARCH_MODES
from tests.unit.query.fakes import SETTINGS, FakeClient, run


def test_truncate_question_cuts_at_a_word() -> None:
    assert truncate_question("short") == "short"
    long = "word " * 1000
    cut = truncate_question(long)
    assert len(cut) <= MAX_QUESTION_CHARS and cut.endswith("word")
    assert len(truncate_question("x" * 5000)) == MAX_QUESTION_CHARS


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"question": ""}, "question"),
        ({"question": "  \n"}, "question"),
        ({"tenant": ""}, "tenant"),
        ({"tenant": "  "}, "tenant"),
        ({"mode": "fuzzy"}, "mode"),
        ({"k": 0}, "k"),
        ({"candidates": -1}, "candidates"),
        ({"candidates": 10**6}, "candidates"),
        ({"expand": "document"}, "expand"),
        ({"filters": SearchFilters(published_from="yesterday")}, "published_from"),
        ({"filters": SearchFilters(published_to='2020"}')}, "published_to"),
        ({"filters": SearchFilters(decay_scale="180 days")}, "decay_scale"),
    ],
)
def test_bad_arguments_are_config_errors_naming_the_parameter(kwargs: dict, named: str) -> None:
    client = FakeClient({})
    with pytest.raises(ConfigError, match=named):
        run(client=client, **kwargs)
    assert client.calls == []  # refused before any request


@pytest.mark.parametrize(
    "value",
    [
        "2024",
        "2024-05",
        "2024-05-01",
        "2024-02-29",
        "2024-05-01T10",
        "2024-05-01T10:30",
        "2024-05-01T10:30:00Z",
        "2024-05-01T10:30:00.123456789+02:00",
        "2024-05-01T23:59:59-0530",
        "2024-05-01T10:30:00+18:00",
        "now",
        "now-1y",
        "now-30d/d",
        "now+1h-5m",
        "now-999999y-999999y-999999y-999999y",
    ],
)
def test_dates_opensearch_accepts_pass(value: str) -> None:
    assert check_date("published_from", value) == value


def test_date_objects_pass_as_iso_text() -> None:
    assert check_date("published_to", datetime.date(2024, 5, 1)) == "2024-05-01"
    stamp = datetime.datetime(2024, 5, 1, 10, 30, tzinfo=datetime.UTC)
    assert check_date("published_to", stamp) == "2024-05-01T10:30:00+00:00"


@pytest.mark.parametrize(
    "value",
    [
        "2020-13-45",  # OpenSearch: 400 parse_exception
        "2023-02-29",
        "2024-00-10",
        "2024-05-00",
        "0000-01-01",
        "2024-05-01T24:00",
        "2024-05-01T10:60",
        "2024-05-01T10:30:61",
        "2024-05-01T10:30:00+19:00",  # OpenSearch: 400
        "2024-05-01T10:00+18:01",  # OpenSearch: 400 (offsets reach 18:00 exactly)
        "2024-05-01T10:00-1859",
        "2024-05-01 10:30",  # OpenSearch: 400 (strict_date_optional_time wants the T)
        "2024-05-01\n",
        "٢٠٢٤-٠٥-٠١",  # Arabic-Indic digits
        "now-99999999999y",  # OpenSearch: 400 number_format_exception
        "now-1y-1y-1y-1y-1y",
        "now-1x",
        "yesterday",
        "1714521600000",
        "",
        2024,
        None,
        ["2024-05-01"],
    ],
)
def test_dates_opensearch_refuses_are_config_errors(value: object) -> None:
    with pytest.raises(ConfigError, match=r"^published_from .* is not a date; give an ISO date"):
        check_date("published_from", value)


@pytest.mark.parametrize("value", ["180d", "12h", "1ms", "1000micros", "1000000nanos", "10000d"])
def test_time_values_opensearch_accepts_pass(value: str) -> None:
    assert check_time_value("decay_scale", value) == value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0d", "out of range"),  # OpenSearch: 400 "scale must be > 0.0"
        ("0ms", "out of range"),
        ("999micros", "out of range"),  # less than 1 ms: 0 on the server
        ("1nanos", "out of range"),
        ("10001d", "out of range"),
        ("1.5d", "not a time value"),  # OpenSearch: 400 "fractional time values"
        ("-1d", "not a time value"),
        ("180 days", "not a time value"),
        ("180", "not a time value"),
        ("d", "not a time value"),
        ("1234567890123456d", "not a time value"),
        ("180d\n", "not a time value"),
        (180, "not a time value"),
    ],
)
def test_bad_time_values_are_config_errors(value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=rf"^decay_scale .* {message}"):
        check_time_value("decay_scale", value)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"k": 0}, "k must be a positive whole number, got 0"),
        ({"candidates": 0}, "candidates must be a positive whole number, got 0"),
        ({"k": 2.0}, "k must be a positive whole number, got 2.0"),
        ({"k": True}, "k must be a positive whole number, got True"),
        ({"k": "5"}, "k must be a positive whole number, got '5'"),
        ({"k": 10**6}, "k must be at most 10000, got 1000000"),
        (
            {"question": ["refund", "late"]},
            "question must be a string, got list ['refund', 'late']",
        ),
        ({"question": {"a": "refund"}}, "question must be a string, got dict {'a': 'refund'}"),
        ({"question": 5}, "question must be a string, got int 5"),
        ({"tenant": ["A", "B"]}, "tenant must be a string, got list ['A', 'B']"),
        (
            {"filters": SearchFilters(published_from="2020-13-45")},
            "published_from '2020-13-45' is not a date",
        ),
        ({"filters": SearchFilters(decay_scale="0d")}, "decay_scale '0d' is out of range"),
    ],
)
def test_hostile_arguments_get_exact_messages(kwargs: dict, message: str) -> None:
    client = FakeClient({})
    with pytest.raises(ConfigError) as raised:
        run(client=client, **kwargs)
    assert str(raised.value).startswith(message), str(raised.value)
    assert client.calls == []


def test_from_settings_takes_the_settings_defaults() -> None:
    settings = SETTINGS.replace(search_mode="bm25", rerank=False, top_k=3, candidates=7)
    request = SearchRequest.from_settings(settings, "refund", tenant="A")
    assert (request.mode, request.rerank, request.k, request.candidates) == ("bm25", False, 3, 7)
    assert request.filters == SearchFilters() and request.expand is None
    assert request.history == () and not request.merge_adjacent and not request.prompt_order
    # None is the default, as a front end passes an option it did not get
    unset = SearchRequest.from_settings(settings, "refund", tenant="A", mode=None, k=None)
    assert unset == request
    given = SearchRequest.from_settings(settings, "refund", tenant="A", mode="vector", k=9)
    assert (given.mode, given.k, given.candidates) == ("vector", 9, 7)


def test_a_request_is_frozen_and_checked_again_when_replaced() -> None:
    turn = {"role": "user", "content": "earlier"}
    request = SearchRequest.from_settings(SETTINGS, "refund", tenant="A", history=[turn])
    assert request.history == (turn,)
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.k = 3  # type: ignore[misc]
    assert request.replace(k=3).k == 3
    with pytest.raises(ConfigError, match="k must be a positive whole number, got 0"):
        request.replace(k=0)
    with pytest.raises(TypeError):
        SearchRequest.from_settings(SETTINGS, "refund", tenant="A", size=3)


def test_every_mode_of_the_settings_is_accepted() -> None:
    for mode in SEARCH_MODES:
        assert SearchRequest.from_settings(SETTINGS, "q", tenant="A", mode=mode).mode == mode


@pytest.mark.parametrize("name", ["rerank", "merge_adjacent", "prompt_order"])
def test_flags_must_be_bools(name: str) -> None:
    with pytest.raises(ConfigError, match=rf"^{name} must be true or false, got 'false'"):
        SearchRequest.from_settings(SETTINGS, "q", tenant="A", **{name: "false"})


def test_the_searched_question_is_stripped_and_cut() -> None:
    short = SearchRequest.from_settings(SETTINGS, "  refund \n", tenant="A")
    assert short.searched == "refund" and not short.truncated
    long = SearchRequest.from_settings(SETTINGS, "word " * 1000, tenant="A")
    assert long.truncated and len(long.searched) <= MAX_QUESTION_CHARS
    assert long.question == "word " * 1000  # the request keeps what it was given
    assert SearchRequest.from_settings(SETTINGS, "q", tenant="A", k=80, candidates=50).depth == 80


@pytest.mark.parametrize(
    "tenant, message",
    [
        ("", r"^tenant is required"),
        ("  ", r"^tenant is required"),
        (" acme", r"^tenant ' acme' must not start or end with whitespace"),
        ("\x00", r"^tenant '\\x00' must not hold the control character U\+0000"),
    ],
)
def test_a_blank_or_padded_tenant_is_refused(tenant: str, message: str) -> None:
    # No push files chunks under a padded tenant: a search for one would find nothing, silently.
    with pytest.raises(ConfigError, match=message):
        SearchRequest.from_settings(SETTINGS, "refund", tenant=tenant)
