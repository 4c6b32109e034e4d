"""A BERT encoder written as an ONNX graph from its safetensors weights: numpy and onnx, no torch.

The graph is the one the embedding backend and ml-commons run (``embedding_export``): inputs
``input_ids``, ``attention_mask`` and ``token_type_ids`` (int64, ``[batch, tokens]``), output
``last_hidden_state`` (float32, ``[batch, tokens, hidden]``); pooling is the caller's. It is
written op by op as the torch exporter traced ``BertModel`` (opset 15, eager attention), so a
session fuses it as it fused the traced file (LayerNormalization, BiasGelu, the scaled
query-key product) and gives the same vectors, and quantize_dynamic finds every weight as the
second input of a MatMul. onnxruntime's Attention fusion matches only ops of opset 12 and older:
at opset 12 it fused all six layers of MiniLM, for no measurable gain here.

Example::

    write_bert_onnx(Path(".../all-MiniLM-L6-v2"), Path("/tmp/model.onnx"))
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from loader.errors import ModelError

if TYPE_CHECKING:
    import onnx

# ml-commons feeds input_ids, attention_mask and token_type_ids (model_type bert) and pools the
# output itself; the local backend does the same.
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT = "last_hidden_state"
# ml-commons 3.x runs onnxruntime 1.16, which reads opsets up to 19 and IR versions up to 9.
# LayerNormalization is an ONNX op from opset 17: composed here, fused back by the runtime.
OPSET = 15
IR_VERSION = 8
# Added to the scores of padded keys: float32's lowest value, as transformers' BERT adds (its
# first releases added -10000: either gives padded keys a weight of exactly 0 after Softmax).
MASKED_SCORE = float(np.finfo(np.float32).min)
WEIGHTS_FILE = "model.safetensors"
# The protobuf limit of a single ONNX file (ml-commons takes one file, no external data).
MAX_ONNX_BYTES = 2**31 - 1


class NotBertError(ModelError):
    """A model folder this writer cannot turn into ONNX (not BERT, or no safetensors weights)."""


@dataclass(frozen=True)
class BertConfig:
    """The facts of ``config.json`` the graph needs."""

    hidden_size: int
    num_heads: int
    num_layers: int
    intermediate_size: int
    layer_norm_eps: float
    max_positions: int
    type_vocab_size: int
    vocab_size: int

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_heads


def read_config(folder: Path) -> BertConfig:
    """``config.json`` of a BERT folder.

    Raises:
        NotBertError: no config, another model type, or settings this graph does not implement.
    """
    path = folder / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise NotBertError(f"cannot read {path}: {exc}") from exc
    model_type = config.get("model_type")
    if model_type != "bert":
        raise NotBertError(f"{path} says model_type {model_type!r}, not 'bert'")
    unsupported = {
        "hidden_act": (config.get("hidden_act", "gelu"), "gelu"),
        "position_embedding_type": (config.get("position_embedding_type", "absolute"), "absolute"),
    }
    for key, (value, expected) in unsupported.items():
        if value != expected:
            raise NotBertError(f"{path} says {key} {value!r}; only {expected!r} is written")
    try:
        bert = BertConfig(
            hidden_size=int(config["hidden_size"]),
            num_heads=int(config["num_attention_heads"]),
            num_layers=int(config["num_hidden_layers"]),
            intermediate_size=int(config["intermediate_size"]),
            layer_norm_eps=float(config.get("layer_norm_eps", 1e-12)),
            max_positions=int(config["max_position_embeddings"]),
            type_vocab_size=int(config.get("type_vocab_size", 2)),
            vocab_size=int(config["vocab_size"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise NotBertError(f"{path} lacks or misstates a BERT setting: {exc}") from exc
    if bert.hidden_size % bert.num_heads:
        raise NotBertError(
            f"{path}: hidden_size {bert.hidden_size} is not a multiple of "
            f"num_attention_heads {bert.num_heads}"
        )
    return bert


def read_weights(folder: Path, config: BertConfig) -> dict[str, np.ndarray]:
    """The encoder's tensors by their ``BertModel`` names (``embeddings.…``, ``encoder.…``),
    whatever the file prefixes them with (``bert.`` for a checkpoint of a task head).

    Raises:
        NotBertError: no ``model.safetensors``, or a tensor missing or of the wrong shape.
    """
    path = folder / WEIGHTS_FILE
    if not path.is_file():
        pickled = (
            " (only torch's pytorch_model.bin)" if (folder / "pytorch_model.bin").is_file() else ""
        )
        raise NotBertError(f"{folder} has no {WEIGHTS_FILE}{pickled}")
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    try:
        stored = load_file(str(path))
    except (OSError, SafetensorError, TypeError, ValueError) as exc:  # bfloat16: no numpy type
        raise NotBertError(f"cannot read {path}: {exc}") from exc
    weights: dict[str, np.ndarray] = {}
    for key, tensor in stored.items():
        name = key.removeprefix("bert.").removeprefix("model.")
        # Checkpoints from before transformers 4 name LayerNorm's tensors gamma and beta.
        for old, new in ((".gamma", ".weight"), (".beta", ".bias")):
            if name.endswith(old):
                name = name.removesuffix(old) + new
        weights[name] = tensor
    for name, shape in expected_shapes(config).items():
        tensor = weights.get(name)
        if tensor is None:
            raise NotBertError(f"{path} has no tensor {name!r} (nor 'bert.{name}')")
        if tuple(tensor.shape) != shape:
            raise NotBertError(f"{path}: {name} has shape {tensor.shape}, config.json says {shape}")
    return weights


def expected_shapes(config: BertConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor the graph reads, with its shape as ``torch.nn.Linear`` stores it
    (``[out, in]``)."""
    hidden, inner = config.hidden_size, config.intermediate_size
    shapes: dict[str, tuple[int, ...]] = {
        "embeddings.word_embeddings.weight": (config.vocab_size, hidden),
        "embeddings.position_embeddings.weight": (config.max_positions, hidden),
        "embeddings.token_type_embeddings.weight": (config.type_vocab_size, hidden),
        "embeddings.LayerNorm.weight": (hidden,),
        "embeddings.LayerNorm.bias": (hidden,),
    }
    for layer in range(config.num_layers):
        prefix = f"encoder.layer.{layer}."
        for dense, out, into in (
            ("attention.self.query", hidden, hidden),
            ("attention.self.key", hidden, hidden),
            ("attention.self.value", hidden, hidden),
            ("attention.output.dense", hidden, hidden),
            ("intermediate.dense", inner, hidden),
            ("output.dense", hidden, inner),
        ):
            shapes[f"{prefix}{dense}.weight"] = (out, into)
            shapes[f"{prefix}{dense}.bias"] = (out,)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            shapes[f"{prefix}{norm}.weight"] = (hidden,)
            shapes[f"{prefix}{norm}.bias"] = (hidden,)
    return shapes


