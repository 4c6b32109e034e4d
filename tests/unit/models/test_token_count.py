"""Word-by-word token counts agree with the tokenizer on every text, hostile ones included."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from loader.models import token_count
from loader.models.embedding import resolve_model_path
from loader.models.token_count import WordPieceCounter, is_bert_wordpiece, token_counter

# Words a real folder holds next to plain English: accents, CJK, emoji, a zero-width space
# (deleted by BERT: no token), codes, a URL, a word past WordPiece's 100 characters ([UNK]),
# punctuation glued to words, and each whitespace character Python splits on, the seven that
# BERT deletes as control characters among them.
WORDS = [
    "refund", "Refund,", "policy.", "(late)", "délivrée", "naïve", "東京都", "données:", "🙂",
    "R-2207", "E1043", "order#44821", "x\u200by", "https://example.org/a?b=c&d=e", "p53",
    "CD4+", "ﬁle", "İstanbul", "a" * 120, "--", "’s", "e.g.", "\u0301", "٣٤",
]  # fmt: skip
SPACES = [" ", "  ", "\n", "\n\n", "\t", "\r\n", "\u00a0", "\u3000", "\u2028", "\x0c", "\x0b",
          "\x1c", "\x1f", "\x85"]  # fmt: skip


@pytest.fixture(scope="module", params=["all-MiniLM-L6-v2", "bge-small-en-v1.5"])
def tokenizer(request) -> Tokenizer:
    tokenizer = Tokenizer.from_file(str(Path(resolve_model_path(request.param)) / "tokenizer.json"))
    tokenizer.no_truncation()  # as the embedder loads it for counting
    tokenizer.no_padding()
    return tokenizer


def exact(tokenizer: Tokenizer, text: str) -> int:
    return len(tokenizer.encode(text, add_special_tokens=False).ids)


def random_texts(count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        parts = [rng.choice(WORDS)]
        for _ in range(rng.randint(0, 12)):
            parts += [rng.choice(SPACES), rng.choice(WORDS)]
        texts.append("".join(parts))
    return texts


def test_minilm_and_bge_tokenizers_are_counted_word_by_word(tokenizer):
    assert is_bert_wordpiece(tokenizer)
    assert isinstance(token_counter(tokenizer), WordPieceCounter)


def test_every_count_equals_the_tokenizers_whatever_the_memo_holds(tokenizer):
    count = WordPieceCounter(tokenizer)
    texts = random_texts(600)
    for text in texts + texts:  # the second round is answered from the memo
        assert count(text) == exact(tokenizer, text), repr(text)
    assert count.words, "nothing was remembered"
    assert "a" * 120 not in count.words  # long words are counted, not kept


def test_a_joining_control_character_is_never_summed_over(tokenizer):
    count = WordPieceCounter(tokenizer)
    count("a b")  # both words known now
    # BERT deletes the form feed and reads one word, "ab": not a + b.
    assert count("a\x0cb") == exact(tokenizer, "a\x0cb") == 1
    assert count("a b") == 2


def test_the_memo_is_bounded_and_counts_stay_exact_across_its_reset(tokenizer, monkeypatch):
    monkeypatch.setattr(token_count, "MAX_WORDS", 20)
    count = WordPieceCounter(tokenizer)
    for text in random_texts(200, seed=11):
        assert count(text) == exact(tokenizer, text), repr(text)
        # Emptied once past the bound, before the words of the text that crossed it are added.
        assert len(count.words) <= 21 + len(text.split())


def test_other_tokenizers_are_counted_whole():
    # A SentencePiece-style tokenizer: the space belongs to the next token ("▁word"), so counts
    # do not add up over words.
    metaspace = Tokenizer(models.WordLevel({"<unk>": 0, "▁refund": 1}, unk_token="<unk>"))
    metaspace.pre_tokenizer = pre_tokenizers.Metaspace()
    assert not is_bert_wordpiece(metaspace)
    count = token_counter(metaspace)
    assert not isinstance(count, WordPieceCounter)
    assert count("refund policy") == exact(metaspace, "refund policy") == 2


def test_a_long_text_is_counted_in_pieces_that_add_up_to_its_count(tokenizer, monkeypatch):
    """A 10 MB table block was counted at once: its word list and one tokenizer call over its
    new words took 500 MB. Pieces cut at plain whitespace add up exactly."""
    monkeypatch.setattr(token_count, "PIECE_CHARS", 40)
    count = WordPieceCounter(tokenizer)
    for text in random_texts(300, seed=11) + ["x" * 100, "a " * 60 + "b" * 90]:
        assert count(text) == exact(tokenizer, text), repr(text)
    called = []
    monkeypatch.setattr(count, "_count", lambda piece: called.append(len(piece)) or 0)
    count("word " * 100)
    assert len(called) > 1 and max(called) <= 40 + 5
