"""Fine-tuning an embedding model on judged questions: contrastive, in-batch and hard negatives.

Each example is a question, a passage that answers it and passages that do not (hard negatives:
what the model ranked high but is wrong). A batch of B examples scores every question against
every passage in the batch; the loss is the cross-entropy of picking the question's own
passage (sentence-transformers' MultipleNegativesRankingLoss). The loop is written out here
because sentence-transformers' trainer needs ``datasets`` and ``accelerate`` for what is thirty
lines of torch.

Example::

    examples = [TrainingExample("what do refunds cost", "Refunds are free.", ("Shipping ...",))]
    result = fine_tune("path/to/sentence-transformers-folder", examples, Path("tuned"))
    result.losses[0], result.losses[-1]   # falls as it learns
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from loader.errors import ConfigError
from loader.models.registry import DEFAULT_TRAINING_SCALE, PASSAGE_PROMPT, QUERY_PROMPT
from loader.train import defaults

if TYPE_CHECKING:
    import torch
    from sentence_transformers import SentenceTransformer

    from loader.models.embedding import Embedder


@dataclass(frozen=True)
class TrainingExample:
    question: str
    positive: str
    negatives: tuple[str, ...] = ()


@dataclass(frozen=True)
class FineTuneOptions:
    """How to train. The defaults are what lifted bge-small on SciFact (guide/models.md,
    "Fine-tuning the embedder on judged questions").

    Attributes:
        epochs: passes over the examples.
        learning_rate: AdamW's peak rate, after a linear warm-up over a tenth of the steps and
            before a linear decay to 0. Small: the model is already good; large rates forget.
        batch_size: examples per step; every other passage of the batch is a negative too.
        scale: inverse temperature of the similarities; ``None``: the one the model was
            trained with (``ModelSpec.training_scale``: bge 50, MiniLM 20).
        max_tokens: passages and questions are cut to this many tokens while training.
        seed: shuffling and the choice of each step's hard negative.
    """

    epochs: int = defaults.EPOCHS
    learning_rate: float = defaults.LEARNING_RATE
    batch_size: int = defaults.BATCH_SIZE
    scale: float | None = None
    max_tokens: int = defaults.MAX_TOKENS
    seed: int = defaults.SEED

    def check(self) -> None:
        for name in ("epochs", "batch_size", "max_tokens"):
            if getattr(self, name) < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be at least 1")
        if not 0 < self.learning_rate < 1:
            raise ConfigError(f"--learning-rate must be in (0, 1), got {self.learning_rate}")
        if self.batch_size < 2:
            raise ConfigError("--batch-size must be at least 2: the batch's passages are negatives")
        if self.scale is not None and self.scale <= 0:
            raise ConfigError(f"the similarity scale must be above 0, got {self.scale}")


@dataclass(frozen=True)
class ModelInstructions:
    """The model's own instructions and temperature, kept while training: questions and
    passages are prefixed as search and push prefix them, and the saved folder names the
    instructions (sentence-transformers' ``prompts``), so that it is searched as it was trained.
    """

    query_prefix: str = ""
    passage_prefix: str = ""
    scale: float = DEFAULT_TRAINING_SCALE


def instructions_of(embedder: Embedder) -> ModelInstructions:
    """The instructions ``embedder`` embeds with and the temperature its model was trained at."""
    scale = embedder.spec.training_scale if embedder.spec else DEFAULT_TRAINING_SCALE
    return ModelInstructions(embedder.query_prefix, embedder.passage_prefix, scale)


@dataclass
class FineTuneResult:
    out: Path
    examples: int
    steps: int
    losses: list[float] = field(default_factory=list)  # one per step
    seconds: float = 0.0
    # The mean loss of each epoch. Within the first, every batch is new to the model, so its
    # steps' losses vary with what the batch holds rather than fall.
    epoch_losses: list[float] = field(default_factory=list)


def fine_tune(
    model_path: str,
    examples: Sequence[TrainingExample],
    out: Path,
    options: FineTuneOptions = FineTuneOptions(),
    on_step: Callable[[int, int, float], None] | None = None,
    instructions: ModelInstructions = ModelInstructions(),
) -> FineTuneResult:
    """Train the sentence-transformers model at ``model_path`` on ``examples``; save it to ``out``
    (a sentence-transformers folder any backend loads), keeping the model's own token limit,
    instructions and temperature (``instructions``; ``options.scale`` overrides it).

    ``on_step(step, steps, loss)`` is called after each step.
    """
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as transformers_logging

    options.check()
    if not examples:
        raise ConfigError("no training examples: no question had a judged passage to learn from")
    started = time.perf_counter()
    torch.manual_seed(options.seed)
    shuffler = random.Random(options.seed)
    transformers_logging.disable_progress_bar()  # "Loading weights"
    scale = options.scale or instructions.scale
    model = SentenceTransformer(model_path, device="cpu")
    limit = model.max_seq_length
    model.max_seq_length = min(limit, options.max_tokens)
    steps = options.epochs * math.ceil(len(examples) / options.batch_size)
    optimizer, schedule = _optimizer(model, options.learning_rate, steps)

    # sentence-transformers 6 renamed tokenize to preprocess (the old name warns).
    preprocess = getattr(model, "preprocess", None) or model.tokenize

    def embed(texts: list[str]) -> torch.Tensor:
        return model(dict(preprocess(texts)))["sentence_embedding"]

    result = FineTuneResult(out, len(examples), steps)
    order = list(examples)
    model.train()
    for _ in range(options.epochs):
        shuffler.shuffle(order)
        first_step = len(result.losses)
        for start in range(0, len(order), options.batch_size):
            batch = order[start : start + options.batch_size]
            questions = embed([instructions.query_prefix + e.question for e in batch])
            passages = [e.positive for e in batch]
            passages += [shuffler.choice(e.negatives) for e in batch if e.negatives]
            passages = [instructions.passage_prefix + passage for passage in passages]
            scores = scale * questions @ embed(passages).T
            # Question i's own passage is column i; every other column is a negative.
            loss = torch.nn.functional.cross_entropy(scores, torch.arange(len(batch)))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            result.losses.append(float(loss.item()))
            if on_step is not None:
                on_step(len(result.losses), steps, result.losses[-1])
        epoch = result.losses[first_step:]
        result.epoch_losses.append(sum(epoch) / len(epoch))
    model.eval()
    model.max_seq_length = limit
    _save(model, out, instructions)
    result.seconds = time.perf_counter() - started
    return result


def _optimizer(
    model: SentenceTransformer, learning_rate: float, steps: int
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW, and a schedule that warms up over the first tenth of ``steps``, then decays
    linearly to 0."""
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.01)
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: min((step + 1) / warmup, max(0.0, (steps - step) / max(1, steps - warmup))),
    )
    return optimizer, schedule


