"""The pair miner of `loader adapt`: heading, title and inverse-cloze pairs from chunks as the
index holds them; per tenant; held-out pairs split by whole documents."""

from __future__ import annotations

from collections import Counter

from loader.train.pairs import (
    Chunk,
    Pair,
    balance_kinds,
    dominant_kind,
    mine_pairs,
    sentences,
    split_by_document,
    starts_with,
)

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


ABSTRACT = (
    "Sourdough baking with wild yeast. Wild yeast and lactic bacteria leaven the dough over a "
    "long night, and the acids they make give the bread its sour taste."
)


def test_a_title_or_heading_the_passage_opens_with_makes_no_pair():
    """A short abstract that begins with its title finds itself by its first words for any
    model: the pair teaches string matching, and the guard would measure it as a gain
    (issue #44: 1,398 of 1,536 pairs were such titles)."""
    opens = chunk(
        title="Sourdough Baking", heading="Sourdough baking with wild yeast", body=ABSTRACT
    )
    assert [p.kind for p in mine_pairs([opens]) if p.kind != "cloze"] == []
    elsewhere = chunk(title="Bread at home", heading="Leavening", body=ABSTRACT)
    assert sorted(p.kind for p in mine_pairs([elsewhere]) if p.kind != "cloze") == [
        "heading",
        "title",
    ]
    assert starts_with("Sourdough baking: wild yeast ...", "sourdough  Baking")
    assert not starts_with("Sourdough bakings are rare", "Sourdough baking")


def _pairs(kind: str, count: int) -> list[Pair]:
    return [
        Pair(kind, f"{kind} {i}", f"passage {i}", "acme", f"d{i}", f"c{i}") for i in range(count)
    ]


def test_one_kind_is_cut_to_the_others_number_for_training():
    pairs = _pairs("title", 90) + _pairs("cloze", 7) + _pairs("heading", 3)
    balanced = balance_kinds(pairs, seed=0)
    assert Counter(p.kind for p in balanced) == {"title": 10, "cloze": 7, "heading": 3}
    assert balance_kinds(pairs, seed=0) == balanced  # seeded
    assert [p for p in pairs if p in balanced] == balanced  # order kept
    even = _pairs("title", 5) + _pairs("cloze", 5)
    assert balance_kinds(even) == even
    alone = _pairs("title", 40)
    assert balance_kinds(alone) == alone  # nothing to balance one kind with


def test_a_kind_over_four_fifths_of_the_pairs_is_named():
    assert dominant_kind({"heading": 10, "title": 1398, "cloze": 128}) == "title"
    assert dominant_kind({"heading": 20, "title": 80, "cloze": 0}) is None  # 80 %: not over
    assert dominant_kind({"heading": 0, "title": 0, "cloze": 0}) is None
