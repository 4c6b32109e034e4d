"""The embedding backends: ONNX agrees with torch, int8 with fp32, instructions go where the
model's spec says (bge: questions only), and the int8 copy is made once."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from loader.eval.configs import parse_sweep
from loader.models import onnx_embedding
from loader.models.embedding import embedder_for, get_embedder
from loader.models.registry import BGE_QUERY_INSTRUCTION, effective_prefixes
from loader.settings import Settings

TEXTS = [
    "Refunds for late deliveries are paid back within five working days.",
    "what does printer error E1043 mean",
    "Mitochondria are the powerhouse of the cell; " * 60,  # truncated by every backend
    "ok",
]


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.mark.parametrize("model", ["all-MiniLM-L6-v2", "bge-small-en-v1.5"])
def test_onnx_and_torch_vectors_agree(model):
    # bge's torch weights are read out of its ONNX file (torch_weights); MiniLM's ONNX file is
    # written from its safetensors weights (bert_onnx): either way round, one network.
    torch_vectors = get_embedder(model, backend="torch").embed_passages(TEXTS)
    onnx_vectors = get_embedder(model, backend="onnx").embed_passages(TEXTS)
    assert onnx_vectors.shape == torch_vectors.shape == (len(TEXTS), 384)
    assert _cosines(onnx_vectors, torch_vectors).min() >= 0.999
    assert np.allclose(np.linalg.norm(onnx_vectors, axis=1), 1.0, atol=1e-5)


def test_minilm_onnx_file_has_plain_attention():
    # SDPA attention traced with IsNaN/Where guards over every score tensor (1.29 x slower here).
    import onnx

    from loader.models.embedding import onnx_model_file, resolve_model_path

    path = onnx_model_file("all-MiniLM-L6-v2", resolve_model_path("all-MiniLM-L6-v2"), "onnx")
    ops = {node.op_type for node in onnx.load(str(path)).graph.node}
    assert "Softmax" in ops and "IsNaN" not in ops


# Measured on these texts in one batch: bge 0.995-0.998; MiniLM 0.995-0.996, but 0.969 for "ok"
# padded to the long text's 256 tokens (dynamic quantization takes each activation's range over
# the padding too; batches sorted by length rarely pad that much). On 500 SciFact passages:
# MiniLM mean 0.9950, min 0.9915; bge mean 0.9985, min 0.9974 (benchmarks/bench_embedding.py).
@pytest.mark.parametrize(
    ("model", "lowest", "mean"),
    [("all-MiniLM-L6-v2", 0.96, 0.985), ("bge-small-en-v1.5", 0.99, 0.995)],
)
def test_int8_vectors_stay_close_to_fp32(model, lowest, mean):
    fp32 = get_embedder(model, backend="onnx").embed_passages(TEXTS)
    int8 = get_embedder(model, backend="onnx-int8").embed_passages(TEXTS)
    cosines = _cosines(int8, fp32)
    assert cosines.min() >= lowest and cosines.mean() >= mean, cosines


def test_bge_prefixes_questions_only():
    bge = get_embedder("bge-small-en-v1.5", backend="onnx")
    assert (bge.query_prefix, bge.passage_prefix) == (BGE_QUERY_INSTRUCTION, "")
    question = "how long do refunds take"
    as_query = bge.embed_queries([question])
    assert np.allclose(as_query, bge.embed_passages([BGE_QUERY_INSTRUCTION + question]), atol=1e-6)
    assert _cosines(as_query, bge.embed_passages([question]))[0] < 0.999
    assert bge.max_text_tokens == 510  # 512 positions less [CLS] and [SEP]


def test_prefix_settings_override_the_models_own():
    e5_like = get_embedder(
        "all-MiniLM-L6-v2", backend="onnx", query_prefix="query: ", passage_prefix="passage: "
    )
    plain = get_embedder("all-MiniLM-L6-v2", backend="onnx")
    assert np.allclose(e5_like.embed_queries(["refund"]), plain.embed_passages(["query: refund"]))
    assert np.allclose(
        e5_like.embed_passages(["refund"]), plain.embed_passages(["passage: refund"])
    )
    # The passage instruction takes positions of the model's 256.
    assert e5_like.max_text_tokens == plain.max_text_tokens - plain.count_tokens("passage: ")
    assert plain.query_prefix == plain.passage_prefix == ""
    bge = Settings(embedding_model="bge-small-en-v1.5")
    assert effective_prefixes(bge) == (BGE_QUERY_INSTRUCTION, "")
    assert effective_prefixes(bge.replace(query_prefix="query: ")) == ("query: ", "")


def test_query_instruction_off_embeds_questions_as_written():
    settings = Settings(embedding_model="bge-small-en-v1.5", query_instruction=False)
    assert effective_prefixes(settings) == ("", "")
    assert effective_prefixes(settings.replace(query_prefix="query: ")) == ("", "")
    plain = embedder_for(settings)
    assert plain.query_prefix == ""
    assert embedder_for(settings.replace(query_instruction=True)).query_prefix != ""
    question = "how long do refunds take"
    assert np.allclose(plain.embed_queries([question]), plain.embed_passages([question]), atol=1e-6)
    # Only questions change: a sweep of it searches the same index.
    assert not parse_sweep("query_instruction=true,false").changes_index


def test_bge_counts_its_own_tokens():
    bge = get_embedder("bge-small-en-v1.5", backend="onnx")
    minilm = get_embedder("all-MiniLM-L6-v2", backend="onnx")
    assert bge.dimension == minilm.dimension == 384
    assert bge.count_tokens("refund policy") == 3  # ref ##und policy, no special tokens
    assert bge.max_seq_length == 512 and minilm.max_seq_length == 256


def _tiny_onnx(path):
    """A one-MatMul ONNX model, big enough for the quantizer to touch its weight."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.random.default_rng(0).random((64, 64), "float32"), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
        [weight],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))


