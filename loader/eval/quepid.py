"""Quepid's ratings file, both ways: the ``query,docid,rating`` CSV that Quepid (and the tools
around it) export and import, so a team can bring the grades it gave in Quepid to the judging
page, or take the page's grades back. Pure: ``loader.eval.judgments`` reads and writes the files.

The document id is the chunk's id (``_id`` in the index), as Quepid sees it when it searches
this index; a query's rows need not be together, and the questions keep the order in which
each first appears. Quepid's scorers grade on their own scale (nDCG@10's is 0-3, AP's 0-1);
the page grades 0-2, so ``scale`` names the file's top rating and a rating is mapped linearly
to the nearest grade, halves up (0-3: 0 → 0, 1 → 1, 2 → 1, 3 → 2; 0-1: 1 → 2), and back
(0-3: 0 → 0, 1 → 2, 2 → 3).

Example::

    text = ratings_csv([("late?", {"c2": 2, "c1": 1})], scale=3)   # query,docid,rating ...
    questions, grades = read_ratings_csv(text, "ratings file r.csv", scale=3)
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Mapping

from loader.errors import ConfigError
from loader.query.grades import GRADES

HEADER = ("query", "docid", "rating")
TOP_GRADE = max(GRADES)


def is_ratings_csv(text: str) -> bool:
    """Whether ``text`` opens with Quepid's header line (any case, spaces around the names)."""
    first = text.lstrip("\ufeff").split("\n", 1)[0]
    return tuple(name.strip().lower() for name in first.split(",")) == HEADER


def to_grade(rating: float, scale: int) -> int:
    """A rating of 0..``scale`` as the page's grade 0..2, the nearest, halves up."""
    return math.floor(rating * TOP_GRADE / scale + 0.5)


def to_rating(grade: int, scale: int) -> int:
    """The page's grade as a rating of 0..``scale``, the nearest, halves up."""
    return math.floor(grade * scale / TOP_GRADE + 0.5)


def check_scale(scale: int) -> int:
    """``scale`` when it is a top rating (1 or more).

    Raises:
        ConfigError: naming ``--rating-scale``.
    """
    if isinstance(scale, bool) or not isinstance(scale, int) or scale < 1:
        raise ConfigError(f"--rating-scale: the file's top rating, 1 or more, not {scale!r}")
    return scale


def ratings_csv(graded: Iterable[tuple[str, Mapping[str, int]]], scale: int = TOP_GRADE) -> str:
    """The CSV of ``graded`` (each question and its grades, chunk id -> grade), one row per
    grade, the chunk ids of a question in order; ratings of 0..``scale``."""
    scale = check_scale(scale)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(HEADER)
    for question, grades in graded:
        for chunk_id in sorted(grades):
            writer.writerow((question, chunk_id, to_rating(grades[chunk_id], scale)))
    return out.getvalue()


def read_ratings_csv(
    text: str, name: str, scale: int = TOP_GRADE
) -> tuple[list[str], dict[int, dict[str, int]]]:
    """The questions of a ratings CSV in the order each first appears, and each one's grades
    (question number -> chunk id -> grade), ratings of 0..``scale`` mapped by ``to_grade``.

    Raises:
        ConfigError: naming the file (``name``) and the line: no header, a row without three
            fields, an empty query or docid, a rating that is no number of 0..``scale``, one
            query and docid rated twice; or a file with no row.
    """
    scale = check_scale(scale)
    rows = csv.reader(io.StringIO(text.lstrip("\ufeff"), newline=""), strict=True)
    if tuple(field.strip().lower() for field in next(rows, ())) != HEADER:
        raise ConfigError(f"{name}: line 1 must be the header {','.join(HEADER)}")
    numbers: dict[str, int] = {}
    grades: dict[int, dict[str, int]] = {}
    rated_on: dict[tuple[int, str], int] = {}
    try:
        for row in rows:
            line = rows.line_num
            if not any(field.strip() for field in row):
                continue
            if len(row) != len(HEADER):
                raise ConfigError(
                    f"{name}: line {line}: {len(row)} fields, expected 3 (query,docid,rating; "
                    "quote a query that holds a comma)"
                )
            query, chunk_id, rating = (field.strip() for field in row)
            if not query or not chunk_id:
                raise ConfigError(f"{name}: line {line}: the query and the docid must not be empty")
            number = numbers.setdefault(query, len(numbers))
            if (number, chunk_id) in rated_on:
                raise ConfigError(
                    f"{name}: line {line}: {chunk_id!r:.60} is rated for this query on line "
                    f"{rated_on[number, chunk_id]} already"
                )
            rated_on[number, chunk_id] = line
            grades.setdefault(number, {})[chunk_id] = _grade(rating, scale, f"{name}: line {line}")
    except csv.Error as exc:  # an unclosed quote, a NUL
        raise ConfigError(f"{name}: line {rows.line_num}: not valid CSV ({exc})") from None
    if not numbers:
        raise ConfigError(f"{name} holds no question")
    return list(numbers), grades


def _grade(rating: str, scale: int, where: str) -> int:
    try:
        value = float(rating)
    except ValueError:
        value = math.nan
    if not 0 <= value <= scale:  # NaN too
        hint = "; give the file's top rating with --rating-scale" if value > scale else ""
        raise ConfigError(f"{where}: rating {rating!r:.40} is not a number of 0 to {scale}{hint}")
    return to_grade(value, scale)
