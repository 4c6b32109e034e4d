"""A query set's searches now against a snapshot of them (``loader.query.snapshots``), both
scored with **today's** grades (pure).

The snapshot stores rankings, not scores: each question's nDCG@10 then and now is computed from
the snapshot's stored top 10 documents and today's, against the same grades (the ones stored
today), with the live scores' own metric code (``loader.eval.live.ranking_score``, so each
figure is what ``loader eval`` reports on the export). A difference therefore measures the
change of the searches (a new model, a setting, documents pushed), never grades given since:
a grade given after the snapshot moves then and now alike, and where the search did not change,
the delta stays 0. This is how Quepid scores its snapshots.

Per column (each search mode, and ``learned`` when both sides have it): each question's score
then and now and their delta, the set's mean then and now over the questions both sides score,
and how many questions got better, worse or stayed the same.

Example::

    then = aligned(snapshot.digests, snapshot.rankings, query_set.questions)
    compare(then, now_rankings, graded, ["bm25", "vector"])["counts"]["bm25"]
    # {"better": 1, "worse": 0, "unchanged": 4}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from loader.eval.live import ranking_score
from loader.query.snapshots import question_digest

# Two scores this close are the same: the same ranking and grades give the very same float;
# only rounding could tell two equal DCGs summed in another order apart.
UNCHANGED = 1e-9

Rankings = Mapping[str, Sequence[str]]  # column -> its top documents, best first


def aligned(
    digests: Sequence[str], rankings: Sequence[Rankings], questions: Sequence[str]
) -> list[Rankings | None]:
    """The snapshot's rankings of each of today's ``questions``, found by the question's digest
    wherever the snapshot held it (a set replaced under its name may ask it at another place);
    ``None`` for a question the snapshot did not hold. Pure."""
    places: dict[str, int] = {}
    for number, digest in enumerate(digests[: len(rankings)]):
        places.setdefault(digest, number)
    then: list[Rankings | None] = []
    for question in questions:
        number = places.get(question_digest(question))
        then.append(None if number is None else rankings[number])
    return then


def delta_of(then: float | None, now: float | None) -> float | None:
    return None if then is None or now is None else now - then


def direction(delta: float | None) -> str | None:
    """``better``, ``worse`` or ``unchanged`` (``None`` without a delta). Pure."""
    if delta is None:
        return None
    if abs(delta) <= UNCHANGED:
        return "unchanged"
    return "better" if delta > 0 else "worse"


def compare(
    then: Sequence[Rankings | None],
    now: Sequence[Rankings],
    judgments: Sequence[Iterable[Mapping[str, Any]]],
    columns: Sequence[str],
) -> dict[str, Any]:
    """Each question's nDCG@10 then and now per column, both from today's ``judgments`` (per
    question: its graded results, ``source`` and ``grade``), the means over the questions both
    sides score, and the better / worse / unchanged counts. Pure.

    Args:
        then: per question of today's set, the snapshot's rankings (``aligned``), or ``None``.
        now: per question, today's rankings.
        judgments: per question, today's grades.
        columns: the columns to compare (those both sides hold).
    """
    questions = []
    pairs: dict[str, list[tuple[float, float]]] = {column: [] for column in columns}
    counts = {column: {"better": 0, "worse": 0, "unchanged": 0} for column in columns}
    for number, (old, new, graded) in enumerate(zip(then, now, judgments, strict=True)):
        graded = list(graded)
        scores = {}
        for column in columns:
            before = ranking_score(old[column], graded) if old and column in old else None
            after = ranking_score(new[column], graded) if column in new else None
            delta = delta_of(before, after)
            way = direction(delta)
            scores[column] = {"then": before, "now": after, "delta": delta, "direction": way}
            if way is not None:
                pairs[column].append((before, after))  # type: ignore[arg-type]
                counts[column][way] += 1
        questions.append({"number": number, "compared": old is not None, "scores": scores})
    means = {}
    for column, scored in pairs.items():
        mean_then = sum(b for b, _ in scored) / len(scored) if scored else None
        mean_now = sum(a for _, a in scored) / len(scored) if scored else None
        means[column] = {
            "then": mean_then,
            "now": mean_now,
            "delta": delta_of(mean_then, mean_now),
            "direction": direction(delta_of(mean_then, mean_now)),
            "questions": len(scored),
        }
    return {"columns": list(columns), "questions": questions, "means": means, "counts": counts}


def comparison_lines(result: Mapping[str, Any]) -> list[str]:
    """A comparison (``set_searches.compare_with_snapshot``) as ``loader judgments compare``
    prints it: the snapshot, then a line per column. Pure."""
    taken = result["snapshot"]
    lines = [f"against snapshot {taken['snapshot']} {taken['label']!r} of {taken['timestamp']}"]
    for column in result["columns"]:
        mean, counts = result["means"][column], result["counts"][column]
        served = "  (served)" if column == result["served_column"] else ""
        if mean["delta"] is None:
            lines.append(f"{column:>14}  no graded question{served}")
            continue
        lines.append(
            f"{column:>14}  {mean['then']:.4f} -> {mean['now']:.4f} ({mean['delta']:+.4f}) "
            f"over {mean['questions']}: {counts['better']} better, {counts['worse']} worse, "
            f"{counts['unchanged']} unchanged{served}"
        )
    for side, columns in (
        ("only in the snapshot", result["only_then"]),
        ("not in the snapshot", result["only_now"]),
    ):
        if columns:
            lines.append(f"{side}: {', '.join(columns)}")
    return lines
