"""`loader adapt`: fine-tune the embedding model on the corpus alone, kept only when it helps.

A team rarely has judged questions; every team has its documents. Four steps, each a function:

1. ``mine``: pairs from the structure of one tenant's chunks as the index holds them
   (``loader.train.pairs``: heading and section, title and body, a sentence and its chunk
   without it); whole documents' pairs are held aside;
2. ``train``: the hard negatives from the index (``loader.train.negatives``: the stock model's
   nearest chunks of other documents, within the tenant, less those it scores nearly as high as
   the pair's own passage), ``loader fine-tune``'s loop (``loader.train.trainer``, keeping the
   model's instructions and temperature), the weights averaged with the stock model's (``mix``,
   WiSE-FT);
3. ``judge``: both models rank the held-out pairs' passages for their queries, or the tenant's
   documents for its judged questions (``judged``), in ``loader.train.guard``; the adapted
   model is kept only when its gain in MRR@10 there is above ``min_gain`` with 95 % confidence
   (the lower bound of a paired bootstrap over the queries), so that a gain within the noise of
   a few hundred queries keeps the stock model, and no kind of query got worse;
4. ``keep``: the adapted model, with its provenance, is written to ``out``; otherwise nothing is
   written and the result says why.

It reads the index and the model, nothing else (no questions, no judgments) unless given a
judged questions file. Searching with the
adapted model is a new index version, as any model change (``embedding_model = "<out>"``, then
``loader apply`` and ``loader push``).

Example::

    result = adapt_embedder(AdaptRequest(out=Path("models/adapted"), tenant="acme"), settings)
    result.adopted, result.stock_mrr, result.adapted_mrr   # (True, 0.61, 0.68)
"""

from __future__ import annotations

import json
import logging
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loader.errors import ConfigError, IncompatibleIndexError
from loader.resolve import resolve_tenant
from loader.train import defaults
from loader.train.guard import MRR_DEPTH, Guard, JudgedQuestions, judge, read_judged
from loader.train.negatives import NEGATIVE_MARGIN, with_hard_negatives
from loader.train.pairs import (
    PAIR_KINDS,
    Chunk,
    Pair,
    balance_kinds,
    dominant_kind,
    mine_pairs,
    split_by_document,
)
from loader.train.trainer import (
    FineTuneOptions,
    ModelInstructions,
    fine_tune,
    instructions_of,
    mix_with_base,
)

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

    from loader.models.embedding import Embedder
    from loader.settings import Settings

log = logging.getLogger(__name__)

# Written into the adapted model's folder: what it was trained from and what it measured.
PROVENANCE_FILE = "loader_adapt.json"
CHUNK_FIELDS = [
    "tenant", "doc_id", "chunk_id", "title", "heading_path", "section_id", "position", "body",
    "content", "source",
]  # fmt: skip


@dataclass(frozen=True)
class AdaptRequest:
    """What `loader adapt` was asked for (its options, by name)."""

    out: Path
    tenant: str | None = None  # None: the tenant setting (``loader.resolve.resolve_tenant``)
    held_out_share: float = defaults.HELD_OUT_SHARE
    max_pairs: int = defaults.MAX_PAIRS
    negatives: int = defaults.ADAPT_NEGATIVES
    negative_margin: float = NEGATIVE_MARGIN
    min_gain: float = defaults.MIN_GAIN
    mix: float = defaults.MIX  # the trained weights' share of the saved model; the rest the stock's
    seed: int = defaults.SEED
    # A questions file of the tenant (`loader judgments export`, or eval's): the guard judges on
    # its questions instead of the held-out pairs.
    judged: Path | None = None
    options: FineTuneOptions = field(
        default_factory=lambda: FineTuneOptions(max_tokens=defaults.ADAPT_MAX_TOKENS)
    )


@dataclass
class AdaptResult:
    adopted: bool
    out: Path | None  # the adapted model's folder, when adopted
    pairs: dict[str, int]  # mined, by kind
    trained_on: int
    without_negatives: int  # pairs whose nearest other chunks were all too close to be wrong
    held_out: int
    stock_mrr: float
    adapted_mrr: float
    gain_lower_bound: float  # the gain in MRR@10 is above this with 95 % confidence
    steps: int
    seconds: float
    reason: str
    trained_kinds: dict[str, int] = field(default_factory=dict)  # trained on, by kind
    judged_on: str = ""  # what the guard measured: held-out pairs or judged questions
    kinds: dict[str, dict[str, float]] = field(default_factory=dict)  # the measure, by kind
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["out"] = str(self.out) if self.out else None
        for name in ("stock_mrr", "adapted_mrr", "gain_lower_bound"):
            data[name] = round(data[name], 4)
        data["seconds"] = round(self.seconds, 1)
        return data


