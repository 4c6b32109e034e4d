"""Torch weights read out of a BERT ONNX file: the same network, rebuilt once, and a clear error
for an ONNX file of another shape."""

from __future__ import annotations

import numpy as np
import pytest

from loader.errors import ModelError
from loader.models import torch_weights
from loader.models.artifacts import model_files
from loader.models.registry import BGE_SMALL
from tests.unit.models.test_backends import _tiny_onnx


def test_bge_weights_map_onto_every_bert_parameter():
    state, config = torch_weights.bert_weights(model_files(BGE_SMALL).onnx)
    assert config == {
        "vocab_size": 30522,
        "hidden_size": 384,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 1536,
        "max_position_embeddings": 512,
        "type_vocab_size": 2,
        "layer_norm_eps": 1e-12,
    }
    from transformers import BertConfig, BertModel

    expected = BertModel(BertConfig(**config), add_pooling_layer=False).state_dict()
    assert set(state) == set(expected)
    for name, tensor in expected.items():
        assert state[name].shape == tuple(tensor.shape), name
    # Stored transposed in the ONNX file (MatMul's [in, out]); torch's Linear is [out, in].
    assert state["encoder.layer.0.intermediate.dense.weight"].shape == (1536, 384)


def test_the_torch_folder_is_made_once(tmp_path, monkeypatch):
    files = model_files(BGE_SMALL)
    copy = type(files)(tmp_path, files.onnx, files.tokenizer)
    folder = torch_weights.torch_folder(copy, BGE_SMALL)
    assert folder == tmp_path / "torch" and (folder / "modules.json").is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["torch"]  # no temporary folder left

    def refuse(*args, **kwargs):
        raise AssertionError("rebuilt a second time")

    monkeypatch.setattr(torch_weights, "_write_sentence_transformer", refuse)
    assert torch_weights.torch_folder(copy, BGE_SMALL) == folder

    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(folder))
    assert model.max_seq_length == 512
    vector = model.encode(["refund policy"], normalize_embeddings=False)
    assert np.isclose(np.linalg.norm(vector), 1.0, atol=1e-5)  # the folder's own Normalize


def test_an_onnx_file_of_another_shape_is_refused(tmp_path):
    _tiny_onnx(tmp_path / "model.onnx")
    with pytest.raises(ModelError, match="model.onnx"):
        torch_weights.bert_weights(tmp_path / "model.onnx")
