"""Tracing a transformer to ONNX, shared by the reranker export (``rerank``) and the ml-commons
embedding export (``embedding_export``)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


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
