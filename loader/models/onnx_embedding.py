"""The ONNX embedding backend: onnxruntime and the model's ``tokenizer.json``, no torch.

The ONNX file outputs the token states (``last_hidden_state``); pooling (CLS or mean over the
attention mask) and normalisation are the model's, from its ``ModelSpec``. Texts are tokenized
once, sorted by length and run in batches of similar length, so padding costs little.

``onnx-int8`` runs a copy quantized with onnxruntime's dynamic quantization (int8 weights in a
7-bit range, one scale per output channel: ``INT8_RECIPE``), made once next to the fp32 file and
reused.

Example::

    encoder = OnnxEncoder(files.onnx, files.tokenizer, spec)
    vectors = encoder.encode(["a passage", "another"], batch_size=64)   # (2, 384) float32
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from pathlib import Path

import numpy as np

from loader.errors import ModelError
from loader.models.registry import INT8_RECIPE, ModelSpec
from loader.models.scratch import scratch_folder

log = logging.getLogger(__name__)

# The recipe is in the name: a copy made by another recipe is never reused for this one.
INT8_SUFFIX = f"_int8-{INT8_RECIPE}.onnx"
# Padded tokens per onnxruntime call (see _batches). The model alone on push's SciFact chunk
# texts, 2 cores with 2 MB of L2 each (bench_push.py --batch-tokens, medians of 3-5): bge-small
# int8 68 chunks/s at 1024 tokens, 52 at 8192, fp32 33 and 28; all-MiniLM-L6-v2 int8 115 and 93,
# fp32 65 and 49. 256 and 512 were slower again.
BATCH_TOKENS = 1024
# Runs of one session in flight at once. onnxruntime's CPU arena is the session's, shared by its
# concurrent runs, and keeps what it grew to: it reaches the largest sum of runs ever in flight
# together, a high-water mark that creeps up with the traffic (serve runs searches in 40
# threads: long questions arriving together). One at a time bounds it by one run, at most
# BATCH_TOKENS padded tokens. Serialized, the runs must not spin (NO_SPINNING).
RUNS_AT_ONCE = 1
# onnxruntime's intra-op threads spin between a run's parallel sections by default, burning the
# cores the other threads (and the waiting runs) need. Without spinning, 1,500 questions from 20
# threads one run at a time (2 busy cores): 59-66 questions/s and 203 MB RSS, against 46-54/s and
# 305 MB unbounded and spinning, and 26-31/s one at a time spinning; 300 SciFact passages in one
# call 6.8-8.3 passages/s against 5.9-6.1 spinning.
NO_SPINNING = {"session.intra_op.allow_spinning": "0"}


def int8_options() -> dict:
    """``quantize_dynamic``'s options for ``INT8_RECIPE``, shared by the embedder and the
    cross-encoder.

    Weights are int8 with one scale per output column (per-tensor scales gave cosines of 0.95).
    ``reduce_range`` keeps them in 7 bits: without VNNI, onnxruntime's x86 kernel multiplies
    uint8 activations by int8 weights with vpmaddubsw, which adds two products into a saturating
    int16, and 255 x 127 x 2 overflows it. On an AVX2-only CPU (emulated: qemu -cpu Haswell) the
    full-range copy gave bge-small cosines to fp32 of 0.9765-0.9954 on the backend test's texts,
    against 0.9974 and up with VNNI, so one file gave different vectors on different CPUs. With
    7-bit weights no sum can saturate: 0.9944-0.9969 on AVX2, and on VNNI 500 SciFact passages
    min 0.9968 (bge) / 0.9895 (MiniLM) against 0.9973 / 0.9901 full-range, at the same speed
    (uint8 weights, the other cure, ran 1.5 x slower on VNNI)."""
    from onnxruntime.quantization import QuantType

    return {"weight_type": QuantType.QInt8, "per_channel": True, "reduce_range": True}


def int8_path(fp32: Path) -> Path:
    """Where the int8 copy of an fp32 ONNX file is kept: beside it."""
    return fp32.with_name(fp32.name.removesuffix(".onnx") + INT8_SUFFIX)


def quantized(fp32: Path) -> Path:
    """The int8 copy of ``fp32``, made once (written under a temporary name, then renamed)."""
    target = int8_path(fp32)
    if target.is_file():
        return target
    from onnxruntime.quantization import quantize_dynamic

    log.info("quantizing %s to int8 (once)", fp32)
    tmp = scratch_folder(fp32.parent, ".quantize-")
    try:
        # The quantizer writes a shape-inferred copy beside its input (<name>-inferred.onnx) and
        # deletes it after: two processes quantizing one file at once (a push and a search both
        # using int8 for the first time) deleted each other's copy, and one failed with "cannot
        # quantize". Its input is therefore a link inside this call's own folder.
        source = _private_link(fp32, tmp)
        partial = tmp / target.name
        root = logging.getLogger()
        root.addFilter(_no_pre_processing_advice)
        try:
            quantize_dynamic(
                source,
                partial,
                **int8_options(),
                nodes_to_quantize=weight_matmuls(fp32),
            )
        finally:
            root.removeFilter(_no_pre_processing_advice)
        partial.replace(target)
    except Exception as exc:  # the quantizer raises many kinds; all mean "cannot quantize"
        raise ModelError(
            f"cannot quantize {fp32} to int8: {exc}; set embedding_backend=onnx"
        ) from exc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _private_link(fp32: Path, folder: Path) -> Path:
    """``fp32`` under ``folder``: a hard link (same file system, no copy), else a copy."""
    link = folder / fp32.name
    try:
        os.link(fp32, link)
    except OSError:
        shutil.copyfile(fp32, link)
    return link


def _no_pre_processing_advice(record: logging.LogRecord) -> bool:
    """Drop the quantizer's root-logger advice to pre-process (shape inference and graph
    fusions first): the weight MatMuls quantize as they are, and the fusions it would apply were
    measured no faster on the machines the int8 recipe was made on. Printed with a URL on every
    first int8 use."""
    return not record.getMessage().startswith("Please consider to run pre-processing")


def weight_matmuls(path: Path) -> list[str]:
    """The MatMul nodes that multiply by a weight. The attention's own products (queries by keys,
    scores by values) multiply two activations: quantizing both on the fly costs time and, over
    padded batches, accuracy, so they stay float."""
    import onnx

    model = onnx.load(str(path))
    weights = {initializer.name for initializer in model.graph.initializer}
    return [
        node.name
        for node in model.graph.node
        if node.op_type == "MatMul" and any(name in weights for name in node.input)
    ]


def load_tokenizer(path: Path, max_tokens: int):
    """``tokenizer.json`` truncating at ``max_tokens`` (special tokens included), no padding
    (the encoder pads each batch to its longest text)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_tokens)
    return tokenizer


