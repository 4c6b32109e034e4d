"""What the judging page shows, without a request or a cluster: its templates (Jinja2,
autoescaped, direction controls shown rather than obeyed), the pool of several modes' results,
and what moved between two modes' rankings. Pure, but for reading the packaged templates.

Example::

    rows = pool({"bm25": bm25_hits, "vector": vector_hits})
    environment().get_template("question.html").render(pool=rows, ...)
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import re
from typing import Any

MAX_SHOWN_CHARS = 20_000  # of one chunk's text on the page
GRADE_LABELS = ((0, "not relevant"), (1, "partly"), (2, "answers it"))
CANT_TELL = "?"  # a grade POST's value for "can't tell" (with the reason as its note)


def environment() -> Any:
    """The page's templates, from the package's ``judge_files/``."""
    import jinja2

    root = importlib.resources.files("loader.serve") / "judge_files"
    templates = {
        name: (root / name).read_text(encoding="utf-8")
        for name in (
            "base.html",
            "login.html",
            "sets.html",
            "question.html",
            "compare.html",
            "done.html",
            "agreement.html",
            "questions.html",
            "try.html",
        )
    }
    return jinja2.Environment(
        loader=jinja2.DictLoader(templates),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=visible_bidi,  # every value the templates print
    )


# The characters that set the direction of the text after them: the embeddings and overrides
# (U+202A-U+202E), the isolates (U+2066-U+2069) and the marks (U+200E, U+200F, U+061C).
_BIDI_CONTROLS = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def visible_bidi(value: Any) -> Any:
    """A text with each direction control shown as ``[U+202E]`` instead of obeyed: an override
    in a question or a chunk would otherwise reverse what follows it on the page ("evil" shown
    as "live"). The page's CSS isolates each such text too. Pure."""
    if isinstance(value, str) and not hasattr(value, "__html__"):  # not the templates' markup
        return _BIDI_CONTROLS.sub(lambda match: f"[U+{ord(match.group()):04X}]", value)
    return value


@dataclasses.dataclass
class PoolRow:
    hit: Any
    ranks: dict[str, int]
    text: str
    grade: int | str | None = None  # 0, 1, 2; "?" can't tell; None ungraded
    note: str = ""


def pool(rankings: dict[str, list[Any]]) -> list[PoolRow]:
    """The union of several modes' hits, best rank first (then found by more modes). Pure."""
    rows: dict[str, PoolRow] = {}
    for mode, hits in rankings.items():
        for rank, hit in enumerate(hits, start=1):
            row = rows.setdefault(hit.chunk_id, PoolRow(hit, {}, shown(hit.text or hit.body)))
            row.ranks[mode] = rank
    return sorted(rows.values(), key=lambda r: (min(r.ranks.values()), -len(r.ranks)))


def with_found(rows: list[PoolRow], found: list[Any]) -> list[PoolRow]:
    """``rows`` and then the in-page search's ``found`` hits not among them, each marked with
    its rank there (``found``). Pure."""
    known = {row.hit.chunk_id: row for row in rows}
    extra = []
    for rank, hit in enumerate(found, start=1):
        row = known.get(hit.chunk_id)
        if row is None:
            row = known[hit.chunk_id] = PoolRow(hit, {}, shown(hit.text or hit.body))
            extra.append(row)
        row.ranks["found"] = rank
    return [*rows, *extra]


def rater_grades(state: Any, rater: str, number: int) -> dict[str, tuple[int | str, str]]:
    """``rater``'s grade and note of each result of question ``number`` (chunk id -> (grade,
    note)), from a ``judgments.JudgingState``: a "can't tell" (``CANT_TELL``, its reason as the
    note) takes the place of the rater's grade of its result; an ungraded result is absent.
    What the question page is rendered with and what ``GET .../<n>/grades`` answers. Pure."""
    graded = {
        chunk_id: (grade.grade, grade.note)
        for chunk_id, grade in state.mine(rater).get(number, {}).items()
    }
    for chunk_id, by_rater in state.cant_tell.get(number, {}).items():
        if rater in by_rater:
            graded[chunk_id] = (CANT_TELL, by_rater[rater])
    return graded


def movements(a: list[Any], b: list[Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Each list's rows with where its hit stands against the other list: ``▲2`` two places
    higher here than there, ``▼1`` one lower, ``=`` the same rank, ``new`` not there at all.
    Pure."""
    sides = []
    for mine, other in ((a, b), (b, a)):
        ranks = {hit.chunk_id: rank for rank, hit in enumerate(other, start=1)}
        rows = []
        for rank, hit in enumerate(mine, start=1):
            before = ranks.get(hit.chunk_id)
            if before is None:
                move, css = "new", "new"
            elif before == rank:
                move, css = "=", "same"
            elif before > rank:
                move, css = f"▲{before - rank}", "up"
            else:
                move, css = f"▼{rank - before}", "down"
            rows.append({"hit": hit, "move": move, "move_class": css})
        sides.append(rows)
    return sides[0], sides[1]


def shown(text: str) -> str:
    return text if len(text) <= MAX_SHOWN_CHARS else text[:MAX_SHOWN_CHARS] + " …"
