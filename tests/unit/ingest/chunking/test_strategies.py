"""fixed, recursive, semantic and sentence-window."""

from __future__ import annotations

from loader.documents import Block, Document, Section, section_id
from loader.ingest.chunking import ChunkingConfig, chunk_document, split_sentences
from tests.unit.ingest.chunking.sample_text import prose


def sentences_of(text: str) -> list[str]:
    return [sentence.strip() for sentence in split_sentences(text) if sentence.strip()]


def test_sentence_window_holds_neighbours_within_the_section(count_tokens) -> None:
    first = prose(2, 4)
    second = prose(1, 3, start=100)
    doc = Document(
        "w.md",
        "W",
        [
            Section(("One",), [Block("paragraph", p) for p in first]),
            Section(("Two",), [Block("paragraph", p) for p in second]),
        ],
    )
    config = ChunkingConfig(strategy="sentence-window", sentence_window=2)
    chunks = chunk_document(doc, config, count_tokens)
    one = [s for p in first for s in sentences_of(p)]
    two = [s for p in second for s in sentences_of(p)]
    assert [chunk.body for chunk in chunks] == one + two
    for index, chunk in enumerate(chunks[: len(one)]):
        expected = one[max(0, index - 2) : index + 3]
        assert sentences_of(chunk.window) == expected
        assert chunk.section_id == section_id("w.md", ("One",), 0)
    # The first sentence of section two sees nothing of section one.
    assert sentences_of(chunks[len(one)].window) == two[:3]


def test_semantic_splits_where_the_topic_changes(embed, count_tokens) -> None:
    refunds = [
        "Refunds for late orders are paid to the original payment method.",
        "A refund for a cancelled order arrives within 5 to 7 working days.",
        "Refunds for UPI payments usually reach your bank within 48 hours.",
        "If your refund has not arrived after 7 days, contact support about the refund.",
        "Card refunds depend on how quickly your bank processes the refund.",
    ]
    pasta = [
        "Boil the pasta in plenty of salted water for about ten minutes.",
        "Fry the garlic in olive oil until it turns golden.",
        "Toss the drained pasta with the garlic oil and chopped parsley.",
        "Grate some parmesan cheese over the pasta before serving.",
        "Cook the pasta until it is al dente, then drain it.",
    ]
    doc = Document(
        "s.md", "S", [Section(("Mixed",), [Block("paragraph", " ".join(refunds + pasta))])]
    )
    config = ChunkingConfig(strategy="semantic", semantic_threshold=0.3, semantic_min_tokens=20)
    chunks = chunk_document(doc, config, count_tokens, embed)
    assert [sentences_of(chunk.body) for chunk in chunks] == [refunds, pasta]


def test_semantic_keeps_small_chunks_together(embed, count_tokens) -> None:
    text = "Pay by UPI. Pasta needs salt. Cards work too. Parmesan is nice."
    doc = Document("s.md", "S", [Section(("Mixed",), [Block("paragraph", text)])])
    config = ChunkingConfig(strategy="semantic", semantic_threshold=0.99, semantic_min_tokens=40)
    chunks = chunk_document(doc, config, count_tokens, embed)
    assert [chunk.body for chunk in chunks] == [text]  # under the minimum: the section ends first


def test_fixed_windows_overlap_by_at_most_the_setting(count_tokens) -> None:
    doc = Document("f.md", "F", [Section(("A",), [Block("paragraph", p) for p in prose(8, 5)])])
    config = ChunkingConfig(strategy="fixed", target_tokens=100, overlap_tokens=20)
    chunks = chunk_document(doc, config, count_tokens)
    assert len(chunks) > 3
    for previous, following in zip(chunks, chunks[1:], strict=False):
        before, after = previous.body.split(), following.body.split()
        shared = next(
            n
            for n in range(min(len(before), len(after)), -1, -1)
            if before[len(before) - n :] == after[:n]
        )
        assert 0 < count_tokens(" ".join(after[:shared])) <= 20
        assert count_tokens(following.text) <= 100 + 5


def test_recursive_prefers_paragraph_boundaries(count_tokens) -> None:
    paragraphs = prose(6, 2)
    doc = Document("r.md", "R", [Section(("A",), [Block("paragraph", p) for p in paragraphs])])
    config = ChunkingConfig(strategy="recursive", target_tokens=90, overlap_tokens=0)
    chunks = chunk_document(doc, config, count_tokens)
    assert len(chunks) > 1
    for chunk in chunks:
        assert all(part in paragraphs for part in chunk.body.split("\n\n"))
