"""A regex sentence splitter that keeps the original text.

Every character of the input ends up in exactly one sentence (trailing whitespace stays with the
sentence it follows), so ``"".join(split_sentences(text)) == text`` always holds and a chunker can
cut on sentence boundaries without losing or changing a byte.

Example::

    >>> split_sentences("Dr. Rao paid 4.5 USD, i.e. the fee. It is due now.")
    ['Dr. Rao paid 4.5 USD, i.e. the fee. ', 'It is due now.']
"""

from __future__ import annotations

import re

# Words that end with a period without ending the sentence (compared lower-cased, without the
# period). "etc." is deliberately missing: before a capital letter it usually does end a sentence,
# and before anything else the splitter does not cut anyway.
_ABBREVIATION_WORDS = """
    mr mrs ms dr prof sr jr st mt ft vs approx dept fig figs incl misc inc ltd corp bros jan feb
    apr jun jul aug sep sept oct nov dec tue thu fri ca cf al gen gov sgt capt lt rev hon ave
    blvd rd vol pp pg ref
"""
ABBREVIATIONS = frozenset(_ABBREVIATION_WORDS.split())

# "No. 5", "Nos. 3 and 4", "Art. 12": abbreviations only when a number follows.
NUMBER_ABBREVIATIONS = frozenset({"no", "nos", "art", "p", "para", "tel", "ph"})

# A run of sentence-ending punctuation, optional closing quotes/brackets, then whitespace.
_TERMINAL = re.compile(r"""[.!?\u2026]+["'\u2019\u201d)\]]*(?P<space>\s+)""")
_LINE_BREAK = re.compile(r"[^\S\n]*\n\s*")
# What may start the next sentence: a capital letter, a digit, an opening quote or bracket, a
# list marker or a currency sign.
_SENTENCE_START = re.compile(
    r"""[A-Z\u00C0-\u00DE0-9"'\u2018\u201c(\[*\-\u2022#$\u20ac\u20b9\u00a3]"""
)


def _is_abbreviation(text: str, dot_at: int, next_char: str) -> bool:
    """Whether the period at ``dot_at`` belongs to an abbreviation rather than ending a sentence."""
    start = dot_at  # scan back to the word's start (a regex anchored at $ would rescan the text)
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    word = text[start:dot_at].lstrip("\"'([\u2018\u201c")
    bare = word.lower()
    if not bare:
        return False
    if bare in ABBREVIATIONS:
        return True
    if bare in NUMBER_ABBREVIATIONS and next_char.isdigit():
        return True
    # Dotted abbreviations: "e.g", "i.e", "U.S", "a.m" (the final period is the one at dot_at).
    parts = word.split(".")
    if len(parts) > 1 and all(len(part) <= 2 and part.isalpha() for part in parts):
        return True
    # A single capital letter is an initial ("J. Smith"), not a sentence.
    return len(word) == 1 and word.isupper()


def split_sentences(text: str) -> list[str]:
    """Split text into sentences; joining the result with ``""`` gives ``text`` back exactly.

    A sentence ends at ``.``, ``!``, ``?`` or ``…`` (plus closing quotes or brackets) followed by
    whitespace and a plausible sentence start (capital letter, digit, quote, bracket, list
    marker), unless the period belongs to a common abbreviation (``e.g.``, ``i.e.``, ``Dr.``,
    ``U.S.``, ``No. 5`` ...). Decimals such as ``4.5`` never split because no whitespace follows
    the period. A line break always ends a sentence: readers unwrap paragraphs, so the line
    breaks that remain separate list items, table rows and code lines.

    Args:
        text: any text.

    Returns:
        The sentences, each with the whitespace that follows it; ``[]`` for an empty string.
    """
    if not text:
        return []
    cuts: set[int] = set()
    for match in _TERMINAL.finditer(text):
        end = match.end()
        if end >= len(text):
            continue
        next_char = text[end]
        if "\n" not in match.group("space"):
            if not _SENTENCE_START.match(next_char):
                continue
            punctuation = text[match.start() : match.start("space")].rstrip("\"'\u2019\u201d)]")
            if punctuation == "." and _is_abbreviation(text, match.start(), next_char):
                continue
        cuts.add(end)
    for match in _LINE_BREAK.finditer(text):
        if match.start() > 0 and match.end() < len(text):
            cuts.add(match.end())
    sentences = []
    start = 0
    for cut in sorted(cuts):
        if cut > start:
            sentences.append(text[start:cut])
            start = cut
    sentences.append(text[start:])
    return sentences
