"""Torch weights for a model that ships as a BERT ONNX file only (bge-small's Maven jar).

The ONNX file holds every weight of the network it was exported from: LayerNorm weights and
biases under their transformers names, each dense layer's weight as an anonymous MatMul operand
(``onnx::MatMul_1525``, stored transposed) followed by an Add of its named bias. Read back into
a ``BertModel`` they make the same network, so the ``torch`` backend runs the vectors the ONNX
file computes (cosine 1.0000 on SciFact passages) and can be trained further, which an ONNX file
cannot. Made once beside the extraction (``torch/``), written under a temporary name, then
renamed, like the int8 copy.

Example::

    folder = torch_folder(files, BGE_SMALL)   # ~/.cache/loader/models/bge-small-en-v1.5/torch
    SentenceTransformer(str(folder))
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loader.errors import ModelError
from loader.models.scratch import scratch_folder

if TYPE_CHECKING:
    from loader.models.artifacts import ModelFiles
    from loader.models.registry import ModelSpec

log = logging.getLogger(__name__)

TORCH_FOLDER = "torch"
# The special tokens of BERT's WordPiece vocabulary, which tokenizer.json lists but does not name.
SPECIAL_TOKENS = {
    "cls_token": "[CLS]",
    "sep_token": "[SEP]",
    "pad_token": "[PAD]",
    "unk_token": "[UNK]",
    "mask_token": "[MASK]",
}


def torch_folder(files: ModelFiles, spec: ModelSpec) -> Path:
    """The sentence-transformers folder rebuilt from ``files``' ONNX weights, made once.

    Raises:
        ModelError: the ONNX file is not a BERT encoder laid out as transformers exports it.
    """
    target = files.folder / TORCH_FOLDER
    if (target / "modules.json").is_file():
        return target
    log.info("rebuilding torch weights of %s from %s (once)", spec.name, files.onnx)
    tmp = scratch_folder(files.folder, ".torch-")
    try:
        _write_sentence_transformer(files, spec, tmp)
        try:
            tmp.rename(target)
        except OSError:
            if not (target / "modules.json").is_file():
                raise  # else another process finished first, and its copy is the same
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def bert_weights(onnx_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(state_dict, config)`` of the BERT encoder in ``onnx_path``: numpy arrays under
    transformers' names, and the ``BertConfig`` arguments its shapes and constants give."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(onnx_path)).graph
    arrays = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    constants = {
        node.output[0]: numpy_helper.to_array(node.attribute[0].t)
        for node in graph.node
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value"
    }
    producers = {out: node for node in graph.node for out in node.output}
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)

    state = {name: array for name, array in arrays.items() if not name.startswith("onnx::")}
    head_dims = set()
    for node in graph.node:
        if node.op_type == "MatMul" and node.input[1] in arrays:
            biases = [
                name
                for add in consumers.get(node.output[0], [])
                if add.op_type == "Add"
                for name in add.input
                if name in state and name.endswith(".bias")
            ]
            if len(biases) != 1:
                raise ModelError(f"{onnx_path}: MatMul {node.name} is not followed by one bias")
            state[biases[0].removesuffix(".bias") + ".weight"] = arrays[node.input[1]].T
        elif node.op_type == "Div" and node.input[1] in constants:
            # Attention scores (queries x keys) are divided by sqrt(head size).
            product = producers.get(node.input[0])
            if product is not None and product.op_type == "MatMul":
                head_dims.add(round(float(constants[node.input[1]]) ** 2))

    if len(head_dims) != 1:
        raise ModelError(
            f"{onnx_path}: no single attention head size (found {sorted(head_dims)}); not a BERT "
            "encoder exported by transformers"
        )
    try:
        words = state["embeddings.word_embeddings.weight"]
        hidden = words.shape[1]
        layers = 1 + max(int(name.split(".")[2]) for name in state if name.startswith("encoder."))
        config = {
            "vocab_size": words.shape[0],
            "hidden_size": hidden,
            "num_hidden_layers": layers,
            "num_attention_heads": hidden // head_dims.pop(),
            "intermediate_size": state["encoder.layer.0.intermediate.dense.bias"].shape[0],
            "max_position_embeddings": state["embeddings.position_embeddings.weight"].shape[0],
            "type_vocab_size": state["embeddings.token_type_embeddings.weight"].shape[0],
            # BERT's; the graph's LayerNorms add it as a float32 constant (9.99e-13).
            "layer_norm_eps": 1e-12,
        }
    except (KeyError, ValueError, IndexError) as exc:
        raise ModelError(f"{onnx_path} is not a BERT encoder exported by transformers") from exc
    return state, config


def _write_sentence_transformer(files: ModelFiles, spec: ModelSpec, folder: Path) -> None:
    import torch
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # "Writing model shards" bars
    state, config = bert_weights(files.onnx)
    model = BertModel(BertConfig(**config))
    # The pooler (a dense layer over [CLS]) is not part of the ONNX graph and no pooling reads
    # it; zeros keep the saved file the same from one rebuild to the next.
    for name, tensor in model.pooler.state_dict().items():
        state[f"pooler.{name}"] = torch.zeros_like(tensor).numpy()
    model.load_state_dict({name: torch.tensor(array) for name, array in state.items()})
    model.save_pretrained(folder)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_file=str(files.tokenizer),
        model_max_length=spec.max_tokens,
        model_input_names=["input_ids", "token_type_ids", "attention_mask"],  # BERT's three
        **SPECIAL_TOKENS,
    )
    tokenizer.save_pretrained(folder)
    _write_json(folder / "sentence_bert_config.json", {"max_seq_length": spec.max_tokens})
    _write_json(
        folder / "1_Pooling" / "config.json",
        {
            "word_embedding_dimension": spec.dimension,
            "pooling_mode_cls_token": spec.pooling == "cls",
            "pooling_mode_mean_tokens": spec.pooling == "mean",
        },
    )
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {
            "idx": 1,
            "name": "1",
            "path": "1_Pooling",
            "type": "sentence_transformers.models.Pooling",
        },
    ]
    if spec.normalize:
        modules.append(
            {
                "idx": 2,
                "name": "2",
                "path": "2_Normalize",
                "type": "sentence_transformers.models.Normalize",
            }
        )
        (folder / "2_Normalize").mkdir()
    _write_json(folder / "modules.json", modules)


def _write_json(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")
