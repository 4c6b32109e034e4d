"""Identifier-like tokens of a question, which the chunk holding them must win on.

BM25 finds ``E1043`` or order ``44821`` where an embedding model sees one more number, and on a
table of codes whose rows read alike the fusion of both can rank a neighbouring chunk first. The
terms found here are passed to the stored templates as ``exact_terms``: a phrase match on
``content.exact`` (the unstemmed field) boosts the chunks holding them inside the BM25 sub-query,
and the hybrid templates' exact sub-query ranks only those chunks (see guide/templates.md).

What counts as an identifier (``exact_terms``):

- a quoted string: ``"late fee"``, ``“late fee”`` or ``'late fee'`` (1 to ``MAX_TERM_CHARS``
  characters; an apostrophe inside a word does not open a quote);
- a token of letters and digits, possibly joined by ``-``, ``_``, ``.`` or ``/``, that holds at
  least one letter and one digit, is at least ``MIN_TOKEN_CHARS`` long and has no run of 5
  lower-case letters (a word: ``3-kinase``, ``TDP-43-induced`` are compounds, not codes):
  ``R-2207``, ``E1043``, ``PAY-0042``, ``SYNC_118``, ``IL-6``, ``H3K4me3``, ``v2.3``;
- a number of at least ``MIN_NUMBER_DIGITS`` digits: ``44821`` (order numbers, not years);
- an upper-case code joined by ``-`` or ``_``: ``ERR_TIMEOUT``, ``PAY-OUT``.

Example::

    exact_terms('what does R-2207 mean for order 44821 ("card expired")?')
    # ('card expired', 'R-2207', '44821')
"""

from __future__ import annotations

import re

# At most this many terms per question: each is one phrase clause in two sub-queries.
MAX_EXACT_TERMS = 8
MAX_TERM_CHARS = 100
MIN_TOKEN_CHARS = 3
MIN_NUMBER_DIGITS = 5

_QUOTED = re.compile(r"\"([^\"]+)\"|“([^”]+)”|(?<!\w)'([^']+)'(?!\w)")
_TOKEN = re.compile(r"(?<![\w-])[^\W_]+(?:[-_./][^\W_]+)*(?![\w-])")
_UPPER_CODE = re.compile(r"[A-Z]{2,}(?:[-_][A-Z0-9]+)+")
# Five lower-case letters in a row make a word: "3-kinase", "TDP-43-induced" and
# "phosphatidylinositol-3" are compounds, not codes. Flagged, they cost SciFact nDCG@10 (hybrid-rrf
# 0.7279 with them, 0.7304 without; 0.7284 with no exact terms at all).
_WORD = re.compile(r"[^\W\d_A-Z]{5,}")


def _is_identifier(token: str) -> bool:
    has_digit = any(char.isdigit() for char in token)
    has_letter = any(char.isalpha() for char in token)
    if has_digit and has_letter:
        return len(token) >= MIN_TOKEN_CHARS and not _WORD.search(token)
    if has_digit:
        return token.isdigit() and len(token) >= MIN_NUMBER_DIGITS
    return bool(_UPPER_CODE.fullmatch(token))


def exact_terms(question: str, limit: int = MAX_EXACT_TERMS) -> tuple[str, ...]:
    """The quoted strings, then the identifier-like tokens of ``question``, each once, in order.

    Args:
        question: the text searched.
        limit: at most this many terms (the first ones).

    Returns:
        The terms as written (case kept; the exact field's analyzer lowercases them).
    """
    terms: list[str] = []
    for match in _QUOTED.finditer(question):
        quoted = next(group for group in match.groups() if group is not None).strip()
        if quoted and len(quoted) <= MAX_TERM_CHARS:
            terms.append(quoted)
    unquoted = _QUOTED.sub(" ", question)
    for match in _TOKEN.finditer(unquoted):
        token = match.group()
        if len(token) <= MAX_TERM_CHARS and _is_identifier(token):
            terms.append(token)
    return tuple(dict.fromkeys(terms))[:limit]
