"""`loader learn`: train the learned reranker from judged questions, kept only when it helps.

1. **Questions**: from every source (``loader.train.sources``: a BEIR folder's train qrels, a
   questions file of explicit or click-derived grades, identical lines counted once), at least
   ``MIN_QUESTIONS`` and at most ``MAX_QUESTIONS`` of them, or ``max_questions`` (a seeded
   sample). A bad source is refused before the cluster is asked anything.
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
4. **Base and guard** (``loader.train.cross_fit``): ``folds``-fold cross-validation over whole
   questions (seeded), in each base mode (``BASE_MODES``, or ``mode``): each question's nDCG@10
   under a model trained without it. The base is the mode whose model scores best out of fold;
   its scores are judged against the search served now -- the tenant's model already in
   ``out`` when retraining in place (over its base's candidates: a retraining never serves a
   worse one), else the fused order in the ``search_mode`` setting's mode -- document by
   document for document-graded questions. The model, trained
   on every question, is written to ``out`` only when the mean gain is above zero and so is
   its one-sided 90 % lower bound (the 10th percentile of 2,000 paired-bootstrap means:
   ``loader.train.guard.gain_lower_bound``, at ``GUARD_CONFIDENCE``); otherwise nothing is
   written and the result says what was measured. Every question judges (a 20 % hold-out
   judged 36 of 180 questions and refused every fold of a model that gained +0.019 on
   held-out data), and none is spent on judging alone. The folds and the confidence were
   chosen on SciFact's train claims alone (``loader.train.booster.GUARD_FOLDS``).

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

from loader.errors import ConfigError
from loader.models.readers import canonical_name, second_reader
from loader.models.rerank.check import LEARNED_MODEL_FILE
from loader.models.rerank.features import FEATURE_VERSION, FeatureSet
from loader.train import defaults
from loader.train.booster import (
    BASE_MODES,
    BOOSTER_PARAMS,
    GUARD_FOLDS,
    PRIOR_SCALE,
    ROUNDS,
    choose_base,
    fused_ndcgs,
    guard_figures,
    guard_keeps,
    residual_weight,
    train_booster,
)
from loader.train.cross_fit import (
    aligned,
    base_scores,
    learnt_from,
    question_keys,
    served_model,
    served_ndcgs,
    unseen_questions,
)
from loader.train.examples import Example, SearchProgress, collect_examples, searched_features
from loader.train.model_store import check_out, model_folder, model_tenant, write_model
from loader.train.sources import Source, check_indices, read_source

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

    from loader.settings import Settings

log = logging.getLogger(__name__)

# Fewer questions than this leave the guard's folds nothing to measure (2 a fold at 5 folds).
MIN_QUESTIONS = 10
# Each question is one search (0.25 s to 2 s on a busy 2-core machine): 10,000 is 40 minutes to
# hours, far above the judged sets learn is for (SciFact's 809 train claims, a judging session's
# few hundred), and bounds what one file can ask for (600,000 lines of 20 MB were 40 hours).
MAX_QUESTIONS = 10_000


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
        test_split: the split ``loader eval`` measures: refused as ``split``.
        tenant: the tenant a questions file's questions are searched as.
        index_prefix: the prefix ``loader eval`` named a BEIR folder's index with.
        mode: the search whose candidates the model reranks; ``None``: the one of ``BASE_MODES``
            over whose candidates it serves best (``booster.choose_base``).
        candidates: the candidates per question it learns from, and reranks (50).
        folds: the guard's cross-validation folds (whole questions).
        max_questions: questions at most (a seeded sample; ``None``: all), for learning curves.
        implicit_weight: sample weight of click-derived questions (explicit ones weigh 1).
        seed: the draws (sample, folds, bootstrap) and LightGBM's.
        rounds: boosting rounds (all of them: no early stopping).
    """

    sources: tuple[str | Path, ...]
    out: Path | None = None
    split: str = "train"
    test_split: str = defaults.TEST_SPLIT
    tenant: str = "default"
    index_prefix: str = "eval"
    mode: str | None = None
    candidates: int = 50
    folds: int = GUARD_FOLDS
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
        if not 2 <= self.folds <= 10:
            raise ConfigError(f"--folds must be between 2 and 10, got {self.folds}")
        if self.split == self.test_split:
            raise ConfigError(
                f"--split {self.split}: learning on the split eval measures would grade the "
                "model on questions it learnt; give the train split"
            )
        if self.max_questions is not None and not (
            MIN_QUESTIONS <= self.max_questions <= MAX_QUESTIONS
        ):
            raise ConfigError(
                f"--max-questions must be between {MIN_QUESTIONS} and {MAX_QUESTIONS:,}, got "
                f"{self.max_questions}"
            )
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
    """What ``learn`` measured and did."""

    adopted: bool
    reason: str
    out: str
    metrics: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The result for ``--json``: the provenance without the digests of the questions the
        model learnt from (up to 10,000 lines of hex; ``counts`` says how many there were)."""
        result = asdict(self)
        result.get("provenance", {}).get("model", {}).pop("learnt_from", None)
        return result


def _read_sources(
    request: LearnRequest, index_name: str, chunk_strategy: str, notify: Callable[[str], None]
) -> list[Source]:
    """Every source, each read once (one given twice is refused: its questions would count
    twice)."""
    sources, seen = [], set()
    for path in request.sources:
        if Path(path).resolve() in seen:
            raise ConfigError(f"source {path} is given twice; give each source once")
        seen.add(Path(path).resolve())
        source = read_source(
            path,
            split=request.split,
            tenant=request.tenant,
            index_prefix=request.index_prefix,
            index_name=index_name,
            chunk_strategy=chunk_strategy,
        )
        merged = f" ({source.merged:,} identical lines merged)" if source.merged else ""
        notify(f"read {path}: {len(source.questions):,} judged questions{merged}")
        sources.append(source)
    return sources


def _sample(sources: list[Source], request: LearnRequest) -> list[tuple[Source, Any]]:
    """The questions to search: all of them, or a seeded sample of ``max_questions``.

    Raises:
        ConfigError: fewer than ``MIN_QUESTIONS``, or more than ``MAX_QUESTIONS`` and no
            ``max_questions``; the message says how many and what to do.
    """
    pairs = [(source, question) for source in sources for question in source.questions]
    merged = sum(source.merged for source in sources)
    counted = f"{len(pairs):,} distinct judged questions"
    if merged:
        counted += f" ({merged:,} identical lines merged)"
    if request.max_questions is None and len(pairs) > MAX_QUESTIONS:
        raise ConfigError(
            f"{counted}; loader learn searches at most {MAX_QUESTIONS:,} (each is a search): "
            f"give --max-questions {MAX_QUESTIONS} for a seeded sample of them"
        )
    if request.max_questions is not None and len(pairs) > request.max_questions:
        pairs = random.Random(request.seed).sample(pairs, request.max_questions)
    if len(pairs) < MIN_QUESTIONS:
        raise ConfigError(
            f"{counted}; loader learn needs at least {MIN_QUESTIONS}: judge more questions "
            "(`loader judgments sample`, then grade them on serve's judging page)"
        )
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
        ConfigError: a source or option is unusable (``--split`` the test split, a questions
            file's bad line or another tenant's), too few or too many questions.
        ClusterError: an index is missing (run `loader eval` for a BEIR folder first) or the
            cluster failed.
    """
    from loader.cluster.client import connect, require_cluster

    started = time.perf_counter()
    notify = on_event or (lambda line: None)
    request.check()
    sources = _read_sources(request, settings.index_name, settings.chunk_strategy, notify)
    tenant = model_tenant(sources)
    out = model_folder(request.out, settings.learned_reranker, tenant)
    sampled = _sample(sources, request)
    if client is None:
        client = connect(settings)
        require_cluster(client, settings)
    check_indices(sources, settings, client)
    modes = (request.mode,) if request.mode else BASE_MODES
    second = second_reader(settings.embedding_model, settings.second_embedding_model)
    served, against = served_model(out, second, settings.search_mode)
    # What the tenant is served now: its model over the base it learnt from, else fusion.
    served_mode = (served.base_mode if served else "") or settings.search_mode
    searched = list(dict.fromkeys((*modes, served_mode)))
    notify(f"searching {len(sampled)} questions in {', '.join(searched)}")
    searching = settings.replace(query_log="off")  # training searches are no users' searches
    what = "questions" if len(searched) == 1 else f"searches ({len(searched)} modes)"
    progress = SearchProgress(len(sampled) * len(searched), notify, what=what)
    examples = aligned(
        {
            mode: collect_examples(
                sampled, searching, client, mode=mode, candidates=request.candidates,
                on_searched=progress,
            )
            for mode in searched
        }
    )  # fmt: skip
    found = len(examples[modes[0]])
    if found < request.folds:
        raise ConfigError(
            f"{found} questions found candidates in every mode searched; --folds "
            f"{request.folds} needs as many"
        )
    scores = base_scores(examples, modes, request, request.folds, notify)
    keys = question_keys(examples[modes[0]])
    base, bases = choose_base(
        {
            mode: dict(zip(keys, zip(*pair, strict=True), strict=True))
            for mode, pair in scores.items()
        }
    )
    fused, learned = scores[base]
    # Against what is served: a model that records what it learnt from, only where it did not.
    unseen = unseen_questions(served, examples[served_mode])
    current = served_ndcgs(served, examples[served_mode]) if served is not None else None
    fusion = fused_ndcgs(examples[served_mode])  # fusion in the mode served now
    metrics = guard_figures(fusion, learned, current, unseen, request.seed)
    against_fusion = served is None or unseen is not None
    metrics.update(folds=float(request.folds), against="fusion" if against_fusion else against)
    metrics["served"] = against
    metrics["ndcg@10_fused"] = float(fused.mean())
    adopted = guard_keeps(metrics)
    notify(f"training: {request.rounds} rounds on {found} questions ({base})")
    booster = train_booster(examples[base], request)
    weight = residual_weight(sum(bool(example.labels.max() > 0) for example in examples[base]))
    counts = _counts(sources, sampled, examples[base])
    result = LearnResult(adopted, _verdict(metrics, adopted), str(out), metrics, counts)
    features = searched_features(base, second)  # both readers' in a hybrid base with two
    learnt_with = canonical_name(second or "") if features.readers > 1 else ""
    index_setup = {  # what made the index it learned from: the model fits those chunks
        "embedding_model": settings.embedding_model,
        "second_embedding_model": learnt_with or "none",
        "chunk_strategy": settings.chunk_strategy,
    }
    result.provenance = _provenance(
        request, index_setup, sources, booster, metrics, counts, result, base, features
    )
    result.provenance["model"].update(
        residual_weight=weight, tenant=tenant, candidate_depth=request.candidates,
        base_mode=base, readers=features.readers, second_reader=learnt_with,
        learnt_from=learnt_from(examples[base]),
    )  # fmt: skip
    result.provenance["base"] = {
        "chosen": base,
        "served_now": f"{against} over {served_mode}'s candidates",
        "by": f"mean out-of-fold nDCG@10 of the model over each mode's candidates "
        f"({request.folds} folds)"
        if len(modes) > 1
        else "--mode",
        "modes": bases,
    }
    if adopted:
        result.provenance = write_model(out, booster, result.provenance)
    result.seconds = time.perf_counter() - started
    return result


