"""Tracing a transformer to ONNX with torch, for the reranker export (``rerank``). The embedding
model's ONNX file is written without torch (``bert_onnx``)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def eager_attention(hf_model: Any) -> None:
    """Have a transformers model trace its attention as plain MatMul and Softmax.

    The default (SDPA) attention traces with NaN guards, IsNaN and Where over every batch x heads
    x tokens x tokens score tensor, which onnxruntime cannot fuse away: the traced MiniLM ran
    1.29 x slower in fp32 for identical vectors, and its int8 copy gained 1.5 x instead of 1.7 x.
    """
    if hasattr(hf_model, "set_attn_implementation"):
        hf_model.set_attn_implementation("eager")


def trace_to_onnx(
    module: Any,
    example: Mapping[str, Any],
    input_names: Sequence[str],
    output_name: str,
    output_axes: dict[int, str],
    path: Path,
    opset: int,
) -> None:
    """Export ``module`` to ``path`` with dynamic batch and token axes on every input.

    Args:
        module: a ``torch.nn.Module`` taking the inputs positionally, in ``input_names`` order.
        example: tokenizer output to trace with (tensors by input name).
        output_axes: the output's dynamic axes, e.g. ``{0: "batch"}``.
    """
    import torch

    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer warnings about Python control flow
        torch.onnx.export(
            module,
            tuple(example[name] for name in input_names),
            str(path),
            input_names=list(input_names),
            output_names=[output_name],
            dynamic_axes={name: {0: "batch", 1: "tokens"} for name in input_names}
            | {output_name: output_axes},
            opset_version=opset,
            dynamo=False,  # the TorchScript exporter needs no onnxscript
        )