def _save(model: SentenceTransformer, out: Path, instructions: ModelInstructions) -> None:
    """Save ``model`` to ``out`` with its instructions as sentence-transformers prompts."""
    from transformers.utils import logging as transformers_logging

    model.prompts = {
        name: prefix
        for name, prefix in (
            (QUERY_PROMPT, instructions.query_prefix),
            (PASSAGE_PROMPT, instructions.passage_prefix),
        )
        if prefix
    }
    # Loading re-enables transformers' bars; saving would draw "Writing model shards".
    transformers_logging.disable_progress_bar()
    model.save(str(out))


def mix_with_base(base_path: str, folder: Path, share: float) -> None:
    """Replace the trained model in ``folder`` by ``share`` of its weights plus ``1 - share`` of
    the base model's (WiSE-FT: Wortsman et al., "Robust fine-tuning of zero-shot models", 2022).

    A few thousand pairs of one kind pull the whole space the base model learnt from far more
    pairs towards them; an average keeps more of the base (both weight sets share a starting
    point, so their average is a model of its own). On SciFact it halved MiniLM's loss from
    adaptation and cost bge part of its gain (guide/models.md), so ``loader adapt`` saves the
    trained model as is unless told otherwise."""
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as transformers_logging

    if share >= 1:
        return
    transformers_logging.disable_progress_bar()
    base = SentenceTransformer(base_path, device="cpu").state_dict()
    trained = SentenceTransformer(str(folder), device="cpu")
    with torch.no_grad():
        mixed = {
            name: (1 - share) * base[name] + share * weights
            if weights.is_floating_point()
            else weights
            for name, weights in trained.state_dict().items()
        }
    trained.load_state_dict(mixed)
    transformers_logging.disable_progress_bar()
    trained.save(str(folder))
