"""What ``loader explain`` reports, as pure data: the expected section, each stage's rank, each
side's share of a fused score, and the plain-words sentence. No cluster here
(``loader.query.explain`` fills these in from the real lists).

Example::

    Expected.parse("refunds.md#Late deliveries").matches("refunds.md", "Refund policy",
                                                         ("Late deliveries",))   # True
    rrf_contributions({"bm25": 3, "vector": None}, 60)   # bm25 1/63, vector 0
    plain_words(explanation)   # 'found by BM25 at 3, missed by the vector side (rank > 50), ...'
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from loader.documents import PATH_SEPARATOR
from loader.errors import ConfigError
from loader.modes import Fusion, read_fusion
from loader.query.fusion import NORMALIZERS
from loader.query.result import reranker_words

# A learned reranker's shares shown in the text report (all of them in --json): the largest.
LEARNED_SHARES_SHOWN = 6


@dataclass(frozen=True)
class Expected:
    """What ``--expect SOURCE[#heading path]`` names: a document, optionally one section of it.

    A ``#`` may also belong to the file name or to a heading (``C#-guide.md#Using C#``):
    ``readings`` lists every way to split the text and ``choose`` keeps the one whose source is
    indexed; ``parse`` is the plain split at the first ``#``.

    Example::

        Expected.parse("refunds.md#Refund policy > Late deliveries")
        # Expected(source='refunds.md', heading_path=('Refund policy', 'Late deliveries'))
    """

    source: str
    heading_path: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> Expected:
        """Read ``SOURCE[#heading path]``, split at the first ``#``; the heading path's parts are
        split on ``>``.

        Raises:
            ConfigError: no source before ``#``.
        """
        cut = text.find("#")
        expected = cls._split(text, len(text) if cut < 0 else cut)
        if not expected.source:
            raise ConfigError(
                f"--expect {text!r} names no source; give SOURCE or SOURCE#heading path, e.g. "
                "refunds.md#Late deliveries"
            )
        return expected

    @classmethod
    def readings(cls, text: str) -> list[Expected]:
        """Every way to read ``text`` when each ``#`` may be part of the source or of a heading:
        the whole text as the source, then the split at each ``#`` from the last to the first.
        The longest source comes first; the last reading is ``parse``'s.

        Example::

            Expected.readings("C#-guide.md#Using C#")
            # [Expected('C#-guide.md#Using C#'), Expected('C#-guide.md#Using C'),
            #  Expected('C#-guide.md', ('Using C#',)), Expected('C', ('-guide.md#Using C#',))]

        Raises:
            ConfigError: no source before the first ``#`` (as ``parse``).
        """
        first = cls.parse(text)
        cuts = [position for position, char in enumerate(text) if char == "#"]
        later = [cls._split(text, cut) for cut in [len(text), *reversed(cuts[1:])]]
        return [*later, first] if cuts else [first]

    @staticmethod
    def choose(
        readings: Sequence[Expected], owners: Mapping[str, Collection[str]], tenant: str
    ) -> Expected:
        """The reading whose source is indexed: the longest source ``tenant`` has chunks of,
        else the longest any tenant has, else the split at the first ``#`` (the last reading).

        Args:
            readings: as ``readings`` returns them, longest source first.
            owners: source -> the tenants with chunks of it (sources not indexed left out).
            tenant: the tenant searched.

        Example::

            readings = Expected.readings("notes#2.md")
            Expected.choose(readings, {"notes#2.md": {"acme"}}, "acme")   # Expected('notes#2.md')
            Expected.choose(readings, {}, "acme")   # Expected('notes', ('2.md',))
        """
        mine = [reading for reading in readings if tenant in owners.get(reading.source, ())]
        anyones = [reading for reading in readings if owners.get(reading.source)]
        return (mine or anyones or [readings[-1]])[0]

    @classmethod
    def _split(cls, text: str, cut: int) -> Expected:
        source = text[:cut].strip().replace("\\", "/").removeprefix("./")
        parts = tuple(part.strip() for part in text[cut + 1 :].split(">") if part.strip())
        return cls(source, parts)

    def matches(self, source: str, title: str, heading_path: Sequence[str]) -> bool:
        """Whether a chunk is of this source and sits under the heading path (case-insensitive
        prefix; the path may start with the document's title or leave it out)."""
        if source != self.source:
            return False
        want = [part.lower() for part in self.heading_path]
        return any(
            [part.strip().lower() for part in have][: len(want)] == want
            for have in ((title, *heading_path), tuple(heading_path))
        )

    def label(self) -> str:
        return (
            f"{self.source}#{PATH_SEPARATOR.join(self.heading_path)}"
            if self.heading_path
            else (self.source)
        )


@dataclass
class StageRank:
    """Where the target stands after one stage: its best chunk's rank (``None``: not in the
    list, which was ``depth`` long) and score."""

    stage: str  # bm25 | vector | fused | rerank | context
    rank: int | None
    depth: int
    chunk_id: str = ""
    score: float | None = None


@dataclass
class Contribution:
    """One side's share of a fused score: ``value`` adds up to the fused score."""

    side: str
    rank: int | None
    value: float
    formula: str


@dataclass
class Explanation:
    """Where one target went, stage by stage, and where it was cut (``cut`` is ``None`` when
    it made it into the context).

    ``cut`` is one of ``k``, ``fusion``, ``candidates``, ``filter``, ``tenant``,
    ``not indexed``; ``cut_detail`` says it in words.
    """

    target: str
    stages: list[StageRank] = field(default_factory=list)
    contributions: list[Contribution] = field(default_factory=list)
    fused_score: float | None = None  # the server's fused score of the contributions' chunk
    # A learned reranker: each feature's share of the chunk's rerank score (and the prior's and
    # the booster's constant: ``bias``); they add up to it.
    rerank_shares: dict[str, float] = field(default_factory=dict)
    cut: str | None = None
    cut_detail: str = ""

    def stage(self, name: str) -> StageRank | None:
        return next((stage for stage in self.stages if stage.stage == name), None)

    def sentence(self) -> str:
        return plain_words(self)

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "sentence": self.sentence()}


# --- pure parts --------------------------------------------------------------------------------


def rrf_contributions(
    ranks: Mapping[str, int | None],
    rank_constant: int,
    weights: Mapping[str, float] | None = None,
) -> list[Contribution]:
    """Each side's RRF share: ``weight / (rank_constant + rank)`` (weight 1 unless given), 0
    when the side missed it.

    Example::

        rrf_contributions({"bm25": 1, "vector": None}, 60)[0].value   # 1/61 = 0.016393
    """
    shares = []
    for side, rank in ranks.items():
        weight = 1.0 if weights is None else weights[side]
        if rank is None:
            shares.append(Contribution(side, None, 0.0, f"{side}: not retrieved, 0"))
            continue
        value = weight / (rank_constant + rank)
        shown = "1" if weight == 1.0 else f"{weight:g}"
        shares.append(Contribution(side, rank, value, f"{side}: {shown}/({rank_constant}+{rank})"))
    return shares


def score_contributions(
    side_scores: Mapping[str, Mapping[str, float]],
    chunk_id: str,
    weights: Mapping[str, float],
    technique: str = "min_max",
) -> list[Contribution]:
    """Each side's share for ``chunk_id`` under a normalisation and ``arithmetic_mean``: its score
    normalised over the side's list by ``technique`` (``loader.query.fusion.NORMALIZERS``, as
    the normalization-processor does), times the side's weight over the sum of the weights.

    Example::

        score_contributions({"bm25": {"a": 2.0, "b": 1.0}, "vector": {"b": 0.9}}, "a",
                            {"bm25": 0.3, "vector": 0.7})
        # bm25: 0.3 x min_max 1.0 = 0.3; vector: not retrieved, 0
    """
    normalize = NORMALIZERS[technique]
    total_weight = sum(weights.values()) or 1.0
    shares = []
    for side, scores in side_scores.items():
        normalized = normalize(scores)
        weight = weights[side] / total_weight
        if chunk_id not in normalized:
            shares.append(Contribution(side, None, 0.0, f"{side}: not retrieved, 0"))
            continue
        rank = list(scores).index(chunk_id) + 1
        value = weight * normalized[chunk_id]
        formula = f"{side}: {weight:g} x {technique} {normalized[chunk_id]:.4f}"
        shares.append(Contribution(side, rank, value, formula))
    return shares


def minmax_contributions(
    side_scores: Mapping[str, Mapping[str, float]],
    chunk_id: str,
    weights: Mapping[str, float],
) -> list[Contribution]:
    """``score_contributions`` with ``min_max``."""
    return score_contributions(side_scores, chunk_id, weights, "min_max")


def contributions(
    fusion: Fusion,
    side_ranks: Mapping[str, int | None],
    side_scores: Mapping[str, Mapping[str, float]],
    chunk_id: str,
) -> list[Contribution]:
    """Each side's share of ``chunk_id``'s fused score under a stored pipeline's ``fusion``,
    by its technique: RRF from the sides' ranks, a normalisation from their scores. Empty for a
    combination other than ``arithmetic_mean``, whose shares do not add up to the score."""
    weights = dict(zip(side_scores, fusion.side_weights(len(side_scores)), strict=False))
    if fusion.by_rank:
        return rrf_contributions(side_ranks, fusion.rank_constant, weights)
    if fusion.combination != "arithmetic_mean" or fusion.technique not in NORMALIZERS:
        return []
    return score_contributions(side_scores, chunk_id, weights, fusion.technique)


_SIDE_NAMES = {
    "bm25": "BM25",
    "vector": "the vector side",
    "second_vector": "the second reader",
    "exact": "the exact-term side",
}


def fusion_weights(pipeline: Mapping[str, Any], sides: Sequence[str]) -> tuple[str, int, list]:
    """``(technique, rank_constant, weights)`` of a stored search pipeline's fusion, read by its
    technique (``loader.modes.read_fusion``): ``rrf``, ``min_max``, ``l2`` or ``z_score``;
    weights default to 1 per side, as OpenSearch's do.

    Example::

        fusion_weights({"phase_results_processors": [{"score-ranker-processor": {
            "combination": {"technique": "rrf", "rank_constant": 60}}}]}, ["bm25", "vector"])
        # ('rrf', 60, [1.0, 1.0])

    Raises:
        ConfigError: the pipeline has no fusion processor.
    """
    fusion = read_fusion(pipeline)
    return fusion.technique, fusion.rank_constant, fusion.side_weights(len(sides))


def _stage_words(stage: StageRank) -> str:
    if stage.stage in _SIDE_NAMES:
        name = _SIDE_NAMES[stage.stage]
        if stage.rank is None:
            return f"missed by {name} (rank > {stage.depth})"
        return f"found by {name} at {stage.rank}"
    if stage.stage == "fused":
        if stage.rank is None:
            return f"not in the fused list (rank > {stage.depth})"
        return f"fused to {stage.rank}"
    if stage.stage == "rerank":
        return f"reranked to {stage.rank}"
    return f"kept at {stage.rank} of {stage.depth}" if stage.rank else f"cut by k={stage.depth}"


def plain_words(explanation: Explanation) -> str:
    """The explanation in one sentence, stage by stage, then where it was cut.

    Example::

        'found by BM25 at 3, missed by the vector side (rank > 50), fused to 7, cut by k=5'
    """
    if explanation.cut in ("not indexed", "tenant"):
        return explanation.cut_detail
    words = [_stage_words(stage) for stage in explanation.stages]
    if explanation.cut in ("filter", "candidates"):
        words.append(explanation.cut_detail)
    return ", ".join(words)


@dataclass
class ExplainReport:
    """What ``explain`` found: one explanation for ``--expect``, else one per top result."""

    question: str
    tenant: str
    mode: str
    k: int
    candidates: int
    explanations: list[Explanation] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # The stored pipeline's fusion (hybrid modes), as read back from the cluster.
    fusion: Fusion | None = None
    # The reranker the rerank stage ran, {"kind", "model"} (as SearchResult.reranker), or None.
    reranker: dict[str, str] | None = None

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["explanations"] = [explanation.to_dict() for explanation in self.explanations]
        data["fusion"] = self.fusion.to_dict() if self.fusion else None
        return data


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _explanation_lines(explanation: Explanation) -> list[str]:
    lines = [f"{explanation.target}: {explanation.sentence()}"]
    if explanation.cut in ("not indexed", "tenant"):
        return lines
    for stage in explanation.stages:
        rank = "-" if stage.rank is None else str(stage.rank)
        lines.append(
            f"  {stage.stage:<8} rank {rank:>4}  score {_number(stage.score):>8}  "
            f"{stage.chunk_id or f'(not in the top {stage.depth})'}"
        )
    if explanation.contributions:
        shares = " + ".join(
            f"{share.formula} = {share.value:.4f}" for share in explanation.contributions
        )
        total = sum(share.value for share in explanation.contributions)
        lines.append(
            f"  fused score {total:.4f} = {shares} (server: {_number(explanation.fused_score)})"
        )
    if explanation.rerank_shares:
        lines.append(_learned_line(explanation.rerank_shares))
    return lines


def _learned_line(shares: Mapping[str, float], shown: int = LEARNED_SHARES_SHOWN) -> str:
    """``learned score 3.21 = prior +2.52 + content_rank +0.40 + ... + 17 others +0.01``: the
    largest shares first."""
    ranked = sorted(shares.items(), key=lambda item: -abs(item[1]))
    parts = [f"{name} {value:+.4f}" for name, value in ranked[:shown]]
    rest = ranked[shown:]
    if rest:
        parts.append(f"{len(rest)} others {sum(value for _, value in rest):+.4f}")
    return f"  learned score {sum(shares.values()):.4f} = " + " + ".join(parts)


def format_report(report: ExplainReport) -> list[str]:
    """Plain-text lines: per explanation, the sentence first, then each stage's rank, score and
    chunk, and each side's contribution to the fused score; then the search's parameters.

    Example::

        refunds.md#Late deliveries: found by BM25 at 1, found by the vector side at 2, fused to 1, kept at 1 of 5
          bm25     rank    1  score   2.3121  4090d2d8bd4a34f674d6-0
          ...
          fused score 0.0325 = bm25: 1/(60+1) = 0.0164 + vector: 1/(60+2) = 0.0161 (server: 0.0325)
    """  # noqa: E501
    lines: list[str] = []
    for number, explanation in enumerate(report.explanations, start=1):
        block = _explanation_lines(explanation)
        if len(report.explanations) > 1:
            block[0] = f"{number}. {block[0]}"
        lines.extend(block)
    if not report.explanations:
        lines.append("no results")
    lines.extend(f"! {note}" for note in report.notes)
    fusion = report.fusion
    fused = f" ({_fusion_words(fusion)})" if fusion else ""
    lines.append(
        f"question {report.question!r}, tenant {report.tenant!r}, {report.mode}{fused}, "
        f"candidates {report.candidates}, k {report.k}, "
        + (f"reranked by {reranker_words(report.reranker)}" if report.reranker else "no rerank")
    )
    return lines


def _fusion_words(fusion: Fusion) -> str:
    """``rrf, rank constant 60`` or ``z_score + arithmetic_mean``: the stored technique."""
    if fusion.by_rank:
        return f"rrf, rank constant {fusion.rank_constant}"
    return f"{fusion.technique} + {fusion.combination}"
