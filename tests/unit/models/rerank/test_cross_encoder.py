"""The reranker, on a small CrossEncoder built from the bundled MiniLM weights.

No trained cross-encoder is available offline, so the session builds one with an untrained
(random, then saved) head: its scores are arbitrary but deterministic, which is enough to prove
loading, batching, truncation, reordering and the ONNX export.
"""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from loader.errors import ConfigError, ModelError
from loader.models.rerank import load_reranker
from loader.models.rerank.cross_encoder import ONNX_FILE, ONNX_INT8_FILE, CrossEncoderReranker
from loader.settings import Settings

QUESTION = "Do I get a refund if my order is more than 45 minutes late?"
PASSAGES = [
    "Orders delayed by more than 45 minutes past the promised time qualify for compensation.",
    "Wallet credit expires after 90 days.",
    "You can cancel an order free of charge until the restaurant accepts it.",
    "Refunds for UPI payments usually reach your bank within 48 hours of approval.",
    "If an item is missing or wrong, report it within 2 hours of delivery.",
    "Cash on delivery orders receive wallet credit instead.",
]

needs_onnx = pytest.mark.skipif(
    importlib.util.find_spec("onnxruntime") is None, reason="onnxruntime not installed"
)


@pytest.fixture(scope="session")
def reranker(cross_encoder_path: str) -> CrossEncoderReranker:
    return CrossEncoderReranker(cross_encoder_path, max_tokens=256, batch_size=16)


@pytest.fixture(scope="session")
def onnx_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx-cache")


def test_scores_one_float_per_passage(reranker: CrossEncoderReranker) -> None:
    scores = reranker.rerank(QUESTION, PASSAGES)
    assert len(scores) == len(PASSAGES)
    assert all(isinstance(score, float) for score in scores)
    assert scores == reranker.rerank(QUESTION, PASSAGES)  # deterministic
    assert reranker.rerank(QUESTION, []) == []


def test_batch_size_does_not_change_scores(
    cross_encoder_path: str, reranker: CrossEncoderReranker
) -> None:
    one_by_one = CrossEncoderReranker(cross_encoder_path, max_tokens=256, batch_size=1)
    assert one_by_one.rerank(QUESTION, PASSAGES) == pytest.approx(
        reranker.rerank(QUESTION, PASSAGES), abs=1e-5
    )


def test_reordering_follows_the_passages(reranker: CrossEncoderReranker) -> None:
    scores = reranker.rerank(QUESTION, PASSAGES)
    reversed_scores = reranker.rerank(QUESTION, PASSAGES[::-1])
    assert reversed_scores == pytest.approx(scores[::-1], abs=1e-5)
    ranked = [p for _, p in sorted(zip(scores, PASSAGES, strict=True), reverse=True)]
    assert sorted(ranked) == sorted(PASSAGES)
    assert len(set(scores)) > 1  # the head separates passages: a reorder is observable


def test_max_tokens_truncates_question_plus_passage(cross_encoder_path: str) -> None:
    shared = "Orders delayed by more than 45 minutes past the promised time qualify. " * 4
    passages = [shared + "Refunds go to the card.", shared + "Cash orders get wallet credit."]
    short = CrossEncoderReranker(cross_encoder_path, max_tokens=32)
    first, second = short.rerank(QUESTION, passages)
    assert first == pytest.approx(second, abs=1e-6)  # the differing tails were cut off
    long = CrossEncoderReranker(cross_encoder_path, max_tokens=256)
    first, second = long.rerank(QUESTION, passages)
    assert first != pytest.approx(second, abs=1e-6)