def write_bert_onnx(folder: Path, path: Path) -> None:
    """Write the BERT encoder of ``folder`` (``config.json``, ``model.safetensors``) to ``path``.

    Raises:
        NotBertError: the folder is not a BERT model with safetensors weights.
        ModelError: the graph is too large for one ONNX file.
    """
    import onnx

    config = read_config(folder)
    model = bert_model(config, read_weights(folder, config))
    if model.ByteSize() > MAX_ONNX_BYTES:
        raise ModelError(f"{folder}: the model is too large for one ONNX file (over 2 GB)")
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def bert_model(config: BertConfig, weights: dict[str, np.ndarray]) -> onnx.ModelProto:
    """The ONNX model of a BERT encoder (see the module's docstring for its interface)."""
    from onnx import TensorProto, helper

    graph = _GraphBuilder(weights)
    hidden = _embeddings(graph, config)
    mask = _score_mask(graph)
    # [batch, tokens, hidden], the shape the heads are merged back into, computed at run time as
    # the torch exporter traced it: see _self_attention.
    merged_shape = graph.op(
        "Concat",
        [graph.op("Shape", ["input_ids"], "merge"), graph.constant([config.hidden_size], np.int64)],
        "merge",
        axis=0,
    )
    for layer in range(config.num_layers):
        hidden = _encoder_layer(
            graph, config, f"encoder.layer.{layer}.", hidden, mask, merged_shape
        )
    graph.rename_output(hidden, OUTPUT)
    axes = ["batch", "tokens"]
    onnx_graph = helper.make_graph(
        graph.nodes,
        "bert",
        [helper.make_tensor_value_info(name, TensorProto.INT64, axes) for name in INPUTS],
        [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, [*axes, config.hidden_size])],
        graph.initializers,
    )
    model = helper.make_model(
        onnx_graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="loader",
    )
    model.ir_version = IR_VERSION
    return model


