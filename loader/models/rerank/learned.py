"""The learned reranker: a LambdaMART model (LightGBM ``lambdarank``) over the features of each
fused candidate (``loader.models.rerank.features``), trained by ``loader learn``.

A model's folder (``loader learn --out``) holds the booster (``LEARNED_MODEL_FILE``, LightGBM's
text format) and ``provenance.json``: what it was trained on, and what this module needs to use
it -- the feature version, names and fingerprint, and ``prior_scale``. A candidate's score is::

    prior_scale * 1 / log2(1 + fused rank)  +  residual_weight * the booster's output

The booster learned the residual over that prior (its ``init_score``), and ``residual_weight``
shrinks it the more, the fewer questions it learnt from, so with few judgments the model stays
close to the fusion's order. A model trained on another feature version is refused when it
loads (``ModelError``), never applied to columns that mean something else.

Example::

    reranker = load_learned("models/learned")    # once per process and folder
    lines = reranker.lookup(query, hits)         # sent by the search as one _msearch
    scores = reranker.score(query, hits, answers)
    reranker.contributions(query, hits, answers) # per feature, for `loader explain`
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from loader.errors import ModelError
from loader.models.rerank import Candidate, LookupAnswers, RerankQuery
from loader.models.rerank.check import LEARNED, LEARNED_MODEL_FILE
from loader.models.rerank.features import (
    FEATURE_NAMES,
    FEATURE_VERSION,
    feature_fingerprint,
    feature_lookup,
    feature_matrix,
    prior,
)

log = logging.getLogger(__name__)

PROVENANCE_FILE = "provenance.json"
PRIOR = "prior"  # the name of the prior's share in ``contributions``


def _booster(path: Path) -> Any:
    import lightgbm

    try:
        return lightgbm.Booster(model_file=str(path))
    except lightgbm.basic.LightGBMError as exc:
        raise ModelError(f"learned reranker {path}: LightGBM cannot read it ({exc})") from exc


def _model_facts(folder: Path) -> dict[str, Any]:
    """The ``model`` part of ``provenance.json``, checked against this version's features.

    Raises:
        ModelError: no readable provenance, or another feature version or list.
    """
    path = folder / PROVENANCE_FILE
    try:
        facts = json.loads(path.read_text(encoding="utf-8"))["model"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ModelError(
            f"learned reranker {folder}: {path} is missing or unreadable ({exc}); "
            "train the model again with `loader learn`"
        ) from exc
    if facts.get("feature_fingerprint") != feature_fingerprint():
        raise ModelError(
            f"learned reranker {folder} was trained on features version "
            f"{facts.get('feature_version')!r} ({facts.get('feature_fingerprint')}), and this "
            f"loader computes version {FEATURE_VERSION} ({feature_fingerprint()}); train it "
            "again with `loader learn`"
        )
    return facts


class LearnedReranker:
    """A trained LambdaMART model behind the ``loader.models.rerank.Reranker`` protocol.

    Args:
        folder: what ``loader learn --out`` wrote.

    Raises:
        ModelError: the folder holds no model, or one of another feature version.
    """

    kind = LEARNED

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder).expanduser()
        self.name = str(folder)
        model_file = self.folder / LEARNED_MODEL_FILE
        if not model_file.is_file():
            raise ModelError(f"learned reranker {self.folder}: there is no {model_file}")
        facts = _model_facts(self.folder)
        self.prior_scale = float(facts.get("prior_scale", 0.0))
        self.residual_weight = float(facts.get("residual_weight", 1.0))
        # Where it learnt (``loader.models.rerank.tenants``): the search reranks this many of
        # its candidates (``candidate_depth``; ``None`` before it was recorded: all of them).
        depth = facts.get("candidate_depth")
        self.candidate_depth = depth if isinstance(depth, int) and depth > 0 else None
        self.base_mode = str(facts.get("base_mode") or "")
        self.tenant = str(facts.get("tenant") or "")
        self.booster = _booster(model_file)
        if tuple(self.booster.feature_name()) != FEATURE_NAMES:
            raise ModelError(
                f"learned reranker {self.folder}: its booster's features are not version "
                f"{FEATURE_VERSION}'s; train it again with `loader learn`"
            )
        log.info("learned reranker %s loaded (%d trees)", self.folder, self.booster.num_trees())

    def lookup(self, query: RerankQuery, hits: Sequence[Candidate]) -> list[dict[str, Any]]:
        """The ``_msearch`` of each candidate's sub-query scores (``features.feature_lookup``)."""
        return feature_lookup(query, hits)

    def features(
        self, query: RerankQuery, hits: Sequence[Candidate], answers: LookupAnswers
    ) -> np.ndarray:
        return feature_matrix(query, hits, answers)

    def score(
        self, query: RerankQuery, hits: Sequence[Candidate], answers: LookupAnswers = None
    ) -> list[float]:
        """Each candidate's score: the scaled prior plus the booster's weighed residual."""
        if not hits:
            return []
        matrix = self.features(query, hits, answers)
        residual = self.booster.predict(matrix, num_threads=1)
        scores = self.prior_scale * prior(hits) + self.residual_weight * residual
        return [float(value) for value in scores]

    def contributions(
        self, query: RerankQuery, hits: Sequence[Candidate], answers: LookupAnswers = None
    ) -> list[dict[str, float]]:
        """Per candidate, each feature's share of its score (LightGBM's ``pred_contrib``: SHAP
        values, times ``residual_weight``), the prior's (``prior``) and the booster's constant
        (``bias``); they add up to the score."""
        if not hits:
            return []
        matrix = self.features(query, hits, answers)
        shares = self.booster.predict(matrix, pred_contrib=True, num_threads=1)
        shares = self.residual_weight * shares
        priors = self.prior_scale * prior(hits)
        names = (*FEATURE_NAMES, "bias")
        return [
            {PRIOR: float(p), **{n: float(v) for n, v in zip(names, row, strict=True)}}
            for p, row in zip(priors, shares, strict=True)
        ]


@functools.lru_cache(maxsize=64)  # one model per tenant: a server holds several
def _cached(folder: str, modified_ns: int) -> LearnedReranker:
    return LearnedReranker(folder)


def load_learned(folder: str) -> LearnedReranker:
    """The process-wide learned reranker of ``folder``, its booster read once (again when the
    model file changes: retrained in place).

    Raises:
        ModelError: as ``LearnedReranker``.
    """
    model_file = Path(folder).expanduser() / LEARNED_MODEL_FILE
    try:
        modified = model_file.stat().st_mtime_ns
    except OSError:
        modified = 0
    return _cached(str(folder), modified)
