"""Fine-tuning an embedding model: it learns what the examples teach, saves a folder every
backend loads, and refuses options it cannot train with."""

from __future__ import annotations

import numpy as np
import pytest

from loader.errors import ConfigError
from loader.models.embedding import get_embedder, resolve_model_path
from loader.models.finetune import FineTuneOptions, TrainingExample, fine_tune
from loader.models.registry import spec_from_folder

# Made-up code words no pretrained model links to these passages: only training can.
PAIRS = [
    ("what does rule ZORBLAT say", "Refunds are paid back within five working days."),
    ("what does rule KWEMPH say", "Parcels above 30 kg travel by freight, never by courier."),
    ("what does rule FLINDER say", "Printers show E1043 when the paper tray is empty."),
    ("what does rule BRASK say", "Invoices are sent on the first day of every month."),
    ("what does rule QUOLL say", "Support answers within four hours on working days."),
    ("what does rule THRIMBLE say", "Passwords expire after ninety days and cannot be reused."),
]


def _top1(vectors_q: np.ndarray, vectors_p: np.ndarray) -> int:
    return int(((vectors_q @ vectors_p.T).argmax(axis=1) == np.arange(len(PAIRS))).sum())


def test_fine_tuning_teaches_what_the_examples_say(tmp_path, monkeypatch):
    questions = [q for q, _ in PAIRS]
    passages = [p for _, p in PAIRS]
    base = get_embedder("all-MiniLM-L6-v2", backend="torch")
    before = _top1(base.embed_queries(questions), base.embed_passages(passages))
    examples = [
        TrainingExample(q, p, tuple(other for other in passages if other != p)) for q, p in PAIRS
    ]
    options = FineTuneOptions(epochs=15, learning_rate=1e-4, batch_size=6, scale=20.0)
    out = tmp_path / "tuned"
    result = fine_tune(resolve_model_path("all-MiniLM-L6-v2"), examples, out, options)
    assert result.steps == len(result.losses) == len(result.epoch_losses) == 15
    assert np.mean(result.losses[-3:]) < np.mean(result.losses[:3]) / 2

    tuned = get_embedder(str(out), backend="torch")
    after = _top1(tuned.embed_queries(questions), tuned.embed_passages(passages))
    assert before < len(PAIRS) and after == len(PAIRS), (before, after)

    # The saved folder keeps the base model's facts, so the ONNX backends run it too.
    spec = spec_from_folder(str(out), out)
    assert (spec.pooling, spec.normalize, spec.max_tokens, spec.dimension) == (
        "mean",
        True,
        256,
        384,
    )
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the ONNX export's cache
    onnx_vectors = get_embedder(str(out), backend="onnx").embed_passages(passages)
    cosines = (onnx_vectors * tuned.embed_passages(passages)).sum(axis=1)
    assert cosines.min() >= 0.999


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (FineTuneOptions(epochs=0), "--epochs"),
        (FineTuneOptions(batch_size=1), "--batch-size"),
        (FineTuneOptions(learning_rate=0), "--learning-rate"),
        (FineTuneOptions(max_tokens=0), "--max-tokens"),
    ],
)
def test_options_it_cannot_train_with_are_refused(tmp_path, options, named):
    example = TrainingExample("q", "p")
    with pytest.raises(ConfigError, match=named):
        fine_tune(resolve_model_path("all-MiniLM-L6-v2"), [example], tmp_path / "out", options)
    assert not (tmp_path / "out").exists()


def test_no_examples_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="no training examples"):
        fine_tune(resolve_model_path("all-MiniLM-L6-v2"), [], tmp_path / "out")