def _counts(sources: list[Source], sampled: list[Any], examples: list[Example]) -> dict[str, int]:
    return {
        "questions_read": sum(len(source.questions) for source in sources),
        "identical_merged": sum(source.merged for source in sources),
        "questions_sampled": len(sampled),
        "questions_searched": len(examples),
        "trained_on": sum(bool(example.labels.max() > 0) for example in examples),
        "implicit": sum(bool(example.implicit) for example in examples),
        "candidates": sum(len(example.labels) for example in examples),
        "relevant_candidates": int(sum((example.labels > 0).sum() for example in examples)),
    }


def _verdict(metrics: dict[str, float], adopted: bool) -> str:
    against = metrics.get("against", "fusion")
    figures = (
        f"{int(metrics['folds'])}-fold cross-validated nDCG@10 against {against}: "
        f"{metrics['ndcg@10_current']:.4f} -> {metrics['ndcg@10_learned']:.4f} on "
        f"{int(metrics['questions'])} questions (gain {metrics['gain']:+.4f}, one-sided "
        f"{metrics['confidence']:.0%} lower bound {metrics['gain_lower_bound']:+.4f})"
    )
    if "served_unseen" in metrics:  # a retraining in place, judged where the served one is fair
        unseen = int(metrics["served_unseen"])
        figures += (
            f"; against {metrics['served']} on the {unseen} questions it did not learn from: "
            f"gain {metrics['gain_over_served']:+.4f}"
        )
        if not adopted and metrics["gain"] > 0 and metrics["gain_lower_bound"] > 0:
            why = (
                "it learnt from every question judged: judge new ones to retrain it"
                if unseen == 0
                else "the new model is worse than it there"
            )
            return f"{figures}: {why}; nothing written, {metrics['served']} keeps serving"
    if adopted:
        return f"{figures}: the learned reranker beats the current search; kept"
    return (
        f"{figures}: not better than the current search with {metrics['confidence']:.0%} "
        f"confidence; nothing written. Judge more questions: the guard measured "
        f"{int(metrics['questions'])}, and the bound narrows as they grow"
    )


def _provenance(
    request: LearnRequest,
    index_setup: dict[str, str],
    sources: list[Source],
    booster: Any,
    metrics: dict[str, float],
    counts: dict[str, int],
    result: LearnResult,
    provenance_mode: str,
    features: FeatureSet,
) -> dict[str, Any]:
    return {
        "model": {
            "kind": "lambdamart",
            "file": LEARNED_MODEL_FILE,
            "feature_version": FEATURE_VERSION,
            "feature_fingerprint": features.fingerprint(),
            "features": [{"name": name, "what": what} for name, what in features.features],
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
            "test_split": request.test_split,
            "index_prefix": request.index_prefix,
            "folds": request.folds,
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
