"""Which question a stored judging document belongs to once its set was replaced under its
name (``loader.query.grades.current_number``), without a cluster."""

from __future__ import annotations

from loader.query.grades import current_number, in_place, question_places

QUESTIONS = ["cafe?", "tide?", "cafe?"]
PLACES = question_places(QUESTIONS)


def test_a_question_asked_twice_is_placed_at_its_first_number():
    assert PLACES == {"cafe?": 0, "tide?": 1}


def test_a_document_follows_its_question_to_its_number_now():
    assert current_number({"question_index": 1, "question": "tide?"}, QUESTIONS, PLACES) == 1
    assert current_number({"question_index": 0, "question": "tide?"}, QUESTIONS, PLACES) == 1
    assert current_number({"question_index": 7, "question": "cafe?"}, QUESTIONS, PLACES) == 0
    # Written for the second "cafe?" itself: it stays there.
    assert current_number({"question_index": 2, "question": "cafe?"}, QUESTIONS, PLACES) == 2


def test_a_question_the_set_no_longer_asks_takes_its_documents_out():
    assert current_number({"question_index": 0, "question": "ferry?"}, QUESTIONS, PLACES) is None


def test_a_document_without_its_question_keeps_its_number():
    """Skips and needs were written without the text before; they stay where they were."""
    assert current_number({"question_index": 1, "kind": "skip"}, QUESTIONS, PLACES) == 1


def test_in_place_tells_a_moved_document_from_one_written_there():
    assert in_place({"question_index": 1}, 1)
    assert not in_place({"question_index": 0}, 1)
