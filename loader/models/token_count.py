"""Counting a text's tokens without running the tokenizer on every piece the chunker weighs.

The chunkers count a block, then its paragraphs, its sentences and each finished chunk again
(about a dozen calls per SciFact abstract); the tokenizer itself was then most of a push's time
outside embedding. For a BERT WordPiece tokenizer (all-MiniLM-L6-v2, bge-small-en-v1.5) a text's
count is the sum of the counts of its whitespace-separated words: its normalizer and
pre-tokenizer work character by character, whitespace always separates two words, and WordPiece
cuts each word on its own. So ``WordPieceCounter`` remembers the count of every short word it has
seen and sums them; the words it has not seen are tokenized together, in one call, and the
tokens' offsets tell each word's count. A push's vocabulary settles after a few documents:
most counts then need no tokenizer call, the others a short one.

Seven characters are whitespace to Python's ``str.split`` but control characters to BERT, which
deletes them and so joins the words around them (form feed, vertical tab, U+001C-U+001F,
U+0085): a text holding one is tokenized whole. A long text (a 10 MB table block, counted once
before it is split between rows) is counted a piece of ``PIECE_CHARS`` at a time, each cut at a
space, tab or line break (whitespace BERT keeps, so the pieces' counts add up to the text's):
counted at once, its word list and the one tokenizer call over its new words took 500 MB.
Other tokenizers (SentencePiece, byte-level BPE)
attach spaces to the next token or merge across them: ``token_counter`` gives them the plain
count, one tokenizer call per text.

Example::

    count = token_counter(tokenizer)          # a ``tokenizers.Tokenizer``, no truncation
    count("Refund policy. Late deliveries")   # as len(tokenizer.encode(...).ids)
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Callable

# Whitespace to str.split, deleted by BERT's normalizer as control characters (see above).
_JOINING_SPACES = re.compile("[\x0b\x0c\x1c-\x1f\x85]")
# Words longer than this are counted but not remembered: a URL or a run of digits rarely comes
# back, and the chunker's cuts of a long word would fill the memo with its prefixes.
MAX_WORD_CHARS = 48
# The memo is emptied when it holds this many words (~20 MB), so a long push stays bounded.
MAX_WORDS = 200_000
# A text longer than this is counted piece by piece (see above).
PIECE_CHARS = 100_000
_PLAIN_SPACE = re.compile("[ \t\n\r]")  # whitespace to str.split and to BERT alike


def token_counter(tokenizer) -> Callable[[str], int]:
    """The fastest exact counter for ``tokenizer`` (special tokens excluded)."""
    if is_bert_wordpiece(tokenizer):
        return WordPieceCounter(tokenizer)

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False).ids)

    return count


def is_bert_wordpiece(tokenizer) -> bool:
    """Whether ``tokenizer`` splits words as BERT does (``BertNormalizer`` or none, then
    ``BertPreTokenizer``, then ``WordPiece``): the condition for counting word by word."""
    from tokenizers import models, normalizers, pre_tokenizers

    return (
        isinstance(tokenizer.normalizer, normalizers.BertNormalizer | None)
        and isinstance(tokenizer.pre_tokenizer, pre_tokenizers.BertPreTokenizer)
        and isinstance(tokenizer.model, models.WordPiece)
    )


class WordPieceCounter:
    """Token counts of a BERT WordPiece tokenizer, summed over remembered words (see the
    module's docstring for why the sum is exact)."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.words: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        if len(text) > PIECE_CHARS:
            return sum(self._count(piece) for piece in _pieces(text))
        return self._count(text)

    def _count(self, text: str) -> int:
        if _JOINING_SPACES.search(text):
            return len(self.tokenizer.encode(text, add_special_tokens=False).ids)
        known = self.words
        words = text.split()
        try:
            return sum([known[word] for word in words])
        except KeyError:
            if len(known) > MAX_WORDS:
                # A fresh memo rather than clear(): a count running in another thread keeps the
                # dict it read, which only ever grows.
                self.words = known = {}
            new = self._tokenize([word for word in dict.fromkeys(words) if word not in known])
            return sum([new[word] if word in new else known[word] for word in words])

    def _tokenize(self, words: list[str]) -> dict[str, int]:
        """The counts of ``words``, tokenized in one call as a text of their own; the short
        ones are remembered."""
        offsets = self.tokenizer.encode(" ".join(words), add_special_tokens=False).offsets
        starts = list(itertools.accumulate((len(word) + 1 for word in words[:-1]), initial=0))
        counts = [0] * len(words)
        for start, _end in offsets:  # offsets are characters of the joined text
            counts[bisect.bisect_right(starts, start) - 1] += 1
        new = dict(zip(words, counts, strict=True))
        self.words.update(
            (word, count) for word, count in new.items() if len(word) <= MAX_WORD_CHARS
        )
        return new


def _pieces(text: str):  # noqa: ANN202 - a generator of str
    """``text`` in pieces of about ``PIECE_CHARS``, each cut just before a plain space (a text
    without one is a piece of its own)."""
    start = 0
    while start < len(text):
        space = _PLAIN_SPACE.search(text, start + PIECE_CHARS)
        end = space.start() if space else len(text)
        yield text[start:end]
        start = end
