"""`loader adapt`: fine-tune the embedding model on the corpus alone, kept only when it helps.

A team rarely has judged questions; every team has its documents. The pairs come from the
structure of one tenant's chunks as the index holds them (``loader.train.pairs``: heading and
section, title and body, a sentence and its chunk without it), the hard negatives from the index
(the stock model's nearest chunks of other documents, within the tenant, less those it scores
nearly as high as the pair's own passage: likely right answers). Whole documents' pairs
are held aside; the model is trained on the rest with ``loader fine-tune``'s loop
(``loader.train.trainer``, keeping the model's instructions and temperature), its weights are
averaged with the stock model's (``mix``, WiSE-FT), then both models rank the held-out pairs'
passages for their queries. The adapted model is written to ``out`` only when its gain in
MRR@10 there is above ``min_gain`` with 95 % confidence (the lower bound of a paired bootstrap
over the queries), so that a gain within the noise of a few hundred queries keeps the stock
model; otherwise nothing is written and the result says why.

It reads the index and the model, nothing else: no questions, no judgments. Searching with the
adapted model is a new index version, as any model change (``embedding_model = "<out>"``, then
``loader apply`` and ``loader push``).

Example::

    result = adapt_embedder(AdaptRequest(out=Path("models/adapted"), tenant="acme"), settings)
    result.adopted, result.stock_mrr, result.adapted_mrr   # (True, 0.61, 0.68)
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from loader.errors import ConfigError, IncompatibleIndexError
from loader.resolve import resolve_tenant
from loader.train import defaults
from loader.train.pairs import PAIR_KINDS, Chunk, Pair, mine_pairs, split_by_document
from loader.train.trainer import (
    FineTuneOptions,
    TrainingExample,
    fine_tune,
    instructions_of,
    mix_with_base,
)

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

    from loader.models.embedding import Embedder
    from loader.settings import Settings

# Written into the adapted model's folder: what it was trained from and what it measured.
PROVENANCE_FILE = "loader_adapt.json"
CHUNK_FIELDS = [
    "tenant", "doc_id", "chunk_id", "title", "heading_path", "section_id", "position", "body",
    "content",
]  # fmt: skip
# The held-out measure ranks each query's positive among this many passages at most (its own
# documents' and others'): enough to tell the models apart, cheap to embed twice.
GUARD_POOL = 3000
GUARD_QUERIES = 600
MRR_DEPTH = 10
# The paired bootstrap of the gain: resamples of the held-out queries, and the one-sided level.
BOOTSTRAP_SAMPLES = 2000
CONFIDENCE = 0.95
# A chunk of another document that the stock model scores within 5 % of a pair's own passage is
# as likely another right answer as a wrong one; training it away teaches the model to push
# relevant passages apart. Such candidates are skipped (NV-Retriever's "TopK-PercPos", Moreira et
# al. 2024; sentence-transformers' mine_hard_negatives(relative_margin=0.05)). On SciFact every
# other document's chunk among the nearest was within it for 27 % (MiniLM) and 35 % (bge) of the
# pairs, which then learn from the rest of their batch alone.
NEGATIVE_MARGIN = defaults.NEGATIVE_MARGIN


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
    """Mine pairs from the tenant's chunks, train, measure on the held-out pairs, keep or not.

    Raises:
        ConfigError: a bad option, an ``out`` that holds files, a tenant with too few pairs.
        ClusterError, ModelError: the cluster or a model failed; ModelError also when the
            ``torch`` extra is not installed.
    """
    from loader.cluster.client import connect, require_cluster
    from loader.models.embedding import embedder_for, resolve_model_path, torch_model_path
    from loader.models.torch_extra import require_torch_extra

    notify = on_event or (lambda line: None)
    _check(request)
    request = replace(request, tenant=resolve_tenant(settings, request.tenant))
    require_torch_extra("loader adapt")
    if client is None:
        client = connect(settings)
        require_cluster(client, settings)  # a cluster that is down is named before any model
    started = time.perf_counter()
    chunks = read_chunks(client, settings, request.tenant)
    pairs = mine_pairs(chunks, seed=request.seed)
    by_kind = {kind: sum(pair.kind == kind for pair in pairs) for kind in PAIR_KINDS}
    train, held = split_by_document(pairs, request.held_out_share, seed=request.seed)
    train = _sample(train, request.max_pairs, request.seed)
    notify(
        f"{len(chunks)} chunks of tenant {request.tenant!r} in {settings.index_name!r}: "
        f"{len(pairs)} pairs ({', '.join(f'{n} {kind}' for kind, n in by_kind.items())}); "
        f"{len(train)} to train on, {len(held)} held out"
    )
    if len(train) < request.options.batch_size or not held:
        raise ConfigError(
            f"tenant {request.tenant!r} of {settings.index_name!r} gives {len(pairs)} pairs "
            f"({len(train)} to train on, {len(held)} held out): too few to adapt on; push more "
            "documents, or lower --batch-size"
        )
    stock = embedder_for(settings)
    examples, without_negatives = _with_negatives(
        train, stock, client, settings, request.negatives, request.negative_margin
    )
    guard = Guard(held, chunks, request.seed)
    stock_ranks = guard.reciprocal_ranks(stock)
    stock_mrr = float(stock_ranks.mean())
    notify(f"held-out MRR@{MRR_DEPTH} of the stock model: {stock_mrr:.4f}")
    base = torch_model_path(settings.embedding_model, resolve_model_path(settings.embedding_model))
    request.out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".adapt-", dir=request.out.parent))
    try:

        def on_step(step: int, steps: int, loss: float) -> None:
            if step == 1 or step % 10 == 0 or step == steps:
                notify(f"step {step}/{steps}: loss {loss:.4f}")

        instructions = instructions_of(stock)
        trained = fine_tune(base, examples, staging, request.options, on_step, instructions)
        mix_with_base(base, staging, request.mix)
        adapted = embedder_for(settings.replace(embedding_model=str(staging)))
        adapted_ranks = guard.reciprocal_ranks(adapted)
        lower = gain_lower_bound(stock_ranks, adapted_ranks, request.seed)
        adopted = lower > request.min_gain
        adapted_mrr = float(adapted_ranks.mean())
        verdict = "better than" if adopted else "not surely better than"
        reason = (
            f"held-out MRR@{MRR_DEPTH} {adapted_mrr:.4f} adapted against {stock_mrr:.4f} stock "
            f"(gain {adapted_mrr - stock_mrr:+.4f}, above {lower:+.4f} with 95 % confidence): "
            f"{verdict} the stock model by more than {request.min_gain}"
        )
        result = AdaptResult(
            adopted, request.out if adopted else None, by_kind, len(examples), without_negatives,
            len(held),
            stock_mrr, adapted_mrr, lower, trained.steps, time.perf_counter() - started, reason,
        )  # fmt: skip
        if adopted:
            provenance = {
                "base_model": settings.embedding_model,
                "index": settings.index_name,
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
            }
            (staging / PROVENANCE_FILE).write_text(json.dumps(provenance, indent=2) + "\n", "utf-8")
            if request.out.exists():
                request.out.rmdir()  # empty (checked up front): the model takes its place
            staging.rename(request.out)
        return result
    finally:
        shutil.rmtree(staging, ignore_errors=True)


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


def _with_negatives(
    pairs: list[Pair],
    embedder: Embedder,
    client: OpenSearch,
    settings: Settings,
    negatives: int,
    margin: float,
) -> tuple[list[TrainingExample], int]:
    """Each pair with the stock model's nearest chunks of other documents of its tenant, less
    those scored too close to the pair's own passage to be wrong (``wrong_candidates``); and how
    many pairs were left with none."""
    if negatives == 0:
        return [TrainingExample(pair.query, pair.positive) for pair in pairs], 0
    from loader.cluster.client import cluster_errors

    vectors = embedder.embed_queries([pair.query for pair in pairs])
    queries = _unit(vectors)
    positives = _unit(embedder.embed_passages([pair.positive for pair in pairs]))
    examples = []
    without = 0
    k = negatives + 10  # a document's own chunks come first; look past them
    for start in range(0, len(pairs), 100):
        batch = pairs[start : start + 100]
        lines: list[dict[str, Any]] = []
        for pair, vector in zip(batch, vectors[start : start + 100], strict=True):
            tenant = {"term": {"tenant": pair.tenant}}
            knn = {"vector": vector.tolist(), "k": k, "filter": tenant}
            lines += [{}, {"size": k, "_source": ["doc_id", "content", "embedding"],
                           "query": {"knn": {"embedding": knn}}}]  # fmt: skip
        with cluster_errors(settings, f"mining hard negatives from {settings.index_name!r}"):
            responses = client.msearch(index=settings.index_name, body=lines)["responses"]
        for i, (pair, response) in enumerate(zip(batch, responses, strict=True), start):
            hits = response.get("hits", {}).get("hits", [])
            others = [h["_source"] for h in hits if h["_source"]["doc_id"] != pair.doc_id]
            kept = []
            if others:
                found = np.array([source["embedding"] for source in others], dtype=np.float32)
                kept = wrong_candidates(queries[i], positives[i], _unit(found), margin)[:negatives]
            without += not kept
            negatives_of_pair = tuple(others[j]["content"] for j in kept)
            examples.append(TrainingExample(pair.query, pair.positive, negatives_of_pair))
    return examples, without


def wrong_candidates(
    query: np.ndarray, positive: np.ndarray, candidates: np.ndarray, margin: float
) -> list[int]:
    """Which ``candidates`` (rows, unit vectors, nearest first) can serve as the query's
    negatives: those whose cosine to ``query`` is below the positive's by at least ``margin`` of
    its magnitude (sentence-transformers' ``relative_margin``).

    >>> q, pos = np.array([1.0, 0.0]), np.array([0.8, 0.6])          # cosine 0.8
    >>> wrong_candidates(q, pos, np.array([[0.9, 0.436], [0.7, 0.714]]), 0.05)
    [1]
    """
    positive_score = float(query @ positive)
    ceiling = positive_score - abs(positive_score) * margin
    return [int(j) for j in np.flatnonzero(candidates @ query <= ceiling)]


class Guard:
    """The held-out measure: each held-out query's positive ranked among the held-out passages
    and other chunks (``GUARD_POOL`` at most), by a model's cosine; MRR@10 over the queries.

    The chunks the queries were cut from are not among the others: each holds its query word
    for word (its sentence, or its heading and title in the prefix), so it would outrank the
    positive for both models and the measure would tell them apart on noise."""

    def __init__(self, held: list[Pair], chunks: list[Chunk], seed: int) -> None:
        rng = random.Random(seed)
        self.pairs = held if len(held) <= GUARD_QUERIES else rng.sample(held, GUARD_QUERIES)
        positives = list(dict.fromkeys(pair.positive for pair in self.pairs))
        tenants = {pair.tenant for pair in self.pairs}
        sources = {(pair.tenant, pair.chunk_id) for pair in self.pairs}
        others = [
            c.content
            for c in chunks
            if c.tenant in tenants
            and (c.tenant, c.chunk_id) not in sources
            and c.content not in positives
        ]
        room = max(0, GUARD_POOL - len(positives))
        self.passages = positives + (others if len(others) <= room else rng.sample(others, room))
        where = {text: i for i, text in enumerate(self.passages)}
        self.targets = np.array([where[pair.positive] for pair in self.pairs])

    def reciprocal_ranks(self, embedder: Embedder) -> np.ndarray:
        """Each query's reciprocal rank of its positive (0 below rank ``MRR_DEPTH``); their
        mean is the MRR@10."""
        queries = _unit(embedder.embed_queries([pair.query for pair in self.pairs]))
        passages = _unit(embedder.embed_passages(self.passages))
        scores = queries @ passages.T
        own = scores[np.arange(len(self.pairs)), self.targets]
        ranks = 1 + (scores > own[:, None]).sum(axis=1)
        return np.where(ranks <= MRR_DEPTH, 1.0 / ranks, 0.0)


def gain_lower_bound(stock: np.ndarray, adapted: np.ndarray, seed: int) -> float:
    """The gain in mean reciprocal rank that the adapted model beats with 95 % confidence: the
    5th percentile of the mean per-query difference over bootstrap resamples of the queries
    (paired: both models are scored on the same resampled queries).

    >>> gain_lower_bound(np.array([0.5, 0.5, 1.0]), np.array([0.5, 0.5, 1.0]), seed=0)
    0.0
    """
    differences = adapted - stock
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(differences), size=(BOOTSTRAP_SAMPLES, len(differences)))
    return float(np.quantile(differences[picks].mean(axis=1), 1 - CONFIDENCE))


def _unit(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1: cosine, whatever the model's own normalisation."""
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
