"""The BERT encoder written to ONNX from safetensors weights (no torch) is the network
sentence-transformers and transformers run: the same vectors, padded or not, through the project's
ONNX backend; the interface ml-commons reads; and a clear error for what it cannot write."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from loader.errors import ModelError
from loader.models import onnx_embedding
from loader.models.bert_onnx import INPUTS, IR_VERSION, OPSET, OUTPUT, write_bert_onnx
from loader.models.embedding import get_embedder, onnx_model_file, resolve_model_path
from loader.models.onnx_file import local_onnx_export
from tests.paths import REPO

MINILM = "all-MiniLM-L6-v2"
# Varied on purpose: one word, digits, accents and emoji, code, spaces, and a text far past the
# model's 256 positions (truncated by both sides).
TEXTS = [
    "Refunds for late deliveries are paid back within five working days.",
    "what does printer error E1043 mean",
    "ok",
    "The mitochondrion is the powerhouse of the cell. " * 60,
    "Ünïcödé façade, naïve café, and an emoji 🙂 in one line.",
    "def quicksort(xs): return xs if len(xs) < 2 else quicksort([x for x in xs[1:] if x < xs[0]])",
    "A",
    "Hybrid search adds BM25 scores to vector similarity through a normalization processor.",
    "1234 5678 90",
    "   leading and trailing spaces   ",
]


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.fixture(scope="module")
def torch_vectors() -> np.ndarray:
    return get_embedder(MINILM, backend="torch").embed_passages(TEXTS)


def test_minilm_vectors_agree_with_sentence_transformers(torch_vectors):
    embedder = get_embedder(MINILM, backend="onnx")
    assert embedder.count_tokens(TEXTS[3]) > embedder.max_seq_length == 256  # truncated
    onnx_vectors = embedder.embed_passages(TEXTS)
    assert _cosines(onnx_vectors, torch_vectors).min() >= 0.99999
    assert np.abs(onnx_vectors - torch_vectors).max() < 1e-5


def test_one_padded_batch_gives_the_same_vectors(torch_vectors, monkeypatch):
    # The encoder batches texts of similar length; here all ten go in one batch, padded to the
    # long text's 256 tokens: the mask must give padded keys no weight at all.
    monkeypatch.setattr(onnx_embedding, "BATCH_TOKENS", 1 << 20)
    padded = get_embedder(MINILM, backend="onnx").model.encode(TEXTS, batch_size=len(TEXTS))
    assert _cosines(padded, torch_vectors).min() >= 0.99999
    assert np.abs(padded - torch_vectors).max() < 1e-5


def test_the_graph_has_the_interface_ml_commons_reads():
    import onnx

    path = onnx_model_file(MINILM, resolve_model_path(MINILM), "onnx")
    model = onnx.load(str(path))
    assert model.ir_version <= 8 and IR_VERSION <= 8  # onnxruntime 1.16 reads up to 9
    assert [(o.domain, o.version) for o in model.opset_import] == [("", OPSET)] == [("", 15)]
    inputs = {i.name: i.type.tensor_type for i in model.graph.input}
    assert tuple(inputs) == INPUTS == ("input_ids", "attention_mask", "token_type_ids")
    for tensor in inputs.values():
        assert tensor.elem_type == onnx.TensorProto.INT64
        assert [d.dim_param for d in tensor.shape.dim] == ["batch", "tokens"]
    (output,) = model.graph.output
    assert output.name == OUTPUT == "last_hidden_state"
    assert output.type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    dims = [d.dim_param or d.dim_value for d in output.type.tensor_type.shape.dim]
    assert dims == ["batch", "tokens", 384]
    # Every weight is a MatMul's initializer: what the int8 copy quantizes (6 per layer).
    assert len(onnx_embedding.weight_matmuls(path)) == 36


def _tiny_bert(folder: Path, prefix: str) -> dict:
    """A random 2-layer BERT (hidden 32, 4 heads) saved as a task head saves it (``bert.``
    prefixes, a pooler and a classifier the encoder does not read)."""
    from safetensors.numpy import save_file

    config = {
        "model_type": "bert",
        "architectures": ["BertModel"],
        "hidden_size": 32,
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "intermediate_size": 48,
        "hidden_act": "gelu",
        "layer_norm_eps": 1e-12,
        "max_position_embeddings": 64,
        "type_vocab_size": 2,
        "vocab_size": 100,
    }
    from loader.models.bert_onnx import expected_shapes, read_config

    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    rng = np.random.default_rng(7)
    tensors = {}
    for name, shape in expected_shapes(read_config(folder)).items():
        centre = 1.0 if name.endswith("LayerNorm.weight") else 0.0
        tensors[prefix + name] = (centre + rng.normal(0, 0.2, shape)).astype(np.float32)
    tensors[prefix + "pooler.dense.weight"] = np.zeros((32, 32), np.float32)
    tensors["classifier.weight"] = np.zeros((2, 32), np.float32)
    save_file(tensors, str(folder / "model.safetensors"))
    return config


def test_a_prefixed_bert_matches_transformers_on_a_padded_pair_batch(tmp_path):
    import onnxruntime as ort
    import torch
    from transformers import BertModel

    _tiny_bert(tmp_path / "tiny", "bert.")
    write_bert_onnx(tmp_path / "tiny", tmp_path / "tiny.onnx")
    rng = np.random.default_rng(3)
    ids = rng.integers(1, 100, (3, 20)).astype(np.int64)
    mask = np.ones_like(ids)
    mask[1, 12:] = 0
    mask[2, 5:] = 0
    types = np.zeros_like(ids)
    types[:, 8:] = 1  # a second segment, as a pair encodes it
    session = ort.InferenceSession(str(tmp_path / "tiny.onnx"), providers=["CPUExecutionProvider"])
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    (ours,) = session.run([OUTPUT], feeds)
    reference = BertModel.from_pretrained(str(tmp_path / "tiny"), attn_implementation="eager")
    with torch.no_grad():
        theirs = reference.eval()(**{k: torch.from_numpy(v) for k, v in feeds.items()})
    expected = theirs.last_hidden_state.numpy()
    kept = mask.astype(bool)  # padded positions' states are nobody's business
    assert ours.shape == expected.shape == (3, 20, 32)
    assert np.abs(ours[kept] - expected[kept]).max() < 1e-4


def _local_export(folder: Path, tmp_path: Path) -> Path:
    return local_onnx_export(folder.name, folder, cache_root=tmp_path / "cache")


def test_a_model_that_is_not_bert_is_told_to_use_torch(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    folder = tmp_path / "roberta-like"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "roberta"}), encoding="utf-8")
    with pytest.raises(ModelError) as raised:
        _local_export(folder, tmp_path)
    message = str(raised.value)
    assert str(folder) in message and "model_type 'roberta', not 'bert'" in message
    assert message.endswith("Set embedding_backend = \"torch\" and pip install 'loader[torch]'")
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def test_a_bert_with_only_pickled_weights_is_told_to_use_torch(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    _tiny_bert(tmp_path / "pickled", "")
    folder = tmp_path / "pickled"
    (folder / "model.safetensors").rename(folder / "pytorch_model.bin")  # only its name matters
    with pytest.raises(ModelError) as raised:
        _local_export(folder, tmp_path)
    message = str(raised.value)
    assert f"{folder} has no model.safetensors (only torch's pytorch_model.bin)" in message
    assert 'embedding_backend = "torch"' in message and "loader[torch]" in message


def test_a_missing_tensor_is_named(tmp_path):
    from safetensors.numpy import load_file, save_file

    _tiny_bert(tmp_path / "tiny", "")
    weights = tmp_path / "tiny" / "model.safetensors"
    tensors = load_file(str(weights))
    del tensors["encoder.layer.1.output.dense.bias"]
    save_file(tensors, str(weights))
    with pytest.raises(ModelError, match="has no tensor 'encoder.layer.1.output.dense.bias'"):
        write_bert_onnx(tmp_path / "tiny", tmp_path / "tiny.onnx")


def test_writing_and_running_the_onnx_file_never_imports_torch(tmp_path):
    # A fresh cache: the file is written in the child, then a text is embedded.
    script = (
        "import sys\n"
        "from loader.models.embedding import get_embedder\n"
        f"vectors = get_embedder({MINILM!r}, backend='onnx').embed_passages(['a refund'])\n"
        "assert vectors.shape == (1, 384), vectors.shape\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('torch', 'sentence_transformers', 'transformers')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "XDG_CACHE_HOME": str(tmp_path), "PYTHONPATH": str(REPO)},
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert list(tmp_path.glob("loader/models/all-MiniLM-L6-v2-*/model.onnx"))
