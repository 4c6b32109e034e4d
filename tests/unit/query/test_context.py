from __future__ import annotations

from loader.query.context import (
    Hit,
    drop_overlapping_duplicates,
    expand_parents,
    expand_windows,
    merge_adjacent,
    order_for_prompt,
    overlap_length,
)

PREFIX = "Refund policy > Late deliveries\n\n"


def _hit(chunk_id: str, doc_id: str, body: str, position: int = 0, **fields) -> Hit:
    return Hit(
        chunk_id=chunk_id,
        doc_id=doc_id,
        body=body,
        text=PREFIX + body,
        position=position,
        source=f"{doc_id}.md",
        **fields,
    )


def test_expand_parents_replaces_body_and_keeps_one_hit_per_section() -> None:
    parent = "S1. S2. S3. S4."
    hits = [
        _hit("a#1", "a", "S2.", 1, section_id="s1", parent_text=parent, scores={"rerank": 0.9}),
        _hit("b#0", "b", "Other.", 0),
        _hit("a#2", "a", "S3.", 2, section_id="s1", parent_text=parent),
        _hit("c#0", "c", "No parent.", 0, section_id="s9"),
    ]
    expanded = expand_parents(hits)
    assert [h.chunk_id for h in expanded] == ["a#1", "b#0", "c#0"]
    assert expanded[0].body == parent
    assert expanded[0].text == PREFIX + parent  # the indexed prefix is kept
    assert expanded[0].scores == {"rerank": 0.9}
    assert expanded[1].body == "Other." and expanded[2].body == "No parent."
    assert hits[0].body == "S2."  # input unchanged


def test_expand_windows() -> None:
    hits = [_hit("a#1", "a", "S2.", 1, window="S1. S2. S3."), _hit("a#5", "a", "S6.", 5)]
    assert [h.body for h in expand_windows(hits)] == ["S1. S2. S3.", "S6."]


def test_overlap_length_whole_sentences_only() -> None:
    assert overlap_length("A b. C d.", "C d. E f.") == len("C d.")
    assert overlap_length("One. Two. Three.", "Two. Three. Four.") == len("Two. Three.")
    # A word or a few letters in common at the boundary are not an overlap.
    assert overlap_length("Sit on the mat", "mat is red.") == 0
    assert overlap_length("ending in ab.", "b. then more.") == 0
    assert overlap_length("Same.", "Same.") == len("Same.")
    assert overlap_length("", "x") == 0


def test_merge_adjacent_removes_the_overlap() -> None:
    hits = [
        _hit("d1#4", "d1", "S1. S2. S3.", 4, scores={"rerank": 0.9}, ranks={"bm25": 1}),
        _hit("d1#9", "d1", "Far away.", 9),
        _hit("d2#5", "d2", "Another document.", 5),
        _hit("d1#5", "d1", "S3. S4.", 5, scores={"rerank": 0.4}),
    ]
    merged = merge_adjacent(hits)
    assert [h.chunk_id for h in merged] == ["d1#4", "d1#9", "d2#5"]
    assert merged[0].body == "S1. S2. S3. S4."
    assert merged[0].text == PREFIX + "S1. S2. S3. S4."
    assert merged[0].scores == {"rerank": 0.9} and merged[0].ranks == {"bm25": 1}
    assert merged[0].position == 4


def test_merge_adjacent_takes_the_best_members_place() -> None:
    # Position 7 ranks first, its neighbour 6 second-to-last: one hit, at rank 1, in text order.
    hits = [
        _hit("d#7", "d", "B. C.", 7, scores={"rerank": 0.8}),
        _hit("x#0", "x", "X.", 0),
        _hit("d#6", "d", "A. B.", 6, scores={"rerank": 0.1}),
    ]
    merged = merge_adjacent(hits)
    assert [h.chunk_id for h in merged] == ["d#7", "x#0"]
    assert merged[0].body == "A. B. C."
    assert merged[0].position == 6
    assert merged[0].scores == {"rerank": 0.8}


def test_merge_adjacent_without_overlap_and_three_in_a_row() -> None:
    hits = [
        _hit("d#1", "d", "Second part.", 1),
        _hit("d#0", "d", "First part.", 0),
        _hit("d#2", "d", "Second part. Third part.", 2),
    ]
    (merged,) = merge_adjacent(hits)
    assert merged.body == "First part.\n\nSecond part. Third part."
    assert merged.chunk_id == "d#1"


def test_merge_adjacent_single_hits_and_duplicates() -> None:
    hits = [_hit("d#3", "d", "Alone.", 3), _hit("d#3", "d", "Alone.", 3), _hit("e#3", "e", "E.", 3)]
    assert [h.chunk_id for h in merge_adjacent(hits)] == ["d#3", "e#3"]
    assert merge_adjacent([]) == []


def test_drop_overlapping_duplicates() -> None:
    hits = [
        _hit("a", "d", "x y z", 0),
        _hit("b", "d", "y", 1),  # inside a: dropped
        _hit("c", "e", "other text", 0),
        _hit("d", "d", "w x  y z v", 2),  # contains a: a takes this body, d is dropped
        _hit("e", "f", "other   text", 0),  # same as c up to whitespace: dropped
    ]
    kept = drop_overlapping_duplicates(hits)
    assert [h.chunk_id for h in kept] == ["a", "c"]
    assert kept[0].body == "w x  y z v"


def test_drop_overlapping_duplicates_merges_several_contained_hits() -> None:
    hits = [_hit("a", "d", "one", 0), _hit("b", "d", "two", 1), _hit("c", "d", "one two", 2)]
    kept = drop_overlapping_duplicates(hits)
    assert [h.chunk_id for h in kept] == ["a"]
    assert kept[0].body == "one two"


def test_order_for_prompt_lost_in_the_middle() -> None:
    assert order_for_prompt([1, 2, 3, 4, 5]) == [1, 3, 5, 4, 2]
    assert order_for_prompt([1, 2, 3, 4, 5, 6]) == [1, 3, 5, 6, 4, 2]
    assert order_for_prompt([1]) == [1]
    assert order_for_prompt([]) == []
    hits = [_hit(str(i), "d", f"B{i}.", i) for i in range(1, 5)]
    assert [h.chunk_id for h in order_for_prompt(hits)] == ["1", "3", "4", "2"]
