"""The pair miner of `loader adapt`: heading, title and inverse-cloze pairs from chunks as the
index holds them; per tenant; held-out pairs split by whole documents."""

from __future__ import annotations

from collections import Counter

from loader.train.pairs import Chunk, mine_pairs, sentences, split_by_document

LATE = (
    "Orders that arrive more than 45 minutes late are refunded in full. The refund goes back to "
    "the card or wallet you paid with. It takes three to five working days to arrive."
)
UPI = (
    "UPI payments are confirmed within seconds by your bank app. Refunds to UPI arrive within "
    "one working day after we approve them."
)


def chunk(tenant="acme", doc="d1", position=0, section="s1", heading="Late deliveries", body=LATE,
          title="Refund policy"):  # fmt: skip
    return Chunk(
        tenant=tenant,
        doc_id=doc,
        chunk_id=f"{doc}-{position}",
        title=title,
        heading_path=heading,
        section_id=section,
        position=position,
        body=body,
        content=f"{title} > {heading}\n\n{body}",
    )


def test_a_heading_points_at_its_sections_body_without_the_heading():
    (heading,) = [p for p in mine_pairs([chunk()]) if p.kind == "heading"]
    assert (heading.query, heading.positive) == ("Late deliveries", LATE)
    assert "Late deliveries" not in heading.positive


def test_one_heading_pair_per_section_one_title_pair_per_document():
    chunks = [
        chunk(position=0, section="s1"),
        chunk(position=1, section="s1", body=UPI),  # the same section, a second chunk
        chunk(position=2, section="s2", heading="UPI refunds", body=UPI),
    ]
    kinds = Counter(pair.kind for pair in mine_pairs(chunks))
    assert (kinds["heading"], kinds["title"]) == (2, 1)
    (title,) = [p for p in mine_pairs(chunks) if p.kind == "title"]
    assert (title.query, title.positive, title.chunk_id) == ("Refund policy", LATE, "d1-0")


def test_a_cloze_pair_is_a_sentence_and_its_chunk_without_it():
    (cloze,) = [p for p in mine_pairs([chunk()], seed=3) if p.kind == "cloze"]
    assert cloze.query in sentences(LATE)
    assert cloze.query not in cloze.positive
    assert cloze.positive.startswith("Refund policy > Late deliveries\n\n")
    rest = [s for s in sentences(LATE) if s != cloze.query]
    assert cloze.positive.endswith(" ".join(rest))


def test_the_same_corpus_and_seed_give_the_same_pairs():
    chunks = [chunk(doc=f"d{i}", position=0) for i in range(20)]
    assert mine_pairs(chunks, seed=7) == mine_pairs(list(reversed(chunks)), seed=7)
    queries = {p.query for p in mine_pairs(chunks, seed=7) if p.kind == "cloze"}
    assert len(queries) > 1  # the sentence is drawn, not always the first


def test_a_chunk_too_short_to_split_gives_no_cloze_pair():
    short = chunk(body="Refunds are free of charge for everyone.")
    assert [p.kind for p in mine_pairs([short])] == []  # also too short for heading and title


def test_no_pair_crosses_tenants():
    chunks = [
        chunk(tenant="acme", doc="d1"),
        chunk(tenant="globex", doc="d1", body=UPI, heading="UPI"),  # the same document id
    ]
    pairs = mine_pairs(chunks)
    by_chunk = {(c.tenant, c.chunk_id): c for c in chunks}
    assert {p.tenant for p in pairs} == {"acme", "globex"}
    for pair in pairs:
        own = by_chunk[(pair.tenant, pair.chunk_id)]
        assert pair.positive in (own.body, own.content) or pair.positive.startswith(
            own.content.partition("\n\n")[0]
        )
        other_body = UPI if pair.tenant == "acme" else LATE
        assert other_body not in pair.positive


def test_held_out_pairs_are_whole_documents():
    chunks = [chunk(doc=f"d{i}", position=p, section=f"s{p}") for i in range(10) for p in range(3)]
    pairs = mine_pairs(chunks)
    train, held = split_by_document(pairs, 0.3, seed=1)
    assert len({p.doc_id for p in held}) == 3
    assert not {p.doc_id for p in train} & {p.doc_id for p in held}
    assert len(train) + len(held) == len(pairs)
