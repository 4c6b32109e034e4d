"""The character limit: no chunk body over max_chars, whatever the tokenizer counts.

WordPiece reads any word over 100 characters as one [UNK], so a 2 MB line without spaces "fits"
in one token; these tests feed every strategy such a line (and such a heading) with the real
tokenizer.
"""

from __future__ import annotations

import random
import re
import string

import pytest

from loader.documents import PATH_SEPARATOR, Block, Document, Section
from loader.errors import ConfigError
from loader.ingest.chunking import STRATEGIES, ChunkingConfig, chunk_document, chunking_config
from loader.ingest.chunking.limits import (
    EXPANSION_CHARS_FACTOR,
    MAX_PREFIX_SHARE,
    around,
    best_cut,
    clip,
    split_at_chars,
)
from loader.settings import Settings

MAX_CHARS = ChunkingConfig().max_chars
# Half a MiB without a space or punctuation, every 8 characters unique so each piece can be
# placed: over a hundred times max_chars, and over the token counter's 100,000-character pieces.
# (2 MiB, as first written, cut the same way in four times the time: 37 s of the unit tests.)
BLOB = "".join(f"w{number:07d}" for number in range(512 * 1024 // 8))
HEADING = "h" * (512 * 1024)
_BLOB_RUN = re.compile(r"w[0-9w]{15,}")


@pytest.fixture(scope="module")
def huge_line_document() -> Document:
    return Document(
        source="dump.md",
        title="Dump",
        sections=[
            Section((HEADING,), [Block("paragraph", "An introduction. It has two sentences.")]),
            Section(
                (HEADING, "Details"),
                [
                    Block("paragraph", "Before the line. Some context."),
                    Block("paragraph", BLOB),
                    Block("paragraph", "After the line."),
                ],
            ),
        ],
    )


def covered(pieces: list[str], text: str) -> int:
    """How many characters of ``text`` the in-order ``pieces`` (substrings of it) cover."""
    reached = start = 0
    for piece in pieces:
        at = text.find(piece, start)
        assert at >= 0, f"not a piece of the line: {piece[:40]}..."
        if at > reached:
            break  # a gap
        reached = max(reached, at + len(piece))
        start = at
    return reached


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_half_megabyte_line_without_spaces_is_cut_by_characters(
    strategy: str, huge_line_document, embed, count_tokens
) -> None:
    config = ChunkingConfig(strategy=strategy)
    assert count_tokens(BLOB) <= 3  # the premise: the tokenizer cannot see the problem

    chunks = chunk_document(huge_line_document, config, count_tokens, embed)

    assert max(len(chunk.body) for chunk in chunks) <= MAX_CHARS
    assert all(count_tokens(chunk.text) <= config.max_tokens for chunk in chunks)
    # Every character of the line is in some body (pieces may repeat as overlap).
    runs = [run for chunk in chunks for run in _BLOB_RUN.findall(chunk.body)]
    assert covered(runs, BLOB) == len(BLOB)
    assert len(chunks) >= len(BLOB) // MAX_CHARS
    # So is the text around it.
    bodies = " ".join(chunk.body for chunk in chunks)
    for words in ("An introduction.", "Before the line.", "Some context.", "After the line."):
        assert words in bodies
    # The huge heading is shortened in the prefix of every chunk, not repeated whole each time.
    assert max(len(chunk.prefix) for chunk in chunks) <= MAX_CHARS // MAX_PREFIX_SHARE
    assert all(chunk.heading_path[0].startswith("hhhh") for chunk in chunks)
    # The stored trail is whole for any real path, but not repeated whole per chunk either.
    assert all(
        len(PATH_SEPARATOR.join((chunk.title, *chunk.heading_path))) <= MAX_CHARS
        for chunk in chunks
    )
    # The stored expansions are capped too, and hold the chunk they expand.
    for chunk in chunks:
        assert len(chunk.parent_text) <= EXPANSION_CHARS_FACTOR * MAX_CHARS
        assert len(chunk.window) <= EXPANSION_CHARS_FACTOR * MAX_CHARS
    if strategy == "parent-document":
        assert all(chunk.parent_text for chunk in chunks)
        assert all(chunk.body[:64] in chunk.parent_text for chunk in chunks)
    if strategy == "sentence-window":
        assert all(chunk.window for chunk in chunks)


@pytest.mark.parametrize("strategy", [s for s in STRATEGIES if s != "semantic"])
def test_a_long_line_of_many_tokens_stays_within_both_limits(strategy: str, count_tokens) -> None:
    """Base64-like text: punctuation gives it many tokens, so the token splitter cuts it (and
    must not re-read the whole rest of the line for every piece)."""
    rng = random.Random(13)
    line = "".join(rng.choice(string.ascii_letters + "+/") for _ in range(60_000))
    doc = Document("b64.txt", "B64", [Section((), [Block("paragraph", line)])])
    config = ChunkingConfig(strategy=strategy, max_chars=500)

    chunks = chunk_document(doc, config, count_tokens)

    assert max(len(chunk.body) for chunk in chunks) <= 500
    assert all(count_tokens(chunk.text) <= config.max_tokens for chunk in chunks)
    assert covered([chunk.body for chunk in chunks], line) == len(line)


def test_split_at_chars_prefers_the_best_boundary_near_the_limit() -> None:
    assert split_at_chars("one two. three four\n\nfive six", 12) == [
        "one two.",
        "three four",
        "five six",
    ]
    assert split_at_chars("alpha beta gamma delta", 12) == ["alpha beta", "gamma delta"]
    # Punctuation stays with the piece before the cut.
    assert split_at_chars("aaaaaaa/bbbbbbb/ccccccc", 10) == ["aaaaaaa/", "bbbbbbb/", "ccccccc"]
    # No boundary at all: a hard cut, nothing lost.
    assert split_at_chars("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]
    # A boundary in the first half is not worth a tiny piece.
    assert split_at_chars("ab " + "x" * 20, 10) == ["ab xxxxxxx", "x" * 10, "xxx"]
    assert split_at_chars("short", 10) == ["short"]


def test_best_cut_never_exceeds_the_limit() -> None:
    rng = random.Random(7)
    for _ in range(500):
        text = "".join(rng.choice("ab .,\n") for _ in range(rng.randint(1, 60)))
        limit = rng.randint(1, 30)
        cut = best_cut(text, limit)
        assert 1 <= cut <= max(1, min(limit, len(text)))
        for piece in split_at_chars(text, limit):
            assert 0 < len(piece) <= limit


def test_clip_and_around_mark_what_they_cut() -> None:
    assert clip("short", 10) == "short"
    assert clip("several words in a row", 12) == "several…"
    assert len(clip("x" * 100, 10)) == 10
    text = " ".join(f"w{number}" for number in range(1000))
    window = around(text, "w500 w501", 60)
    assert len(window) <= 60
    assert "w500 w501" in window
    assert window.startswith("…") and window.endswith("…")
    assert around(text, "w0 w1", 60).startswith("w0 w1")
    assert around("short text", "text", 60) == "short text"


def test_max_chars_comes_from_the_setting_and_is_checked() -> None:
    assert chunking_config(Settings(), 254).max_chars == 4000
    assert chunking_config(Settings(chunk_max_chars=1200), 254).max_chars == 1200
    with pytest.raises(ConfigError, match="chunk_max_chars is 50; it must be at least 200"):
        chunking_config(Settings(chunk_max_chars=50), 254)
