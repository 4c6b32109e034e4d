"""The grades of a query set as read back (pure): each rater's, and one per result, resolved
from several raters' by ``RESOLUTION``. Stored and read by ``loader.query.judgments``.

Example::

    state = JudgingState()
    state.add(Grade(0, "c1", 2, rater="alice"))
    state.add(Grade(0, "c1", 1, rater="bob"))
    state.grades[0]["c1"].grade        # 1: the mean rounded down
    state.mine("alice")[0]["c1"].grade  # 2
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

GRADES = (0, 1, 2)  # not relevant, partly, answers it: the page's keys and every file's ratings


@dataclass
class Grade:
    """One graded result: the chunk and where it sits, its grade (0, 1, 2) and who gave it
    (the name of the rater's API key; ``""`` when signed in without keys, or resolved from
    several raters' grades)."""

    question_index: int
    chunk_id: str
    grade: int
    source: str = ""
    heading_path: list[str] = field(default_factory=list)
    rater: str = ""
    note: str = ""  # the rater's optional explanation


RESOLUTION = "the mean of the raters' grades, rounded down"


def resolved_grade(grades: list[int]) -> int:
    """One grade for a result several raters graded: ``RESOLUTION`` (2 and 1 give 1, 2 and 0
    give 1, 1 and 0 give 0): a result counts as relevant only as far as every rater's mean
    says. Pure."""
    return sum(grades) // len(grades)


@dataclass
class JudgingState:
    """The grades and skips of one query set: ``ratings`` every rater's, ``grades`` one per
    result (a result several raters graded resolved by ``RESOLUTION``)."""

    grades: dict[int, dict[str, Grade]] = field(default_factory=dict)  # index -> chunk -> grade
    skipped: set[int] = field(default_factory=set)
    # index -> chunk -> rater -> grade
    ratings: dict[int, dict[str, dict[str, Grade]]] = field(default_factory=dict)
    # index -> chunk -> rater -> why the rater cannot tell (no grade: the result stays ungraded)
    cant_tell: dict[int, dict[str, dict[str, str]]] = field(default_factory=dict)
    needs: dict[int, str] = field(default_factory=dict)  # index -> the information need

    def add(self, grade: Grade) -> None:
        """Keep ``grade`` among the ratings and resolve its result's grade again."""
        by_rater = self.ratings.setdefault(grade.question_index, {}).setdefault(grade.chunk_id, {})
        by_rater[grade.rater] = grade
        given = list(by_rater.values())
        self.grades.setdefault(grade.question_index, {})[grade.chunk_id] = (
            given[0]
            if len(given) == 1
            else dataclasses.replace(
                given[0], grade=resolved_grade([g.grade for g in given]), rater=""
            )
        )

    def mine(self, rater: str) -> dict[int, dict[str, Grade]]:
        """``rater``'s own grades: index -> chunk -> grade."""
        mine: dict[int, dict[str, Grade]] = {}
        for number, chunks in self.ratings.items():
            for chunk_id, by_rater in chunks.items():
                if rater in by_rater:
                    mine.setdefault(number, {})[chunk_id] = by_rater[rater]
        return mine

    def raters(self) -> list[str]:
        return sorted({r for chunks in self.ratings.values() for g in chunks.values() for r in g})

    def resume_at(self, count: int, rater: str | None = None) -> int:
        """The first question neither graded (by ``rater``, when given) nor skipped (``count``
        when all are)."""
        graded = self.grades if rater is None else self.mine(rater)
        for number in range(count):
            if number not in graded and number not in self.skipped:
                return number
        return count


def current_number(stored: dict, questions: list[str], places: dict[str, int]) -> int | None:
    """The question a stored judging document (a grade, a note, a skip, a need) belongs to in
    the set as it is now, or ``None`` when the set no longer asks it. Pure.

    A set replaced under its name (``loader judgments import`` of another file, the page's
    import) keeps its id, so a document's ``question_index`` may now number another question:
    the document follows the text it was given for (its ``question``) to where that question is
    now (``places``: text -> first number, ``question_places``). A document written without its
    question's text keeps its number.
    """
    number = int(stored.get("question_index", -1))
    asked = stored.get("question")
    if asked is None or (0 <= number < len(questions) and questions[number] == asked):
        return number
    return places.get(asked)


def question_places(questions: list[str]) -> dict[str, int]:
    """Each question's text -> its first number in the set. Pure."""
    places: dict[str, int] = {}
    for number, question in enumerate(questions):
        places.setdefault(question, number)
    return places


def in_place(stored: dict, number: int) -> bool:
    """Whether a stored document was written for question ``number`` itself (not moved there
    by ``current_number``): where both exist, it is the later word. Pure."""
    return int(stored.get("question_index", -1)) == number