# The recipe is in the name: a copy quantized by an earlier recipe is never picked up.
INT8_NAME = "model_int8-dynamic-s8-per-channel-reduce-range.onnx"


def test_int8_is_made_once_and_kept_beside_fp32(tmp_path, monkeypatch):
    fp32 = tmp_path / "model.onnx"
    _tiny_onnx(fp32)
    int8 = onnx_embedding.quantized(fp32)
    assert int8 == tmp_path / INT8_NAME and int8.is_file()
    made = int8.stat().st_mtime_ns
    import onnxruntime.quantization

    def refuse(*args, **kwargs):
        raise AssertionError("quantized a second time")

    monkeypatch.setattr(onnxruntime.quantization, "quantize_dynamic", refuse)
    assert onnx_embedding.quantized(fp32) == int8
    assert int8.stat().st_mtime_ns == made
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "model.onnx",
        INT8_NAME,
    ]


def test_quantizing_leaves_another_quantization_in_flight_alone(tmp_path):
    # The quantizer's shape-inferred copy of its input is written beside the input and deleted
    # after. Another process quantizing the same file at this moment has its copy there: it must
    # survive (it was overwritten and deleted, and that process failed "cannot quantize").
    fp32 = tmp_path / "model.onnx"
    _tiny_onnx(fp32)
    in_flight = tmp_path / "model-inferred.onnx"
    in_flight.write_bytes(b"another process's shape-inferred copy")
    assert onnx_embedding.quantized(fp32).is_file()
    assert in_flight.read_bytes() == b"another process's shape-inferred copy"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "model-inferred.onnx",
        "model.onnx",
        INT8_NAME,
    ]


def test_batches_hold_similar_lengths_within_the_token_budget():
    lengths = [5, 300, 40, 512, 41, 600, 39]
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    batches = onnx_embedding._batches(order, lengths, batch_size=3)
    assert [i for batch in batches for i in batch] == order  # every text once, in length order
    for batch in batches:
        assert len(batch) <= 3
        # The longest text sets the padding; one text alone may exceed the budget.
        assert len(batch) == 1 or len(batch) * lengths[batch[-1]] <= onnx_embedding.BATCH_TOKENS
    assert [lengths[i] for i in batches[0]] == [5, 39, 40]  # cut by count
    assert [len(batch) for batch in batches[-2:]] == [1, 1]  # 512 and 600 tokens: one each


def test_quantizing_prints_no_pre_processing_advice(tmp_path, caplog):
    _tiny_onnx(tmp_path / "model.onnx")
    with caplog.at_level("WARNING"):
        onnx_embedding.quantized(tmp_path / "model.onnx")
    assert not [r for r in caplog.records if "pre-processing" in r.getMessage()]
    assert onnx_embedding._no_pre_processing_advice not in logging.getLogger().filters


def test_int8_agreement_is_measured_once_per_cpu_and_within_the_bound(monkeypatch):
    from loader.models import embedding

    settings = Settings(embedding_model="bge-small-en-v1.5", embedding_backend="onnx-int8")
    lowest = embedding.int8_agreement(settings.embedding_model)
    assert lowest >= embedding.INT8_LOWEST_COSINE["bge-small-en-v1.5"], lowest
    assert embedding.int8_cpu_warning(settings.embedding_model, lowest) is None

    def refuse(*args, **kwargs):
        raise AssertionError("measured a second time on the same CPU")

    monkeypatch.setattr(embedding, "get_embedder", refuse)
    assert (
        embedding.int8_agreement(settings.embedding_model) == lowest
    )  # read back from beside the int8 file


def test_a_cpu_whose_int8_vectors_stray_is_warned_about():
    from loader.models.embedding import int8_cpu_warning

    # The full-range recipe's lowest cosine on an AVX2-only CPU (qemu -cpu Haswell).
    warning = int8_cpu_warning("bge-small-en-v1.5", 0.9765)
    assert warning is not None
    assert "agree with fp32 only to a cosine of 0.9765, below the 0.99" in warning
    assert warning.endswith("set embedding_backend=onnx")
    assert int8_cpu_warning("bge-small-en-v1.5", 0.9933) is None