class OnnxEncoder:
    """A transformer's ONNX file run with onnxruntime, pooled and normalised as its spec says;
    ``threads`` caps its intra-op threads (push workers share the cores)."""

    def __init__(
        self, onnx_path: Path, tokenizer_path: Path, spec: ModelSpec, threads: int = 0
    ) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        for key, value in NO_SPINNING.items():
            options.add_session_config_entry(key, value)
        if threads:  # 0: onnxruntime's default, one intra-op thread per core
            options.intra_op_num_threads = threads
        try:
            self.session = ort.InferenceSession(
                str(onnx_path), options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own kinds; all mean "cannot load"
            raise ModelError(f"cannot load ONNX embedding model {onnx_path}: {exc}") from exc
        self.input_names = {node.name for node in self.session.get_inputs()}
        self.runs = threading.BoundedSemaphore(RUNS_AT_ONCE)  # see RUNS_AT_ONCE
        self.tokenizer = load_tokenizer(tokenizer_path, spec.max_tokens)
        self.spec = spec
        self.path = onnx_path

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        """One float32 row per text, in the texts' order."""
        encodings = self.tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        vectors = np.zeros((len(texts), self.spec.dimension), dtype=np.float32)
        for batch in _batches(order, [len(e.ids) for e in encodings], batch_size):
            vectors[batch] = self._run([encodings[i] for i in batch])
        return vectors

    def _run(self, encodings: list) -> np.ndarray:
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for row, encoding in enumerate(encodings):
            length = len(encoding.ids)
            ids[row, :length] = encoding.ids
            mask[row, :length] = 1
            types[row, :length] = encoding.type_ids
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        with self.runs:
            (states,) = self.session.run(
                ["last_hidden_state"], {k: v for k, v in feeds.items() if k in self.input_names}
            )
        return pool(states, mask, self.spec)


def _batches(order: list[int], lengths: list[int], batch_size: int) -> list[list[int]]:
    """Consecutive runs of ``order`` (sorted by length) of at most ``batch_size`` texts and
    ``BATCH_TOKENS`` padded tokens: the activations of a few texts stay in the core's cache, those
    of 64 texts of 512 tokens (800 MB of attention scores per layer) stream through memory."""
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:
        # Sorted ascending: this text is the longest of the batch, so it sets the padding.
        if current and (
            len(current) == batch_size or (len(current) + 1) * lengths[index] > BATCH_TOKENS
        ):
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches


def pool(states: np.ndarray, mask: np.ndarray, spec: ModelSpec) -> np.ndarray:
    """Sentence vectors from token states ``(batch, tokens, dim)``: the spec's pooling, then
    unit length where the spec normalises."""
    if spec.pooling == "cls":
        pooled = states[:, 0, :]
    else:
        # The mask times the states as one matrix product per text: a fifth of the time of
        # multiplying and summing a (batch, tokens, dim) copy.
        weights = mask.astype(np.float32)
        summed = np.matmul(weights[:, None, :], states)[:, 0, :]
        pooled = summed / np.clip(weights.sum(axis=1, keepdims=True), 1e-9, None)
    if spec.normalize:
        pooled = pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
    return pooled.astype(np.float32, copy=False)