def test_missing_model_is_a_model_error(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-model")
    with pytest.raises(ModelError, match="no-such-model") as error:
        CrossEncoderReranker(missing)
    assert "reranker_model" in str(error.value)


def test_bad_backend_max_tokens_and_batch_size_are_config_errors(cross_encoder_path: str) -> None:
    with pytest.raises(ConfigError, match="rerank_backend"):
        CrossEncoderReranker(cross_encoder_path, backend="tensorflow")
    with pytest.raises(ConfigError, match="rerank_max_tokens"):
        CrossEncoderReranker(cross_encoder_path, max_tokens=0)
    with pytest.raises(ConfigError, match="rerank_batch_size"):
        CrossEncoderReranker(cross_encoder_path, batch_size=0)


def test_load_reranker_is_cached(cross_encoder_path: str) -> None:
    settings = Settings().replace(reranker_model=cross_encoder_path, rerank_max_tokens=128)
    first = load_reranker(settings)
    assert load_reranker(settings) is first
    assert first.max_tokens == 128 and first.backend == "torch"
    assert first.batch_size == settings.rerank_batch_size
    assert load_reranker(settings.replace(rerank_max_tokens=64)) is not first
    assert load_reranker(settings.replace(rerank_batch_size=2)).batch_size == 2


def _rank(scores: list[float]) -> list[int]:
    return list(np.argsort(-np.asarray(scores), kind="stable"))


@needs_onnx
def test_onnx_backend_agrees_with_torch(
    cross_encoder_path: str, reranker: CrossEncoderReranker, onnx_cache: Path
) -> None:
    onnx = CrossEncoderReranker(
        cross_encoder_path, backend="onnx", batch_size=4, cache_dir=onnx_cache
    )
    torch_scores = reranker.rerank(QUESTION, PASSAGES)
    onnx_scores = onnx.rerank(QUESTION, PASSAGES)
    assert onnx_scores == pytest.approx(torch_scores, abs=1e-4)
    assert _rank(onnx_scores) == _rank(torch_scores)


@needs_onnx
def test_onnx_export_happens_once_and_int8_works(
    cross_encoder_path: str, reranker: CrossEncoderReranker, onnx_cache: Path
) -> None:
    CrossEncoderReranker(cross_encoder_path, backend="onnx", cache_dir=onnx_cache)
    (export,) = [p for p in onnx_cache.iterdir() if not p.name.startswith(".")]
    before = (export / ONNX_FILE).stat().st_mtime_ns
    int8 = CrossEncoderReranker(cross_encoder_path, backend="onnx-int8", cache_dir=onnx_cache)
    assert (export / ONNX_FILE).stat().st_mtime_ns == before  # reused, not exported again
    assert (export / ONNX_INT8_FILE).is_file()
    int8_scores = int8.rerank(QUESTION, PASSAGES)
    torch_scores = reranker.rerank(QUESTION, PASSAGES)
    # int8 weights move scores a little; the scores must still track the torch ones. (The
    # untrained head spreads scores by only ~0.01, so this is a loose check, not a quality bar.)
    assert np.corrcoef(int8_scores, torch_scores)[0, 1] > 0.8


@needs_onnx
def test_onnx_export_fuses_attention_and_quantizes_it(
    cross_encoder_path: str, onnx_cache: Path
) -> None:
    import onnx

    CrossEncoderReranker(cross_encoder_path, backend="onnx-int8", cache_dir=onnx_cache)
    (export,) = [p for p in onnx_cache.iterdir() if not p.name.startswith(".")]
    fp32_ops = Counter(node.op_type for node in onnx.load(export / ONNX_FILE).graph.node)
    int8_ops = Counter(node.op_type for node in onnx.load(export / ONNX_INT8_FILE).graph.node)
    # Eager-attention export, fused by onnxruntime: one Attention op per layer (MiniLM-L6 has
    # six), two SkipLayerNormalizations per layer, no NaN guards; int8 quantizes attention too.
    assert fp32_ops["Attention"] == 6 and fp32_ops["SkipLayerNormalization"] == 12
    assert fp32_ops["IsNaN"] == 0
    assert int8_ops["QAttention"] == 6 and int8_ops["MatMulInteger"] > 0


@needs_onnx
def test_onnx_truncation_matches_torch(cross_encoder_path: str, onnx_cache: Path) -> None:
    long_passage = "Orders delayed by more than 45 minutes qualify for compensation. " * 40
    torch_short = CrossEncoderReranker(cross_encoder_path, max_tokens=64)
    onnx_short = CrossEncoderReranker(
        cross_encoder_path, backend="onnx", max_tokens=64, cache_dir=onnx_cache
    )
    assert onnx_short.rerank(QUESTION, [long_passage]) == pytest.approx(
        torch_short.rerank(QUESTION, [long_passage]), abs=1e-4
    )
