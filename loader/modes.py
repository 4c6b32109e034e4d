"""The search modes, one record each, and how a stored fusion pipeline is read back.

Every place that lists the modes or branches on one reads ``MODES``: the ``search_mode`` setting's
choices and help, the stored template and pipeline a search goes through
(``loader.index.render.ConfigNames.for_search_mode``), whether a search embeds the question,
what ``loader explain`` computes each side's share with, what ``loader doctor`` expects of a fused
score, which settings ``loader eval --tune`` tries in which mode. A new mode is one record here
and one pipeline file (``pipelines/search/<pipeline>.json.j2``).

A pipeline is read back by its *technique* (``read_fusion``), never by its processor's type alone:
a ``normalization-processor`` may normalise by ``min_max``, ``l2`` or ``z_score``. The techniques
are spelled as OpenSearch spells them (``rrf``, ``min_max``, ``l2``, ``z_score``) wherever they are
named; mode names (``hybrid-minmax``) and pipeline names (``<alias>-minmax``) are names, not
techniques.

Imports nothing but ``loader.errors``: the settings registry reads the modes' names from here.

Example::

    mode = search_mode("hybrid-minmax")
    mode.pipeline, mode.technique, mode.embeds   # ('minmax', 'min_max', True)
    read_fusion(stored_pipeline).technique       # 'min_max'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from loader.errors import ConfigError

# OpenSearch's fusion techniques (neural-search plugin): reciprocal rank fusion in the
# score-ranker-processor; score normalisations, then a combination, in the normalization-processor.
RANK_FUSION = "rrf"
NORMALIZATIONS = ("min_max", "l2", "z_score")
COMBINATIONS = ("arithmetic_mean", "geometric_mean", "harmonic_mean")
# What the normalization-processor uses when its body names no technique.
DEFAULT_NORMALIZATION = "min_max"
DEFAULT_COMBINATION = "arithmetic_mean"
DEFAULT_RANK_CONSTANT = 60
# Normalisations whose scores never exceed 1 (so neither does a mean of them). z_score has no such
# bound: a z-score grows with the list's length, and a sub-query with one hit keeps its raw score.
BOUNDED_NORMALIZATIONS = {"min_max": 1.0, "l2": 1.0}

_PROCESSORS = {"score-ranker-processor", "normalization-processor"}


@dataclass(frozen=True)
class SearchMode:
    """One search mode: what it runs and how its results are fused.

    Attributes:
        name: the ``search_mode`` setting's value and ``--mode``'s choice.
        summary: what it does, in a few words (the setting's help).
        template: stem of the stored search template it runs
            (``search_templates/<template>.json.j2``, stored as ``<alias>-<template>``).
        pipeline: stem of the search pipeline that fuses it (``pipelines/search/<pipeline>
            .json.j2``, stored as ``<alias>-<pipeline>``); ``None`` for a single list.
        technique: the pipeline's technique as OpenSearch names it: ``rrf`` or a normalisation
            (``min_max``, ``l2``, ``z_score``); ``None`` without a pipeline.
        combination: ``rrf``, or how normalised scores are combined (``arithmetic_mean`` ...).
        embeds: the question is embedded (the template has a k-NN side).
        uses_bm25: the template has a BM25 side.
        tunes: the settings that change this mode's results and no other mode's (its pipeline's
            parameters): ``loader eval --tune`` tries them only in the modes that list them.
        since: the first OpenSearch version whose neural-search runs the pipeline: ``loader
            apply`` leaves it out on an older cluster (a 2.x node refuses ``z_score``).
    """

    name: str
    summary: str
    template: str
    pipeline: str | None = None
    technique: str | None = None
    combination: str | None = None
    embeds: bool = True
    uses_bm25: bool = True
    tunes: tuple[str, ...] = ()
    since: tuple[int, int] = (2, 0)

    def __post_init__(self) -> None:
        if (self.pipeline is None) != (self.technique is None):
            raise ValueError(f"mode {self.name}: a pipeline and a technique go together")
        if self.technique == RANK_FUSION and self.combination != RANK_FUSION:
            raise ValueError(f"mode {self.name}: rrf combines by rrf")
        if self.technique in NORMALIZATIONS and self.combination not in COMBINATIONS:
            raise ValueError(f"mode {self.name}: combination must be one of {COMBINATIONS}")
        if self.technique not in (None, RANK_FUSION, *NORMALIZATIONS):
            raise ValueError(f"mode {self.name}: unknown technique {self.technique!r}")

    @property
    def hybrid(self) -> bool:
        """Several sub-queries fused by a search pipeline."""
        return self.pipeline is not None


MODES: tuple[SearchMode, ...] = (
    SearchMode("bm25", "BM25 over the text fields", template="bm25", embeds=False),
    SearchMode("vector", "k-NN over the embeddings", template="vector", uses_bm25=False),
    SearchMode(
        "hybrid-rrf",
        "both, fused by reciprocal rank with rrf_rank_constant and rrf_bm25_weight",
        template="hybrid",
        pipeline="rrf",
        technique="rrf",
        combination="rrf",
        tunes=("rrf_rank_constant", "rrf_bm25_weight"),
    ),
    SearchMode(
        "hybrid-minmax",
        "both, scores min-max normalised and weighted by bm25_weight",
        template="hybrid",
        pipeline="minmax",
        technique="min_max",
        combination="arithmetic_mean",
        tunes=("bm25_weight",),
    ),
    SearchMode(
        "hybrid-zscore",
        "both, scores z-score normalised and weighted by bm25_weight",
        template="hybrid",
        pipeline="zscore",
        technique="z_score",
        combination="arithmetic_mean",
        tunes=("bm25_weight",),
        since=(3, 0),
    ),
)

SEARCH_MODES: tuple[str, ...] = tuple(mode.name for mode in MODES)
HYBRID_MODES: tuple[str, ...] = tuple(mode.name for mode in MODES if mode.hybrid)
_BY_NAME = {mode.name: mode for mode in MODES}


def search_mode(name: str) -> SearchMode:
    """The record of mode ``name``.

    Raises:
        ConfigError: no such mode (the message lists them).
    """
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ConfigError(
            f"search_mode {name!r} is not one of {', '.join(SEARCH_MODES)}; fix the setting"
        ) from None


def modes_tuning(setting: str) -> tuple[str, ...]:
    """The modes whose results ``setting`` changes alone (empty: it is no one mode's).

    Example::

        modes_tuning("bm25_weight")   # ('hybrid-minmax',)
    """
    return tuple(mode.name for mode in MODES if setting in mode.tunes)


def modes_summary() -> str:
    """``bm25 (BM25 over the text fields), vector (...), ...``: the setting's help."""
    return ", ".join(f"{mode.name} ({mode.summary})" for mode in MODES)


@dataclass(frozen=True)
class Fusion:
    """A stored search pipeline's fusion, as read back by ``read_fusion``.

    Attributes:
        technique: ``rrf`` or the normalisation (``min_max``, ``l2``, ``z_score``).
        combination: ``rrf`` or the combination of normalised scores (``arithmetic_mean`` ...).
        rank_constant: RRF's ``k`` in ``weight / (k + rank)``; 0 for a normalisation.
        weights: the weights as stored, one per sub-query; empty: OpenSearch's, 1 each.
    """

    technique: str
    combination: str
    rank_constant: int = 0
    weights: tuple[float, ...] = ()

    @property
    def by_rank(self) -> bool:
        return self.technique == RANK_FUSION

    def side_weights(self, sides: int) -> list[float]:
        """One weight per sub-query: the stored ones, else 1 each (OpenSearch's default)."""
        return list(self.weights) if self.weights else [1.0] * sides

    def score_bound(self, sides: int = 2) -> float | None:
        """The largest fused score the technique can give over ``sides`` sub-queries, or
        ``None`` when it has none (``z_score``): RRF ``sum(weights) / (rank_constant + 1)``
        (first on every side), a bounded normalisation its bound (a mean never exceeds it)."""
        if self.by_rank:
            return sum(self.side_weights(sides)) / (self.rank_constant + 1)
        return BOUNDED_NORMALIZATIONS.get(self.technique)

    def mode(self) -> SearchMode | None:
        """The registered mode that fuses this way, if one does."""
        return next(
            (
                mode
                for mode in MODES
                if mode.technique == self.technique and mode.combination == self.combination
            ),
            None,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "technique": self.technique,
            "combination": self.combination,
            "rank_constant": self.rank_constant,
            "weights": list(self.weights),
        }


def _weights(combination: Mapping[str, Any]) -> tuple[float, ...]:
    weights = (combination.get("parameters") or {}).get("weights")
    return tuple(float(weight) for weight in weights) if weights else ()


def read_fusion(pipeline: Mapping[str, Any]) -> Fusion:
    """The fusion of a search pipeline body (as stored, or as rendered), by its technique.

    A ``score-ranker-processor`` fuses by ``combination.technique`` (``rrf``); a
    ``normalization-processor`` by ``normalization.technique`` then ``combination.technique``,
    each defaulting as OpenSearch defaults them (``min_max``, ``arithmetic_mean``).

    Raises:
        ConfigError: the pipeline has no fusion processor, or names a technique OpenSearch does
            not have.

    Example::

        read_fusion({"phase_results_processors": [{"normalization-processor": {
            "normalization": {"technique": "z_score"}}}]})
        # Fusion(technique='z_score', combination='arithmetic_mean', rank_constant=0, weights=())
    """
    for processor in pipeline.get("phase_results_processors") or []:
        for name, body in processor.items():
            if name not in _PROCESSORS:
                continue
            body = body or {}
            combination = body.get("combination") or {}
            if name == "score-ranker-processor":
                technique = combination.get("technique", RANK_FUSION)
                if technique != RANK_FUSION:
                    raise ConfigError(f"search pipeline: unknown rank fusion {technique!r}")
                rank_constant = int(combination.get("rank_constant", DEFAULT_RANK_CONSTANT))
                return Fusion(RANK_FUSION, RANK_FUSION, rank_constant, _weights(combination))
            technique = (body.get("normalization") or {}).get("technique", DEFAULT_NORMALIZATION)
            combined = combination.get("technique", DEFAULT_COMBINATION)
            if technique not in NORMALIZATIONS or combined not in COMBINATIONS:
                raise ConfigError(
                    f"search pipeline: unknown normalization {technique!r} or combination "
                    f"{combined!r}"
                )
            return Fusion(technique, combined, 0, _weights(combination))
    raise ConfigError("the search pipeline has no score-ranker or normalization processor")


def template_stems(modes: Sequence[SearchMode] = MODES, hybrid: bool | None = None) -> set[str]:
    """The stored templates' stems of ``modes`` (only the hybrid ones, or only the others)."""
    return {mode.template for mode in modes if hybrid is None or mode.hybrid == hybrid}


def pipelines_too_new(version: tuple[int, int] | None) -> set[str]:
    """The pipeline stems of the modes a cluster of ``version`` cannot run (none when the
    version is unknown)."""
    if version is None:
        return set()
    return {mode.pipeline for mode in MODES if mode.pipeline and version < mode.since}