class _GraphBuilder:
    """Nodes and initializers in the making, with unique names."""

    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        self.weights = weights
        self.nodes: list = []
        self.initializers: list = []
        self._constants: dict[tuple, str] = {}
        self._count = 0

    def op(self, op_type: str, inputs: list[str], name: str, **attributes) -> str:
        """Add a node with one output, named after ``name``; return the output's name."""
        from onnx import helper

        self._count += 1
        output = f"{name}/{op_type}_{self._count}"
        self.nodes.append(helper.make_node(op_type, inputs, [output], name=output, **attributes))
        return output

    def rename_output(self, output: str, new_name: str) -> None:
        """Name the last node's output ``new_name`` (the graph's output: no Identity to copy it)."""
        last = self.nodes[-1]
        assert last.output[0] == output
        last.output[0] = new_name

    def weight(self, name: str, transpose: bool = False) -> str:
        """The stored tensor ``name`` as an initializer (transposed: ``[in, out]`` for MatMul)."""
        from onnx import numpy_helper

        tensor = self.weights[name].astype(np.float32, copy=False)
        if transpose:
            tensor = np.ascontiguousarray(tensor.T)
        self.initializers.append(numpy_helper.from_array(tensor, name))
        return name

    def constant(self, value, dtype) -> str:
        """A shared initializer holding ``value``."""
        from onnx import numpy_helper

        array = np.asarray(value, dtype=dtype)
        key = (array.dtype.str, array.shape, array.tobytes())
        if key not in self._constants:
            name = f"const_{len(self._constants)}"
            self.initializers.append(numpy_helper.from_array(array, name))
            self._constants[key] = name
        return self._constants[key]


def _embeddings(graph: _GraphBuilder, config: BertConfig) -> str:
    """Word + position + token type embeddings, layer-normalised. Positions are 0..tokens-1."""
    name = "embeddings"
    words = graph.op("Gather", [graph.weight(f"{name}.word_embeddings.weight"), "input_ids"], name)
    types = graph.op(
        "Gather", [graph.weight(f"{name}.token_type_embeddings.weight"), "token_type_ids"], name
    )
    # Range's length is unknown to onnxruntime's shape inference, so it does not fuse the fp32
    # file's residual Adds with their LayerNorms into SkipLayerNormalization: told the length (a
    # value_info), it did, and that kernel took twice the time of Add and LayerNormalization on
    # this CPU (see _self_attention for the int8 copy).
    shape = graph.op("Shape", ["input_ids"], name)
    tokens = graph.op("Gather", [shape, graph.constant(1, np.int64)], name, axis=0)
    positions = graph.op(
        "Range", [graph.constant(0, np.int64), tokens, graph.constant(1, np.int64)], name
    )
    position_vectors = graph.op(
        "Gather", [graph.weight(f"{name}.position_embeddings.weight"), positions], name
    )
    summed = graph.op("Add", [graph.op("Add", [words, types], name), position_vectors], name)
    return _layer_norm(graph, config, f"{name}.LayerNorm", summed)


def _score_mask(graph: _GraphBuilder) -> str:
    """``(1 - attention_mask) * MASKED_SCORE`` as ``[batch, 1, 1, tokens]``, added to every
    head's scores."""
    name = "mask"
    mask = graph.op("Unsqueeze", ["attention_mask", graph.constant([1], np.int64)], name)
    mask = graph.op("Unsqueeze", [mask, graph.constant([2], np.int64)], name)
    mask = graph.op("Cast", [mask], name, to=1)  # float
    padded = graph.op("Sub", [graph.constant(1.0, np.float32), mask], name)
    return graph.op("Mul", [padded, graph.constant(MASKED_SCORE, np.float32)], name)


def _dense(graph: _GraphBuilder, name: str, inputs: str) -> str:
    """``inputs @ W.T + b`` of a ``torch.nn.Linear``: MatMul by a weight initializer (what
    quantize_dynamic quantizes), then Add of the bias."""
    product = graph.op("MatMul", [inputs, graph.weight(f"{name}.weight", transpose=True)], name)
    return graph.op("Add", [product, graph.weight(f"{name}.bias")], name)


