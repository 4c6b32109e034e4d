"""Fine-tuning an embedding model: it learns what the examples teach, saves a folder every
backend loads with the instructions it was trained with, keeps the model's temperature, and
refuses options it cannot train with."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from loader.errors import ConfigError
from loader.models.embedding import Embedder, get_embedder, resolve_model_path
from loader.models.registry import BGE_QUERY_INSTRUCTION, known_spec, spec_from_folder
from loader.train.trainer import (
    FineTuneOptions,
    ModelInstructions,
    TrainingExample,
    fine_tune,
    instructions_of,
    mix_with_base,
)

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


def test_fine_tuning_teaches_what_the_examples_say(tmp_path, monkeypatch, tiny_model):
    """The tiny model (random weights: it knows nothing) learns the six made-up rules: the loss
    falls, each question finds its passage, and the saved folder runs on the ONNX backend too.
    The loop is the same for MiniLM or bge, only slower (15 steps of MiniLM took 1 to 4 minutes
    on two cores)."""
    questions = [q for q, _ in PAIRS]
    passages = [p for _, p in PAIRS]
    base = get_embedder(tiny_model, backend="torch")
    before = _top1(base.embed_queries(questions), base.embed_passages(passages))
    examples = [
        TrainingExample(q, p, tuple(other for other in passages if other != p)) for q, p in PAIRS
    ]
    options = FineTuneOptions(epochs=30, learning_rate=3e-3, batch_size=6, scale=20.0)
    out = tmp_path / "tuned"
    result = fine_tune(tiny_model, examples, out, options)
    assert result.steps == len(result.losses) == len(result.epoch_losses) == 30
    assert np.mean(result.losses[-3:]) < np.mean(result.losses[:3]) / 2

    tuned = get_embedder(str(out), backend="torch")
    after = _top1(tuned.embed_queries(questions), tuned.embed_passages(passages))
    assert before < len(PAIRS) and after == len(PAIRS), (before, after)

    # The saved folder keeps the base model's facts, so the ONNX backends run it too.
    facts = [(s.pooling, s.normalize, s.max_tokens, s.dimension) for s in (base.spec, tuned.spec)]
    assert facts == [("mean", True, 256, 32)] * 2
    assert spec_from_folder(str(out), out) == tuned.spec
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


def test_the_instructions_trained_with_are_the_ones_the_folder_searches_with(tmp_path, tiny_model):
    """A tuned bge keeps its query instruction: saved as the folder's prompt, prefixed again
    when the folder embeds a question (and not when told not to). Mechanics: the tiny model."""
    instructions = ModelInstructions(BGE_QUERY_INSTRUCTION, "", 50.0)
    out = tmp_path / "tuned"
    examples = [TrainingExample(q, p) for q, p in PAIRS[:2]]
    options = FineTuneOptions(batch_size=2)
    fine_tune(tiny_model, examples, out, options, None, instructions)

    tuned = get_embedder(str(out), backend="torch")
    assert (tuned.query_prefix, tuned.passage_prefix) == (BGE_QUERY_INSTRUCTION, "")
    question = PAIRS[0][0]
    by_hand = tuned.model.encode([BGE_QUERY_INSTRUCTION + question], normalize_embeddings=True)
    assert np.allclose(tuned.embed_queries([question]), by_hand, atol=1e-5)
    without = Embedder(str(out), backend="torch", query_instruction=False)
    assert (without.query_prefix, without.passage_prefix) == ("", "")


def test_training_sees_the_instructions_at_the_models_temperature(tmp_path, tiny_model):
    """The first step's loss (same seed, same batch) moves with the instructions' temperature
    and prefixes, and --scale, when given, overrides the temperature. Mechanics: the tiny model."""
    base = tiny_model
    examples = [TrainingExample(q, p) for q, p in PAIRS[:4]]
    runs = iter(range(10))

    def first_loss(instructions, scale=None):
        options = FineTuneOptions(batch_size=4, scale=scale)
        out = tmp_path / f"run{next(runs)}"
        return fine_tune(base, examples, out, options, None, instructions).losses[0]

    at_20 = first_loss(ModelInstructions(scale=20.0))
    assert first_loss(ModelInstructions(scale=50.0), scale=20.0) == pytest.approx(at_20, abs=1e-6)
    assert abs(first_loss(ModelInstructions(scale=50.0)) - at_20) > 1e-3
    assert abs(first_loss(ModelInstructions("Represent: ", "", 20.0)) - at_20) > 1e-3


def test_each_model_is_tuned_at_the_temperature_it_was_trained_with():
    """bge's recipe is temperature 0.02 (scale 50), MiniLM's 1B-pair script scale 20, a model
    the registry does not know sentence-transformers' default (20)."""

    def embedder(spec, query_prefix, passage_prefix):
        return SimpleNamespace(spec=spec, query_prefix=query_prefix, passage_prefix=passage_prefix)

    bge = embedder(known_spec("bge-small-en-v1.5"), "Q ", "")
    minilm = embedder(known_spec("all-MiniLM-L6-v2"), "", "")
    folder = embedder(None, "", "p ")
    assert instructions_of(bge) == ModelInstructions("Q ", "", 50.0)
    assert instructions_of(minilm).scale == 20.0
    assert instructions_of(folder) == ModelInstructions("", "p ", 20.0)
    with pytest.raises(ConfigError, match="scale"):
        FineTuneOptions(scale=0.0).check()


def test_mixing_with_the_base_averages_every_weight(tmp_path, tiny_model):
    """WiSE-FT: the saved model's weights are share · trained + (1 − share) · base, its prompts
    kept; share 1 leaves the trained model as it is. Mechanics: the tiny model."""
    from sentence_transformers import SentenceTransformer

    base = tiny_model
    out = tmp_path / "tuned"
    examples = [TrainingExample(q, p) for q, p in PAIRS]
    options = FineTuneOptions(batch_size=3, learning_rate=1e-3)
    fine_tune(base, examples, out, options, None, ModelInstructions("q: ", "", 20.0))

    def weights(folder):
        return SentenceTransformer(str(folder), device="cpu").state_dict()

    before, stock = weights(out), weights(base)
    mix_with_base(base, out, 1.0)
    assert all((weights(out)[name] == before[name]).all() for name in before)
    mix_with_base(base, out, 0.25)
    after = weights(out)
    moved = [name for name in before if before[name].is_floating_point()
             and not (before[name] == stock[name]).all()]  # fmt: skip
    assert moved  # training changed the model, so the mix is not trivially the base
    for name in moved:
        expected = 0.25 * before[name] + 0.75 * stock[name]
        assert np.allclose(after[name].numpy(), expected.numpy(), atol=1e-6), name
    assert get_embedder(str(out), backend="torch").query_prefix == "q: "
