"""`loader learn`: train the learned reranker from judged questions, kept only when it helps.

1. **Questions**: from every source (``loader.train.sources``: a BEIR folder's train qrels, a
   questions file of explicit or click-derived grades), at most ``max_questions`` of them (a
   seeded sample), split by a seeded draw into held-out questions (``held_out``, 20 %) and
   training questions.
2. **Examples**: each question is searched as the model's searches will be (the source's index
   and tenant, ``mode``, ``candidates`` candidates, no rewrite, no query log; a BEIR folder's
   each document at its best chunk, as ``loader eval`` searches; a questions file's chunk by
   chunk, as ``loader search`` does), and its candidates' features are computed by the very
   lookup and code the rerank uses
   (``loader.models.rerank.features``), so what the model learns from is what it will see.
   Each candidate is labelled with its grade: its chunk's, or its document's.
3. **Model**: LightGBM ``lambdarank`` learns the residual over the fused order
   (``init_score`` = ``prior_scale`` x the fused rank's DCG discount), with small trees, L2,
   a slow learning rate and a fixed number of rounds (no early stopping: on an inner split it
   stopped after a few trees, see ``BOOSTER_PARAMS``), and the trees' output weighed
   n / (n + 200) for n training questions: with few judgments it stays close to fusion.
   Click-derived questions weigh ``implicit_weight`` (sample weights), explicit ones 1.
4. **Guard**: on the held-out questions, nDCG@10 of the learned order against the index's
   current search (the fused order), document by document for document-graded questions. The
   model is written to ``out`` only when the mean gain is above zero and so is the lower end of
   a 95 % paired-bootstrap interval of it (``loader.train.guard.gain_lower_bound``); otherwise
   nothing is written and the result says what was measured.

Example::

    result = learn(LearnRequest(sources=("datasets/scifact",), out=Path("models/lr")), settings)
    result.adopted, result.metrics["gain"], result.metrics["gain_lower_bound"]
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from loader.errors import ConfigError
from loader.models.rerank.check import LEARNED_MODEL_FILE
from loader.models.rerank.features import (
    FEATURE_VERSION,
    FEATURES,
    feature_fingerprint,
)
from loader.train.booster import (
    BASE_MODES,
    BOOSTER_PARAMS,
    PRIOR_SCALE,
    ROUNDS,
    choose_base,
    guard_metrics,
    held_out_scores,
    residual_weight,
    train_booster,
)
from loader.train.examples import Example, collect_examples
from loader.train.model_store import check_out, model_folder, model_tenant, write_model
from loader.train.sources import Source, read_source

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

    from loader.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LearnRequest:
    """What ``learn`` trains from and how (``loader learn``'s options).

    Attributes:
        sources: BEIR folders and questions files (``loader.train.sources``), all searched as
            one tenant: the model is that tenant's.
        out: the folder of the learned rerankers (``None``: the ``learned_reranker`` setting);
            the model goes to ``<out>/<its tenant>/`` (``loader.models.rerank.tenants``), written
            only when the guard keeps it.
        split: the qrels file of the BEIR folders (``train``).
        tenant: the tenant a questions file's questions are searched as.
        index_prefix: the prefix ``loader eval`` named a BEIR folder's index with.
        mode: the search whose candidates the model reranks; ``None``: the one of ``BASE_MODES``
            over whose candidates it serves best (``booster.choose_base``).
        candidates: the candidates per question it learns from, and reranks (50).
        held_out: share of the questions held out for the guard.
        max_questions: questions at most (a seeded sample; ``None``: all), for learning curves.
        implicit_weight: sample weight of click-derived questions (explicit ones weigh 1).
        seed: the draws (sample, split, bootstrap) and LightGBM's.
        rounds: boosting rounds (all of them: no early stopping).
    """

    sources: tuple[str | Path, ...]
    out: Path | None = None
    split: str = "train"
    tenant: str = "default"
    index_prefix: str = "eval"
    mode: str | None = None
    candidates: int = 50
    held_out: float = 0.2
    max_questions: int | None = None
    implicit_weight: float = 0.5
    seed: int = 0
    rounds: int = ROUNDS

    def check(self) -> None:
        """Raises ConfigError naming the option that is out of range."""
        from loader.modes import search_mode

        if not self.sources:
            raise ConfigError("loader learn needs at least one source (a BEIR folder or a file)")
        if self.mode is not None:
            search_mode(self.mode)
        if not 0.05 <= self.held_out <= 0.5:
            raise ConfigError(f"--held-out must be between 0.05 and 0.5, got {self.held_out}")
        if self.max_questions is not None and self.max_questions < 10:
            raise ConfigError(f"--max-questions must be at least 10, got {self.max_questions}")
        if not 0.0 <= self.implicit_weight <= 1.0:
            raise ConfigError(
                f"--implicit-weight must be between 0 and 1, got {self.implicit_weight}"
            )
        if not 5 <= self.candidates <= 200:
            raise ConfigError(f"--candidates must be between 5 and 200, got {self.candidates}")
        if self.rounds < 1:
            raise ConfigError(f"--rounds must be at least 1, got {self.rounds}")
        if self.out is not None:
            check_out(self.out)


@dataclass
class LearnResult:
    """What ``learn`` measured and did.

    Attributes:
        adopted: the guard kept the model, and it was written to ``out``.
        reason: one line: the held-out figures and the verdict.
        metrics: held-out nDCG@10 of the current search and of the model, the mean gain, the
            lower end of its 95 % paired-bootstrap interval, the questions measured.
        counts: questions read, sampled, trained on, held out; candidates; relevant ones.
        provenance: what ``provenance.json`` holds (written only when adopted).
    """

    adopted: bool
    reason: str
    out: str
    metrics: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _split(questions: list[Any], share: float, seed: int) -> tuple[list[Any], list[Any]]:
    """A seeded split into (kept, held): ``share`` of them held, at least one each."""
    shuffled = list(questions)
    random.Random(seed).shuffle(shuffled)
    held = min(max(1, round(len(shuffled) * share)), len(shuffled) - 1)
    return shuffled[held:], shuffled[:held]


def _read_sources(request: LearnRequest, index_name: str, chunk_strategy: str) -> list[Source]:
    return [
        read_source(
            path,
            split=request.split,
            tenant=request.tenant,
            index_prefix=request.index_prefix,
            index_name=index_name,
            chunk_strategy=chunk_strategy,
        )
        for path in request.sources
    ]


def _sample(sources: list[Source], request: LearnRequest) -> list[tuple[Source, Any]]:
    pairs = [(source, question) for source in sources for question in source.questions]
    if request.max_questions is not None and len(pairs) > request.max_questions:
        pairs = random.Random(request.seed).sample(pairs, request.max_questions)
    return pairs


def learn(
    request: LearnRequest,
    settings: Settings,
    *,
    client: OpenSearch | None = None,
    on_event: Callable[[str], None] | None = None,
) -> LearnResult:
    """Train a learned reranker and keep it only when the guard finds it better (see module).

    Returns:
        The result; ``adopted`` says whether ``request.out`` was written.

    Raises:
        ConfigError: a source or option is unusable, or too few questions to learn from.
        ClusterError: an index is missing (run `loader eval` for a BEIR folder first) or the
            cluster failed.
    """
    from loader.cluster.client import connect, require_cluster

    started = time.perf_counter()
    notify = on_event or (lambda line: None)
    request.check()
    sources = _read_sources(request, settings.index_name, settings.chunk_strategy)
    tenant = model_tenant(sources)
    out = model_folder(request.out, settings.learned_reranker, tenant)
    sampled = _sample(sources, request)
    if len(sampled) < 10:
        raise ConfigError(f"{len(sampled)} judged questions; loader learn needs at least 10")
    kept, held = _split(sampled, request.held_out, request.seed)
    if client is None:
        client = connect(settings)
        require_cluster(client, settings)
    _check_indices(sources, settings, client)
    modes = (request.mode,) if request.mode else BASE_MODES
    notify(
        f"searching {len(sampled)} questions ({len(kept)} to train on, {len(held)} held out) "
        f"in {', '.join(modes)}"
    )
    searching = settings.replace(query_log="off")  # training searches are no users' searches
    fits = {mode: _fit(kept, held, searching, client, mode, request) for mode in modes}
    base, bases = choose_base({mode: fit.scores for mode, fit in fits.items()})
    fit = fits[base]
    served = settings.search_mode if settings.search_mode in fits else base
    metrics = _guard_figures(fits[served].scores, fit.scores, request.seed)
    adopted = metrics["gain"] > 0 and metrics["gain_lower_bound"] > 0
    counts = _counts(sources, sampled, fit.train, fit.held)
    result = LearnResult(adopted, _verdict(metrics, adopted), str(out), metrics, counts)
    index_setup = {  # what made the index it learned from: the model fits those chunks
        "embedding_model": settings.embedding_model,
        "chunk_strategy": settings.chunk_strategy,
    }
    result.provenance = _provenance(
        request, index_setup, sources, fit.booster, metrics, counts, result, base
    )
    result.provenance["model"].update(
        residual_weight=fit.weight, tenant=tenant, candidate_depth=request.candidates,
        base_mode=base,
    )  # fmt: skip
    result.provenance["base"] = {
        "chosen": base,
        "served_now": served,  # the guard's "current search": fusion in the search_mode
        "by": "mean held-out nDCG@10 of the model over each mode's candidates (the guard's "
        "held-out split)"
        if len(modes) > 1
        else "--mode",
        "modes": bases,
    }
    if adopted:
        write_model(out, fit.booster, result.provenance)
    result.seconds = time.perf_counter() - started
    return result


@dataclass
class _Fit:
    """A model learnt over one mode's candidates, and its held-out scores."""

    booster: Any
    weight: float
    train: list[Example]
    held: list[Example]
    scores: dict[tuple[str, str], tuple[float, float]]


def _fit(
    kept: list[Any],
    held: list[Any],
    settings: Settings,
    client: OpenSearch,
    mode: str,
    request: LearnRequest,
) -> _Fit:
    """Search the questions in ``mode``, learn from the kept ones, score the held-out ones.

    Raises:
        ConfigError: no held-out question found a candidate; too few to learn from.
    """
    depth = request.candidates
    train = collect_examples(kept, settings, client, mode=mode, candidates=depth)
    held_examples = collect_examples(held, settings, client, mode=mode, candidates=depth)
    if not held_examples:
        raise ConfigError("no held-out question found any candidate; is the index empty?")
    booster = train_booster(train, request)
    weight = residual_weight(sum(bool(example.labels.max() > 0) for example in train))
    scores = held_out_scores(booster, held_examples, PRIOR_SCALE, weight)
    return _Fit(booster, weight, train, held_examples, scores)


def _guard_figures(
    current: dict[tuple[str, str], tuple[float, float]],
    learned: dict[tuple[str, str], tuple[float, float]],
    seed: int,
) -> dict[str, float]:
    """The guard over the held-out questions both scored: the current search's fused order
    (``current``) against the model over its base's candidates (``learned``)."""
    keys = sorted(set(current) & set(learned))
    before = np.array([current[key][0] for key in keys])
    after = np.array([learned[key][1] for key in keys])
    return guard_metrics(before, after, seed)


def _check_indices(sources: list[Source], settings: Settings, client: OpenSearch) -> None:
    """Every source's index must exist: a BEIR folder's is the one `loader eval` built.

    Raises:
        ConfigError: naming the index, the source and the fix (exit code 2).
    """
    from loader.cluster.client import cluster_errors

    for source in sources:
        with cluster_errors(settings, f"looking for index {source.index!r}"):
            found = client.indices.exists(index=source.index)
        if found:
            continue
        if source.kind == "beir":
            raise ConfigError(
                f"source {source.path}: index {source.index!r} does not exist; run `loader eval "
                f"{source.path}` with the same --index-prefix and chunk_strategy first"
            )
        raise ConfigError(
            f"source {source.path}: index {source.index!r} does not exist; give --index, or "
            "`loader apply` and `loader push` first"
        )


def _counts(
    sources: list[Source], sampled: list[Any], train: list[Example], held: list[Example]
) -> dict[str, int]:
    return {
        "questions_read": sum(len(source.questions) for source in sources),
        "questions_sampled": len(sampled),
        "trained_on": sum(bool(example.labels.max() > 0) for example in train),
        "train_questions": len(train),
        "held_out": len(held),
        "implicit": sum(bool(example.implicit) for example in train + held),
        "candidates": sum(len(example.labels) for example in train + held),
        "relevant_candidates": int(sum((example.labels > 0).sum() for example in train + held)),
    }


def _verdict(metrics: dict[str, float], adopted: bool) -> str:
    figures = (
        f"held-out nDCG@10 {metrics['ndcg@10_current']:.4f} -> {metrics['ndcg@10_learned']:.4f} "
        f"on {int(metrics['questions'])} questions (gain {metrics['gain']:+.4f}, 95 % lower "
        f"bound {metrics['gain_lower_bound']:+.4f})"
    )
    if adopted:
        return f"{figures}: the learned reranker beats the current search; kept"
    return f"{figures}: not better than the current search with 95 % confidence; nothing written"


def _provenance(
    request: LearnRequest,
    index_setup: dict[str, str],
    sources: list[Source],
    booster: Any,
    metrics: dict[str, float],
    counts: dict[str, int],
    result: LearnResult,
    provenance_mode: str,
) -> dict[str, Any]:
    return {
        "model": {
            "kind": "lambdamart",
            "file": LEARNED_MODEL_FILE,
            "feature_version": FEATURE_VERSION,
            "feature_fingerprint": feature_fingerprint(),
            "features": [{"name": name, "what": what} for name, what in FEATURES],
            "prior": "1 / log2(1 + fused rank)",
            "prior_scale": PRIOR_SCALE,
            "trees": int(booster.num_trees()),
            "best_iteration": int(booster.best_iteration),
            "params": BOOSTER_PARAMS,
        },
        "sources": [source.describe() for source in sources],
        "counts": counts,
        "settings": {
            "mode": provenance_mode,
            "candidates": request.candidates,
            "split": request.split,
            "index_prefix": request.index_prefix,
            "held_out": request.held_out,
            "max_questions": request.max_questions,
            "implicit_weight": request.implicit_weight,
            "seed": request.seed,
            "rounds": request.rounds,
            **index_setup,
        },
        "metrics": metrics,
        "guard": {"adopted": result.adopted, "verdict": result.reason},
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