def adapt_embedder(
    request: AdaptRequest,
    settings: Settings,
    *,
    client: OpenSearch | None = None,
    on_event: Callable[[str], None] | None = None,
) -> AdaptResult:
    """Mine pairs from the tenant's chunks, train, judge on the held-out pairs, keep or not:
    ``mine``, ``train``, ``judge`` and ``keep``, in that order.

    Raises:
        ConfigError: a bad option, an ``out`` that holds files, a tenant with too few pairs.
        ClusterError, ModelError: the cluster or a model failed; ModelError also when the
            ``torch`` extra is not installed.
    """
    from loader.cluster.client import connect, require_cluster
    from loader.models.embedding import embedder_for
    from loader.models.onnx_file import drop_local_onnx_exports
    from loader.models.torch_extra import require_torch_extra

    notify = on_event or (lambda line: None)
    _check(request)
    request = replace(request, tenant=resolve_tenant(settings, request.tenant))
    judged = read_judged(request.judged) if request.judged else None  # a bad line: before work
    require_torch_extra("loader adapt")
    if client is None:
        client = connect(settings)
        require_cluster(client, settings)  # a cluster that is down is named before any model
    started = time.perf_counter()
    chunks = read_chunks(client, settings, request.tenant)
    mined = mine(request, chunks, settings.index_name)
    notify(mined.summary)
    for warning in mined.warnings:
        log.warning("%s", warning)
    guard = _guard(request, judged, mined, chunks)
    stock = embedder_for(settings)
    stock_ranks = guard.reciprocal_ranks(stock)
    notify(f"MRR@{MRR_DEPTH} of the stock model on {guard.measured_on}: {stock_ranks.mean():.4f}")
    request.out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".adapt-", dir=request.out.parent))
    try:
        trained = train(request, settings, client, mined, stock, staging, notify)
        adapted = embedder_for(settings.replace(embedding_model=str(staging)))
        adapted_ranks = guard.reciprocal_ranks(adapted)
        verdict = judge(stock_ranks, adapted_ranks, guard.kinds, request.min_gain, request.seed)
        result = AdaptResult(
            verdict.adopted, request.out if verdict.adopted else None, mined.by_kind,
            trained.examples, trained.without_negatives, len(mined.held), verdict.stock_mrr,
            verdict.adapted_mrr, verdict.lower_bound, trained.steps,
            time.perf_counter() - started, f"{guard.measured_on}: {verdict.reason}",
            mined.trained_kinds, guard.measured_on, verdict.kinds, mined.warnings,
        )  # fmt: skip
        if verdict.adopted:
            base, index = settings.embedding_model, settings.index_name
            keep(request, result, staging, trained.instructions, base_model=base, index_name=index)
        return result
    finally:
        # The staging model was embedded through its own ONNX export: unreadable once staging
        # is gone (an adopted model is exported again under its own name when used).
        drop_local_onnx_exports(staging)
        shutil.rmtree(staging, ignore_errors=True)


@dataclass
class MinedPairs:
    """What ``mine`` gives: the pairs by kind, those to train on and those held out."""

    by_kind: dict[str, int]  # mined, by kind
    train: list[Pair]
    held: list[Pair]
    summary: str  # one progress line
    trained_kinds: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def mine(request: AdaptRequest, chunks: list[Chunk], index_name: str) -> MinedPairs:
    """The pairs of ``chunks``, whole documents' held out, the rest balanced across kinds
    (``balance_kinds``) and sampled to ``max_pairs``; a warning when one kind is most of them.
    Pure.

    Raises:
        ConfigError: too few pairs to train on (fewer than a batch), or none held out.
    """
    pairs = mine_pairs(chunks, seed=request.seed)
    by_kind = {kind: sum(pair.kind == kind for pair in pairs) for kind in PAIR_KINDS}
    train_pairs, held = split_by_document(pairs, request.held_out_share, seed=request.seed)
    train_pairs = balance_kinds(train_pairs, request.seed)
    train_pairs = _sample(train_pairs, request.max_pairs, request.seed)
    if len(train_pairs) < request.options.batch_size or not held:
        raise ConfigError(
            f"tenant {request.tenant!r} of {index_name!r} gives {len(pairs)} pairs "
            f"({len(train_pairs)} to train on, {len(held)} held out): too few to adapt on; push "
            "more documents, or lower --batch-size"
        )
    summary = (
        f"{len(chunks)} chunks of tenant {request.tenant!r} in {index_name!r}: "
        f"{len(pairs)} pairs ({', '.join(f'{n} {kind}' for kind, n in by_kind.items())}); "
        f"{len(train_pairs)} to train on, {len(held)} held out"
    )
    trained_kinds = {kind: sum(p.kind == kind for p in train_pairs) for kind in PAIR_KINDS}
    return MinedPairs(
        by_kind, train_pairs, held, summary, trained_kinds, _kind_warnings(by_kind, request)
    )


def _kind_warnings(by_kind: dict[str, int], request: AdaptRequest) -> list[str]:
    kind = dominant_kind(by_kind)
    if kind is None:
        return []
    total = sum(by_kind.values())
    return [
        f"{kind} pairs are {by_kind[kind] / total:.0%} of the {total} mined: the model learns, "
        f"and the held-out pairs measure, mostly {kind} pairs, which may not be what users ask"
        + ("" if request.judged else "; give the tenant's judged questions with --judged FILE")
    ]