def _layer_norm(graph: _GraphBuilder, config: BertConfig, name: str, inputs: str) -> str:
    """LayerNormalization over the last axis, composed as the torch exporter composes it at
    opsets below 17 (onnxruntime fuses it back into one node)."""
    mean = graph.op("ReduceMean", [inputs], name, axes=[-1])
    centred = graph.op("Sub", [inputs, mean], name)
    squared = graph.op("Pow", [centred, graph.constant(2.0, np.float32)], name)
    variance = graph.op("ReduceMean", [squared], name, axes=[-1])
    shifted = graph.op("Add", [variance, graph.constant(config.layer_norm_eps, np.float32)], name)
    normed = graph.op("Div", [centred, graph.op("Sqrt", [shifted], name)], name)
    scaled = graph.op("Mul", [normed, graph.weight(f"{name}.weight")], name)
    return graph.op("Add", [scaled, graph.weight(f"{name}.bias")], name)


def _encoder_layer(
    graph: _GraphBuilder,
    config: BertConfig,
    prefix: str,
    inputs: str,
    mask: str,
    merged_shape: str,
) -> str:
    """Self-attention and the feed-forward block, each with its residual and LayerNorm."""
    attended = _self_attention(graph, config, prefix + "attention.self", inputs, mask, merged_shape)
    projected = _dense(graph, prefix + "attention.output.dense", attended)
    residual = graph.op("Add", [projected, inputs], prefix + "attention.output")
    normed = _layer_norm(graph, config, prefix + "attention.output.LayerNorm", residual)
    inner = _gelu(
        graph, prefix + "intermediate", _dense(graph, prefix + "intermediate.dense", normed)
    )
    outer = _dense(graph, prefix + "output.dense", inner)
    residual = graph.op("Add", [outer, normed], prefix + "output")
    return _layer_norm(graph, config, prefix + "output.LayerNorm", residual)


def _self_attention(
    graph: _GraphBuilder, config: BertConfig, name: str, inputs: str, mask: str, merged_shape: str
) -> str:
    """Multi-head scaled dot-product attention, ``[batch, tokens, hidden]`` in and out.

    The heads are merged back by a shape computed at run time (``merged_shape``), as torch
    traced it, not by a constant ``[0, 0, hidden]``: with the constant, shape inference (which
    the quantizer writes into the int8 file) knew the attention output's shape, and onnxruntime
    fused its residual Add and LayerNorm into SkipLayerNormalization in every layer, 12 of them
    against the traced file's 6; that kernel took twice the time of Add and LayerNormalization
    on this CPU, and the int8 copy ran ~8 % slower than the traced one.
    """
    heads = graph.constant([0, 0, config.num_heads, config.head_size], np.int64)

    def split(part: str, perm: list[int]) -> str:
        projected = _dense(graph, f"{name}.{part}", inputs)
        per_head = graph.op("Reshape", [projected, heads], f"{name}.{part}")
        return graph.op("Transpose", [per_head], f"{name}.{part}", perm=perm)

    queries = split("query", [0, 2, 1, 3])  # [batch, heads, tokens, head_size]
    keys = split("key", [0, 2, 3, 1])  # [batch, heads, head_size, tokens]
    values = split("value", [0, 2, 1, 3])
    scores = graph.op("MatMul", [queries, keys], name)
    scaled = graph.op(
        "Div", [scores, graph.constant(math.sqrt(config.head_size), np.float32)], name
    )
    weights = graph.op("Softmax", [graph.op("Add", [scaled, mask], name)], name, axis=3)
    context = graph.op("MatMul", [weights, values], name)
    context = graph.op("Transpose", [context], name, perm=[0, 2, 1, 3])
    return graph.op("Reshape", [context, merged_shape], name)


def _gelu(graph: _GraphBuilder, name: str, inputs: str) -> str:
    """The exact (erf) GELU, ``x * 0.5 * (1 + erf(x / sqrt(2)))``, in the torch exporter's
    order (onnxruntime fuses it with the bias before it into BiasGelu)."""
    scaled = graph.op("Div", [inputs, graph.constant(math.sqrt(2.0), np.float32)], name)
    erf = graph.op("Erf", [scaled], name)
    shifted = graph.op("Add", [erf, graph.constant(1.0, np.float32)], name)
    product = graph.op("Mul", [inputs, shifted], name)
    return graph.op("Mul", [product, graph.constant(0.5, np.float32)], name)
