"""`loader learn`'s choice of base and its guard, by cross-validation (issue #53): every judged
question judges, in every base.

- ``aligned``: each searched mode's examples restricted to the questions every mode found
  candidates for, in one order, so the folds (``booster.fold_parts``, by position) hold the same
  questions in every mode and the comparisons are paired.
- ``base_scores``: per candidate base, each question's out-of-fold nDCG@10 of the fused order
  and of a model that never saw it (``booster.out_of_fold_ndcgs``): ``folds`` trainings a base.
- ``served_now``: what the guard judges against -- the search served now: the tenant's model
  already in ``out`` (retrained in place, over the candidates of the base it learnt from), else
  fusion in the ``search_mode`` setting's mode.

Example::

    examples = aligned(found)                            # mode -> examples, same questions
    scores = base_scores(examples, ("hybrid-rrf", ...), request, 5, notify)
    served = served_model(out, None, "hybrid-rrf")       # LearnedReranker | None, and its name
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from loader.errors import ModelError
from loader.models.rerank.check import LEARNED_MODEL_FILE
from loader.train.booster import (
    BoosterOptions,
    fused_ndcgs,
    held_out_ndcgs,
    out_of_fold_ndcgs,
)
from loader.train.examples import Example

log = logging.getLogger(__name__)


def aligned(found: dict[str, list[Example]]) -> dict[str, list[Example]]:
    """Each mode's examples of the questions every mode found candidates for, in the order of
    the first mode's. Pure."""
    keyed = {
        mode: {(example.source, example.question_id): example for example in examples}
        for mode, examples in found.items()
    }
    shared = set.intersection(*(set(by_key) for by_key in keyed.values()))
    first = next(iter(found.values()))
    order = [key for key in ((e.source, e.question_id) for e in first) if key in shared]
    return {mode: [by_key[key] for key in order] for mode, by_key in keyed.items()}


def question_keys(examples: Sequence[Example]) -> list[tuple[str, str]]:
    return [(example.source, example.question_id) for example in examples]


def base_scores(
    examples: dict[str, list[Example]],
    modes: Sequence[str],
    options: BoosterOptions,
    folds: int,
    notify: Callable[[str], None],
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per mode of ``modes``, each question's out-of-fold nDCG@10 of the fused order and of the
    model over that mode's candidates (``examples``: ``aligned``).

    Raises:
        ConfigError: a fold leaves too few relevant questions to train on.
    """
    scores = {}
    for mode in modes:
        questions = len(examples[mode])
        notify(f"cross-validating over {folds} folds of {questions} questions ({mode})")
        scores[mode] = out_of_fold_ndcgs(examples[mode], options, folds)
    return scores


def served_model(out: Path, second_reader: str | None, search_mode: str) -> tuple[Any, str]:
    """The model the tenant is served now: the one already in ``out`` (its model folder), and
    how the verdict names it; ``None`` and ``fusion`` when there is none. A model it cannot
    read is not what is served, nor one of two readers' features when its search gives one
    reader's (``second_reader``: the settings' second reader, ``None`` for none; ``search_mode``:
    theirs; it is refused there: ``check.choose_reranker``): the guard then judges against
    fusion, and says so."""
    from loader.models.rerank.learned import LearnedReranker
    from loader.train.examples import searched_features

    if not (out / LEARNED_MODEL_FILE).is_file():
        return None, "fusion"
    try:
        served = LearnedReranker(out)
    except ModelError as exc:
        log.warning("the model in %s is not judged against: %s", out, exc)
        return None, f"fusion (the model in {out} is unreadable)"
    searched = searched_features(served.base_mode or search_mode, second_reader)
    if served.feature_set.readers > searched.readers:
        return None, f"fusion (the model in {out} needs a second reader these settings lack)"
    return served, f"the model in {out}"


def learnt_from(examples: Sequence[Example]) -> list[str]:
    """The digests a model's provenance records of the questions it learnt from (by text)."""
    from loader.models.rerank.learned_files import question_digest

    return sorted({question_digest(example.question) for example in examples})


def unseen_questions(served: Any, examples: Sequence[Example]) -> np.ndarray | None:
    """Which of ``examples``' questions the served model did not learn from; ``None`` without
    a served model or a record of what it learnt from (a model trained before it was kept)."""
    recorded = getattr(served, "learnt_from", None)
    if recorded is None:
        return None
    from loader.models.rerank.learned_files import question_digest

    return np.array([question_digest(e.question) not in recorded for e in examples], dtype=bool)


def served_ndcgs(served: Any, examples: Sequence[Example]) -> np.ndarray:
    """Each question's nDCG@10 under what is served: the model ``served`` over ``examples``
    (the candidates of the base it learnt from), or the fused order (``None``).

    The served model may have learnt from some of these questions, which favours it there:
    the guard compares it only on the others when it records them (``unseen_questions``,
    ``booster.guard_figures``)."""
    if served is None:
        return fused_ndcgs(examples)
    _, current = held_out_ndcgs(
        served.booster, examples, served.prior_scale, served.residual_weight
    )
    return current
