"""The learned reranker: a LambdaMART model (LightGBM ``lambdarank``) over the features of each
fused candidate (``loader.models.rerank.features``), trained by ``loader learn``.

A model's folder (``loader learn --out``) holds the booster (``LEARNED_MODEL_FILE``, LightGBM's
text format) and ``provenance.json``: what it was trained on, and what this module needs to use
it -- the feature version, names and fingerprint, and ``prior_scale``. A candidate's score is::

    prior_scale * 1 / log2(1 + fused rank)  +  residual_weight * the booster's output

The booster learned the residual over that prior (its ``init_score``), and ``residual_weight``
shrinks it the more, the fewer questions it learnt from, so with few judgments the model stays
close to the fusion's order. A model trained on another feature version is refused when it
loads (``ModelError``), never applied to columns that mean something else. A model records its
feature set (``features.ONE_READER`` or ``TWO_READERS``) and computes those columns alone: a
one-reader model reranks an index with two readers as it did with one (its lookup leaves the
second reader out); a two-reader model on settings without its second reader is refused before
it loads (``check.choose_reranker``, naming ``second_embedding_model``), and in a mode that does
not search the second reader (bm25, vector) its second reader's columns are missing (NaN), as the
first reader's are in bm25 mode.

Before LightGBM sees a byte, the folder is checked (``learned_files``: regular files within
their caps, the provenance's types and values, the booster's recorded size and SHA-256, its text
line by line) and the booster is loaded once in a child process; a damaged file is a
``ModelError`` naming the file and what is wrong, never a dead process. ``load_learned`` reads
a folder again when its files change, and keeps the model it holds until new files pass.

Example::

    reranker = load_learned("models/learned")    # once per process and folder (and change)
    lines = reranker.lookup(query, hits)         # sent by the search as one _msearch
    scores = reranker.score(query, hits, answers)
    reranker.contributions(query, hits, answers) # per feature, for `loader explain`
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from loader.errors import ModelError
from loader.models.rerank import Candidate, LookupAnswers, RerankQuery
from loader.models.rerank.check import LEARNED, LEARNED_MODEL_FILE
from loader.models.rerank.features import (
    FEATURE_VERSION,
    feature_lookup,
    feature_matrix,
    prior,
)
from loader.models.rerank.learned_files import (
    PROVENANCE_FILE,
    CheckedModel,
    probe_booster,
    read_checked,
)

log = logging.getLogger(__name__)

__all__ = ["PRIOR", "PROVENANCE_FILE", "LearnedReranker", "load_learned"]

PRIOR = "prior"  # the name of the prior's share in ``contributions``


def _booster(checked: CheckedModel) -> Any:
    """The booster of the checked text (the bytes whose hash was checked, never the file read
    again), once a child process loaded it unharmed."""
    probe_booster(checked)
    import lightgbm

    try:
        return lightgbm.Booster(model_str=checked.text)
    except Exception as exc:  # LightGBM's error, or its Python side's on a line it misreads
        raise ModelError(
            f"learned reranker {checked.model_file}: LightGBM cannot read it ({exc})"
        ) from exc


class LearnedReranker:
    """A trained LambdaMART model behind the ``loader.models.rerank.Reranker`` protocol.

    Args:
        folder: what ``loader learn --out`` wrote.

    Raises:
        ModelError: the folder holds no model, one of another feature version, or files that
            fail a check of ``learned_files`` (naming the file and what is wrong).
    """

    kind = LEARNED

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder).expanduser()
        self.name = str(folder)
        checked = read_checked(self.folder)
        self.prior_scale, self.residual_weight = checked.prior_scale, checked.residual_weight
        self.sha256 = checked.sha256
        # Where it learnt (``loader.models.rerank.tenants``): the search reranks this many of
        # its candidates (``candidate_depth``; ``None`` before it was recorded: all of them).
        self.candidate_depth = checked.candidate_depth
        self.base_mode, self.tenant = checked.base_mode, checked.tenant
        # The columns it learnt on: one reader's, or both readers' (``second_reader``'s too).
        self.feature_set, self.second_reader = checked.features, checked.second_reader
        self.learnt_from = checked.learnt_from  # the questions it learnt from, as digests
        self.created = checked.created  # when `loader learn` wrote it ("" when not recorded)
        self.booster = _booster(checked)
        if tuple(self.booster.feature_name()) != self.feature_set.names:
            raise ModelError(
                f"learned reranker {self.folder}: its booster's features are not version "
                f"{FEATURE_VERSION}'s with {self.feature_set.readers} reader(s), as its "
                f"{PROVENANCE_FILE} says; train it again with `loader learn`"
            )
        log.info("learned reranker %s loaded (%d trees)", self.folder, self.booster.num_trees())

    def lookup(self, query: RerankQuery, hits: Sequence[Candidate]) -> list[dict[str, Any]]:
        """The ``_msearch`` of each candidate's sub-query scores (``features.feature_lookup``)."""
        return feature_lookup(query, hits, self.feature_set)

    def features(
        self, query: RerankQuery, hits: Sequence[Candidate], answers: LookupAnswers
    ) -> np.ndarray:
        return feature_matrix(query, hits, answers, self.feature_set)

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
        names = (*self.feature_set.names, "bias")
        return [
            {PRIOR: float(p), **{n: float(v) for n, v in zip(names, row, strict=True)}}
            for p, row in zip(priors, shares, strict=True)
        ]


