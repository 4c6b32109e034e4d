"""`loader fine-tune`: adapt the embedding model to a corpus with its judged train questions.

The examples come from the corpus as the loader indexes it, so the model learns the passages it
will embed (chunks with their heading prefix):

1. the dataset's documents are pushed into the index `loader eval` uses for them (the same alias,
   so an earlier eval's index is reused and nothing is embedded again);
2. per train question, the vector side's top ``candidates`` chunks. The positive of each
   judged-relevant document is its chunk closest to the question; the hard negatives are the
   best-ranked chunks of documents not judged relevant, one per document;
3. ``loader.train.trainer`` trains the configured model on them and saves a
   sentence-transformers folder; ``embedding_model = "<out>"`` then pushes and searches with it.

The questions and passages are learnt as written, without instructions: the saved folder is not
in the registry, so the loader embeds with it without prefixes too. The test split is refused.

Example::

    request = FineTuneRequest(dataset="../shared/datasets/scifact", out=Path("scifact-bge"))
    result = fine_tune_embedder(request, settings)   # settings: the model to start from
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from loader.errors import ConfigError
from loader.eval.configs import EvalConfig
from loader.eval.indexes import EVAL_TENANT, EvalIndexes
from loader.eval.tasks import EvalTask, load_task
from loader.train import defaults
from loader.train.trainer import (
    FineTuneOptions,
    FineTuneResult,
    TrainingExample,
    fine_tune,
    instructions_of,
)

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

    from loader.models.embedding import Embedder
    from loader.settings import Settings

# Written into the saved folder: what the model was trained from, on what, and how.
PROVENANCE_FILE = "loader_fine_tune.json"


@dataclass(frozen=True)
class FineTuneRequest:
    """What `loader fine-tune` was asked for (its options, by name)."""

    dataset: str | Path
    out: Path
    split: str = defaults.SPLIT
    test_split: str = defaults.TEST_SPLIT
    candidates: int = defaults.CANDIDATES
    negatives: int = defaults.FINE_TUNE_NEGATIVES
    limit: int | None = None
    index_prefix: str = defaults.INDEX_PREFIX
    options: FineTuneOptions = field(default_factory=FineTuneOptions)


@dataclass
class MinedExamples:
    examples: list[TrainingExample]
    questions: int
    skipped: int  # questions none of whose relevant documents is in the index


def fine_tune_embedder(
    request: FineTuneRequest,
    settings: Settings,
    *,
    client: OpenSearch | None = None,
    show_progress: bool = False,
    on_event: Callable[[str], None] | None = None,
) -> FineTuneResult:
    """Mine examples from the train split, train the settings' model, save it to ``out``.

    Raises:
        ConfigError: the test split, a bad option, an ``out`` folder that holds files, a dataset
            that is not a BEIR folder.
        InputError: the dataset or its split is missing.
        ClusterError, ModelError: as raised by apply, push and search; ModelError also when
            the ``torch`` extra is not installed.
    """
    from loader.cluster.client import connect, require_cluster
    from loader.models.torch_extra import require_torch_extra

    notify = on_event or (lambda line: None)
    _check(request)
    require_torch_extra("loader fine-tune")  # before the push of its corpus, not after
    task = load_task(request.dataset, split=request.split, limit=request.limit)
    if task.kind != "beir":
        raise ConfigError("fine-tune needs a BEIR folder (corpus, queries, qrels/<split>.tsv)")
    if client is None:
        client = connect(settings)
        require_cluster(client, settings)  # a cluster that is down is named before any model
    indexes = EvalIndexes(
        task, settings, client, request.index_prefix, show_progress=show_progress, notify=notify
    )
    run_settings = indexes.prepare(EvalConfig(settings.chunk_strategy, "vector"))
    from loader.models.embedding import embedder_for, resolve_model_path, torch_model_path

    embedder = embedder_for(run_settings)
    started = time.perf_counter()
    mined = mine_examples(
        task, run_settings, client, embedder, request.candidates, request.negatives
    )
    notify(
        f"{request.split}: {len(mined.examples)} examples from {mined.questions} questions "
        f"({mined.skipped} skipped: no relevant document indexed) in "
        f"{time.perf_counter() - started:.1f} s"
    )
    base = torch_model_path(settings.embedding_model, resolve_model_path(settings.embedding_model))

    def on_step(step: int, steps: int, loss: float) -> None:
        if step == 1 or step % 10 == 0 or step == steps:
            notify(f"step {step}/{steps}: loss {loss:.4f}")

    instructions = instructions_of(embedder)
    result = fine_tune(base, mined.examples, request.out, request.options, on_step, instructions)
    provenance = {
        "base_model": settings.embedding_model,
        "dataset": str(request.dataset),
        "split": request.split,
        "questions": mined.questions,
        "examples": result.examples,
        "steps": result.steps,
        "epoch_losses": [round(loss, 4) for loss in result.epoch_losses],
        "seconds": round(result.seconds, 1),
        "options": asdict(request.options),
        "instructions": asdict(instructions),  # the temperature the options left open
        "mined_from": run_settings.index_name,
    }
    (request.out / PROVENANCE_FILE).write_text(json.dumps(provenance, indent=2) + "\n", "utf-8")
    return result


def _check(request: FineTuneRequest) -> None:
    if request.split == request.test_split:
        raise ConfigError(
            f"--split {request.split}: fine-tuning on the split eval measures would grade the "
            "model on questions it learnt"
        )
    if request.candidates < 1 or request.negatives < 0:
        raise ConfigError("--candidates must be at least 1 and --negatives at least 0")
    request.options.check()
    out = Path(request.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"--out {out}: exists and is not an empty folder; give a new one")


def mine_examples(
    task: EvalTask,
    settings: Settings,
    client: OpenSearch,
    embedder: Embedder,
    candidates: int,
    negatives: int,
) -> MinedExamples:
    """Per question of ``task``: one example per judged-relevant document found in the index
    (its chunk closest to the question), with the top chunks of other documents as negatives."""
    questions = [q for q in task.queries if any(g > 0 for g in task.qrels.get(q.id, {}).values())]
    vectors = embedder.embed_queries([q.text for q in questions])
    mined = MinedExamples([], len(questions), 0)
    for question, vector in zip(questions, vectors, strict=True):
        relevant = {doc for doc, grade in task.qrels[question.id].items() if grade > 0}
        hits = _search(client, settings, _nearest(vector.tolist(), candidates))
        hard: list[str] = []
        seen: set[str] = set()
        for hit in hits:
            source = hit["_source"]["source"]
            if source not in relevant and source not in seen and len(hard) < negatives:
                seen.add(source)
                hard.append(hit["_source"]["content"])
        found = 0
        for doc in sorted(relevant):
            chunks = _search(client, settings, _chunks_of(doc))
            if not chunks:
                continue
            best = max(chunks, key=lambda hit: float(np.dot(vector, hit["_source"]["embedding"])))
            mined.examples.append(
                TrainingExample(question.text, best["_source"]["content"], tuple(hard))
            )
            found += 1
        mined.skipped += found == 0
    return mined


def _nearest(vector: list[float], k: int) -> dict[str, Any]:
    return {
        "size": k,
        "_source": ["source", "content"],
        "query": {"knn": {"embedding": {"vector": vector, "k": k, "filter": _eval_tenant()}}},
    }


def _chunks_of(doc: str) -> dict[str, Any]:
    return {
        "size": 100,
        "_source": ["content", "embedding"],
        "query": {"bool": {"filter": [_eval_tenant(), {"term": {"source": doc}}]}},
    }


def _eval_tenant() -> dict[str, Any]:
    return {"term": {"tenant": EVAL_TENANT}}


def _search(client: OpenSearch, settings: Settings, body: dict[str, Any]) -> list[dict[str, Any]]:
    from loader.cluster.client import cluster_errors

    with cluster_errors(settings, f"mining training examples from {settings.index_name!r}"):
        return client.search(index=settings.index_name, body=body)["hits"]["hits"]
