"""How far the raters of a query set agree (pure): Cohen's kappa on the results two raters both
graded, each rater's progress, and the results they graded differently, to settle.

Cohen's kappa: ``(p_o - p_e) / (1 - p_e)``, ``p_o`` the share of results both raters graded
alike, ``p_e`` the share expected by chance from each rater's own share of each grade
(``sum_g p_a(g) * p_b(g)``); 1 is full agreement, 0 no more than chance. Undefined (``None``)
when no result was graded by both, or when both gave one and the same grade to everything
(``p_e = 1``).

Example::

    cohen_kappa([(2, 2), (1, 0), (0, 0)])   # 0.5
    agreement(judging_state(...).ratings)
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from loader.query.grades import resolved_grade


def cohen_kappa(pairs: Sequence[tuple[int, int]]) -> float | None:
    """Cohen's kappa of two raters' grades of the same results, one ``(a, b)`` pair per result
    (see the module's docstring); ``None`` when undefined. Pure."""
    if not pairs:
        return None
    count = len(pairs)
    observed = sum(a == b for a, b in pairs) / count
    first = Counter(a for a, _ in pairs)
    second = Counter(b for _, b in pairs)
    expected = sum(first[g] * second[g] for g in first) / count**2
    if expected == 1:
        return None
    return (observed - expected) / (1 - expected)


@dataclass
class PairAgreement:
    """Two raters: how many results both graded, and Cohen's kappa on them."""

    raters: tuple[str, str]
    both: int
    kappa: float | None


@dataclass
class Disagreement:
    """One result graded differently: its question, chunk and every rater's grade."""

    question_index: int
    chunk_id: str
    grades: dict[str, int]
    resolved: int


@dataclass
class Agreement:
    """The raters of a set: each one's number of graded results and questions, each pair's
    kappa, and the results to settle."""

    progress: dict[str, tuple[int, int]] = field(default_factory=dict)  # rater -> (results, qs)
    pairs: list[PairAgreement] = field(default_factory=list)
    disagreements: list[Disagreement] = field(default_factory=list)


def agreement(ratings: Mapping[int, Mapping[str, Mapping[str, Any]]]) -> Agreement:
    """The agreement of the raters in ``ratings`` (question -> chunk -> rater -> ``Grade``, as
    ``JudgingState.ratings``). Grades given without a rater (``""``) count as no rater's. Pure.
    """
    result = Agreement()
    given: dict[str, dict[tuple[int, str], int]] = {}
    for number, chunks in sorted(ratings.items()):
        for chunk_id, by_rater in sorted(chunks.items()):
            named = {r: g.grade for r, g in by_rater.items() if r}
            for rater, grade in named.items():
                given.setdefault(rater, {})[(number, chunk_id)] = grade
            if len(set(named.values())) > 1:
                resolved = resolved_grade(list(named.values()))
                result.disagreements.append(
                    Disagreement(number, chunk_id, dict(sorted(named.items())), resolved)
                )
    for rater in sorted(given):
        results = given[rater]
        result.progress[rater] = (len(results), len({number for number, _ in results}))
    for first, second in itertools.combinations(sorted(given), 2):
        shared = sorted(set(given[first]) & set(given[second]))
        pairs = [(given[first][key], given[second][key]) for key in shared]
        result.pairs.append(PairAgreement((first, second), len(pairs), cohen_kappa(pairs)))
    return result