def _guard(
    request: AdaptRequest,
    judged: list[tuple[str, set[str]]] | None,
    mined: MinedPairs,
    chunks: list[Chunk],
) -> Guard | JudgedQuestions:
    """The judged questions when given (``--judged``), else the held-out pairs.

    Raises:
        ConfigError: no judged question names a document indexed for the tenant.
    """
    if judged is None:
        return Guard(mined.held, chunks, request.seed)
    guard = JudgedQuestions(judged, chunks, request.seed)
    if not guard.queries:
        raise ConfigError(
            f"--judged {request.judged}: none of its {len(judged)} questions names a document "
            f"indexed for tenant {request.tenant!r}; push them, or give that tenant's questions"
        )
    if guard.skipped:
        log.warning(
            "--judged %s: %d of %d questions name no document of tenant %r: left out",
            request.judged, guard.skipped, len(judged), request.tenant,
        )  # fmt: skip
    return guard


@dataclass
class Trained:
    """What ``train`` did: examples, steps, and the instructions the model was trained with."""

    examples: int
    without_negatives: int
    steps: int
    instructions: ModelInstructions


def train(
    request: AdaptRequest,
    settings: Settings,
    client: OpenSearch,
    mined: MinedPairs,
    stock: Embedder,
    folder: Path,
    notify: Callable[[str], None],
) -> Trained:
    """The training pairs with their hard negatives, the stock model trained on them and mixed
    with itself (``--mix``), saved to ``folder``."""
    from loader.models.embedding import resolve_model_path, torch_model_path

    examples, without_negatives = with_hard_negatives(
        mined.train, stock, client, settings, request.negatives, request.negative_margin
    )
    base = torch_model_path(settings.embedding_model, resolve_model_path(settings.embedding_model))

    def on_step(step: int, steps: int, loss: float) -> None:
        if step == 1 or step % 10 == 0 or step == steps:
            notify(f"step {step}/{steps}: loss {loss:.4f}")

    instructions = instructions_of(stock)
    trained = fine_tune(base, examples, folder, request.options, on_step, instructions)
    mix_with_base(base, folder, request.mix)
    return Trained(len(examples), without_negatives, trained.steps, instructions)


def keep(
    request: AdaptRequest,
    result: AdaptResult,
    folder: Path,
    instructions: ModelInstructions,
    *,
    base_model: str,
    index_name: str,
) -> None:
    """Write the provenance (the model adapted, the index its pairs were mined from) into
    ``folder`` and move it to ``request.out``."""
    provenance = {
        "base_model": base_model,
        "index": index_name,
        "tenant": request.tenant,
        **result.to_dict(),
        "out": str(request.out),
        "options": asdict(request.options),
        "instructions": asdict(instructions),  # the temperature the options left open
        "held_out_share": request.held_out_share,
        "negatives": request.negatives,
        "negative_margin": request.negative_margin,
        "mix": request.mix,
        "seed": request.seed,
        "judged": str(request.judged) if request.judged else None,
    }
    (folder / PROVENANCE_FILE).write_text(json.dumps(provenance, indent=2) + "\n", "utf-8")
    if request.out.exists():
        request.out.rmdir()  # empty (checked up front): the model takes its place
    folder.rename(request.out)


def _check(request: AdaptRequest) -> None:
    if not 0 < request.held_out_share < 1:
        raise ConfigError(f"--held-out must be between 0 and 1, got {request.held_out_share}")
    if request.max_pairs < 1 or request.negatives < 0:
        raise ConfigError("--max-pairs must be at least 1 and --negatives at least 0")
    if not 0 <= request.negative_margin < 1:
        raise ConfigError(f"--negative-margin must be in [0, 1), got {request.negative_margin}")
    if not 0 < request.mix <= 1:
        raise ConfigError(f"--mix must be in (0, 1], got {request.mix}")
    request.options.check()
    out = Path(request.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"--out {out}: exists and is not an empty folder; give a new one")


def read_chunks(client: OpenSearch, settings: Settings, tenant: str) -> list[Chunk]:
    """Every chunk of ``tenant`` in the index, without vectors.

    Raises:
        IncompatibleIndexError: there is no such index (nothing pushed to learn from).
    """
    from opensearchpy import helpers

    from loader.cluster.client import cluster_errors, safe_url

    with cluster_errors(settings, f"reading the chunks of {settings.index_name!r}"):
        exists = client.indices.exists(index=settings.index_name)
    if not exists:
        raise IncompatibleIndexError(
            f"index {settings.index_name!r} does not exist on {safe_url(settings.opensearch_url)}: "
            "nothing to adapt on; run `loader apply`, then `loader push` the tenant's documents"
        )
    with cluster_errors(settings, f"reading the chunks of {settings.index_name!r}"):
        hits = helpers.scan(
            client,
            index=settings.index_name,
            query={"query": {"term": {"tenant": tenant}}, "_source": CHUNK_FIELDS},
            size=1000,
            preserve_order=False,
        )
        return [Chunk.from_source(hit["_source"]) for hit in hits]


def _sample(pairs: list[Pair], limit: int, seed: int) -> list[Pair]:
    if len(pairs) <= limit:
        return pairs
    return random.Random(seed).sample(pairs, limit)