@dataclass
class _Loaded:
    """A folder's model as this process holds it: the one serving (and the files' state it was
    read from), the files' state last refused and why, and the lock a (re-)read holds."""

    model: LearnedReranker | None = None
    state: tuple | None = None
    refused_state: tuple | None = None
    refused: ModelError | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


_LOADED: dict[str, _Loaded] = {}
_LOADED_LOCK = threading.Lock()
_MAX_FOLDERS = 64  # one model per tenant: a server holds several; a bound all the same


def _files_state(folder: Path) -> tuple:
    """What changes when either file is written or replaced (``loader learn`` renames new ones
    into place): each one's inode, size and modification time."""
    state = []
    for name in (LEARNED_MODEL_FILE, PROVENANCE_FILE):
        try:
            info = (folder / name).stat()
            state.append((info.st_ino, info.st_size, info.st_mtime_ns))
        except OSError:
            state.append(None)
    return tuple(state)


def _slot(folder: str) -> _Loaded:
    with _LOADED_LOCK:
        if folder not in _LOADED and len(_LOADED) >= _MAX_FOLDERS:
            del _LOADED[next(iter(_LOADED))]
        return _LOADED.setdefault(folder, _Loaded())


def load_learned(folder: str) -> LearnedReranker:
    """The process-wide learned reranker of ``folder``, read once, and again when its files
    change (retrained in place): the new files are checked as the first were, and until they
    pass, the model read before keeps serving (a warning says why the new ones were refused).
    Files refused are not read again until they change. While one thread checks new files,
    the others are answered by the model read before.

    Raises:
        ModelError: as ``LearnedReranker``, when no model of ``folder`` was read before.
    """
    path = Path(folder).expanduser()
    slot, state = _slot(str(folder)), _files_state(path)
    known = _known(slot, state)
    if known is not None:
        return known
    if not slot.lock.acquire(blocking=slot.model is None):
        return slot.model  # another thread is reading the new files: the old model serves
    try:
        return _known(slot, state) or _read(slot, path, state)  # another may have read them
    finally:
        slot.lock.release()


def _known(slot: _Loaded, state: tuple) -> LearnedReranker | None:
    """The model for files in ``state`` when they were read before (the model they gave, or
    the one serving since they were refused); ``None``: read them.

    Raises:
        ModelError: they were refused, and no model was read before.
    """
    if slot.model is not None and state in (slot.state, slot.refused_state):
        return slot.model
    if state == slot.refused_state:
        assert slot.refused is not None
        raise slot.refused
    return None


def _read(slot: _Loaded, folder: Path, state: tuple) -> LearnedReranker:
    try:
        model = LearnedReranker(folder)
    except ModelError as exc:
        slot.refused_state, slot.refused = state, exc
        if slot.model is None:
            raise
        log.warning(
            "learned reranker %s changed, and its new files are refused; the model read "
            "before (SHA-256 %s...) keeps serving: %s",
            folder,
            slot.model.sha256[:16],
            exc,
        )
        return slot.model
    if slot.model is not None:
        log.warning("learned reranker %s changed: the new model serves", folder)
    slot.model, slot.state, slot.refused_state, slot.refused = model, state, None, None
    return model
