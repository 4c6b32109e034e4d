"""The identifier detector behind the templates' exact_terms."""

from __future__ import annotations

import pytest

from loader.query.identifiers import MAX_EXACT_TERMS, exact_terms


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("what does R-2207 mean", ("R-2207",)),
        ("printer error E1043", ("E1043",)),
        ("where is order 44821?", ("44821",)),
        ("PAY-0042 and SYNC_118 after the v2.3 update", ("PAY-0042", "SYNC_118", "v2.3")),
        ("IL-6 levels and p53 mutations", ("IL-6", "p53")),
        ("H3K4me3 marks and GLP-1R", ("H3K4me3", "GLP-1R")),
        ("5mmol/L of Rad53", ("5mmol/L", "Rad53")),
        ("retry on ERR_TIMEOUT", ("ERR_TIMEOUT",)),
        ('the "late fee" clause', ("late fee",)),
        ("the “late fee” clause", ("late fee",)),
        ("the 'late fee' clause", ("late fee",)),
    ],
)
def test_identifiers_are_found(question: str, expected: tuple[str, ...]) -> None:
    assert exact_terms(question) == expected


@pytest.mark.parametrize(
    "question",
    [
        "How long do refunds take for late deliveries?",
        "refunds in 2019 and 2024",  # years: numbers of fewer than five digits
        "a 0.5 mg dose of 30 tablets",
        "state-of-the-art well-known results",  # hyphenated words are not codes
        "what's the customer's refund?",  # apostrophes open no quote
        "2x or 3D",  # too short
        "3-kinase and TDP-43-induced phosphatidylinositol-3",  # compounds of words
        "E1043-",  # only as a whole token: the trailing dash makes it a fragment
    ],
)
def test_ordinary_text_has_no_identifiers(question: str) -> None:
    assert exact_terms(question) == ()


def test_quoted_strings_come_first_each_term_once_and_at_most_the_limit() -> None:
    assert exact_terms('E1043 or "paper jam" then E1043 again') == ("paper jam", "E1043")
    many = " ".join(f"E{1000 + number}" for number in range(20))
    assert len(exact_terms(many)) == MAX_EXACT_TERMS
    assert exact_terms(many, limit=2) == ("E1000", "E1001")


def test_an_identifier_inside_a_quote_is_the_quote_only() -> None:
    assert exact_terms('search "error E1043 on tray 2"') == ("error E1043 on tray 2",)


def test_an_overlong_quote_or_token_is_not_a_term() -> None:
    assert exact_terms('"' + "x" * 101 + '"') == ()
    assert exact_terms("A1" * 60) == ()
