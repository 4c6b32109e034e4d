"""The cross-encoder reranker: it scores (question, passage) pairs, loaded once per process.

Retrieve many candidates cheaply (``candidates``, e.g. 50), score each against the question with a
cross-encoder, keep the best few (``top_k``, e.g. 5).

Two backends:

- ``torch``: sentence-transformers' ``CrossEncoder``.
- ``onnx`` (``onnx-int8`` for int8 dynamic quantization): the same model exported once to ONNX
  and run with onnxruntime. The export lands in ``~/.cache/loader/onnx/<hash>`` (or
  ``$XDG_CACHE_HOME``), keyed by the model folder's contents, so it happens once per model.

Why not ``CrossEncoder(path, backend="onnx")``: sentence-transformers' ONNX backend needs the
``optimum-onnx`` package, whose releases (up to 0.1.0) require ``transformers<4.58``, while
sentence-transformers 6 requires ``transformers>=5``; pip cannot install both. The export here
builds the model from onnxruntime's own pieces; it needs torch once, for the export (``pip install
'loader[torch]'``), and onnxruntime (a base dependency) after:

1. ``torch.onnx.export`` with eager attention (the SDPA path exports NaN guards around every
   softmax that cost a quarter of the run time and hide attention from step 2);
2. onnxruntime's transformer optimizer fuses attention, layer norms and GELU;
3. ``quantize_dynamic`` with per-channel int8 weights for ``onnx-int8``.

Example::

    reranker = load_reranker(settings)        # loader.models.rerank: this one when chosen
    scores = reranker.rerank("How long do UPI refunds take?", passages)
    best = sorted(zip(scores, passages), reverse=True)[:5]
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from loader.errors import ConfigError, ModelError
from loader.models.embedding import resolve_model_path
from loader.models.onnx_export import eager_attention, trace_to_onnx
from loader.models.registry import INT8_RECIPE
from loader.models.rerank import Candidate, RerankQuery
from loader.models.rerank.check import require_reranker
from loader.models.scratch import scratch_folder
from loader.settings import CROSS_ENCODER_BACKENDS

log = logging.getLogger(__name__)

BACKENDS = CROSS_ENCODER_BACKENDS
ONNX_FILE = "model.onnx"
ONNX_INT8_FILE = f"model_int8-{INT8_RECIPE}.onnx"
# Part of every export's cache key: bump it when _export_onnx changes, so old exports are redone.
EXPORT_VERSION = "2"


def onnx_cache_root() -> Path:
    """Where ONNX exports are kept: ``$XDG_CACHE_HOME/loader/onnx`` or ``~/.cache/loader/onnx``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "loader" / "onnx"


def _model_fingerprint(path: str) -> str:
    """A hash of the model's identity: its path and, for a local folder, its files' sizes/times.

    Retraining a model in place changes the fingerprint, so a stale export is never used.
    """
    digest = hashlib.sha256(f"{EXPORT_VERSION}:{path}".encode())
    folder = Path(path)
    if folder.is_dir():
        for file in sorted(folder.rglob("*")):
            if file.is_file():
                stat = file.stat()
                digest.update(
                    f"{file.relative_to(folder)}:{stat.st_size}:{stat.st_mtime_ns}".encode()
                )
    return digest.hexdigest()[:16]


def _load_cross_encoder(name: str, path: str, max_tokens: int, device: str) -> Any:
    from loader.models.torch_extra import require_torch_extra

    require_torch_extra(f"reranking with the cross-encoder {name!r}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from sentence_transformers import CrossEncoder
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # "Loading weights" bars would corrupt --json
    try:
        model = CrossEncoder(path, max_length=max_tokens, device=device)
    except Exception as exc:  # the library raises many kinds; all mean "cannot load"
        reason = " ".join(str(exc).split())  # one line: the library's own runs over several
        raise ModelError(
            f"cannot load reranker model {name!r} ({path}): {reason}; there is no model hub here, "
            "so set reranker_model (LOADER_RERANKER_MODEL) to a local CrossEncoder folder"
        ) from exc
    num_labels = int(getattr(model.config, "num_labels", 1))
    if num_labels != 1:
        raise ModelError(
            f"reranker model {name!r} has {num_labels} output labels; a reranker needs a "
            "CrossEncoder with one relevance score (num_labels=1)"
        )
    return model


class _OnnxScorer:
    """Runs an exported cross-encoder with onnxruntime; scores include the model's activation."""

    def __init__(self, onnx_path: Path, tokenizer: Any, max_tokens: int, device: str) -> None:
        import onnxruntime as ort

        from loader.models.onnx_embedding import NO_SPINNING, RUNS_AT_ONCE

        providers = ["CPUExecutionProvider"]
        if device.startswith("cuda") and "CUDAExecutionProvider" in ort.get_available_providers():
            providers.insert(0, "CUDAExecutionProvider")
        options = ort.SessionOptions()
        for key, value in NO_SPINNING.items():
            options.add_session_config_entry(key, value)
        self.session = ort.InferenceSession(str(onnx_path), options, providers=providers)
        self.input_names = [node.name for node in self.session.get_inputs()]
        # As the embedder's: the session's arena is bounded by one run, not by concurrent ones.
        self.runs = threading.BoundedSemaphore(RUNS_AT_ONCE)
        self.tokenizer = tokenizer
        self.max_tokens = max_tokens

    def score(self, questions: list[str], passages: list[str]) -> list[float]:
        encoded = self.tokenizer(
            questions,
            passages,
            padding=True,
            truncation="longest_first",  # what CrossEncoder does
            max_length=self.max_tokens,
            return_tensors="np",
        )
        feeds = {name: encoded[name].astype("int64") for name in self.input_names}
        with self.runs:
            (scores,) = self.session.run(["scores"], feeds)
        return [float(value) for value in scores.reshape(-1)]


def _export_onnx(model: Any, target: Path, quantize: bool) -> None:
    """Export a loaded CrossEncoder's transformer (logits + activation) to ``target``."""
    import torch

    hf_model = model.model.eval()
    eager_attention(hf_model)
    tokenizer = model.tokenizer
    input_names = list(tokenizer.model_input_names)
    activation = model.activation_fn or torch.nn.Identity()

    class _Scores(torch.nn.Module):
        # Positional inputs in the tokenizer's order, so ONNX input names match their tensors.
        def __init__(self) -> None:
            super().__init__()
            self.model = hf_model

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            logits = self.model(**dict(zip(input_names, inputs, strict=True))).logits
            return activation(logits)

    example = tokenizer(
        ["an example question"], ["an example passage to trace"], return_tensors="pt"
    )
    tmp = scratch_folder(target.parent, ".export-")
    try:
        traced = tmp / "traced.onnx"
        trace_to_onnx(_Scores(), example, input_names, "scores", {0: "batch"}, traced, opset=17)
        _fuse_transformer_ops(traced, tmp / ONNX_FILE, hf_model.config)
        traced.unlink()
        if quantize:
            import onnx
            from onnxruntime.quantization import quantize_dynamic

            from loader.models.onnx_embedding import int8_options

            quantize_dynamic(
                tmp / ONNX_FILE,
                tmp / ONNX_INT8_FILE,
                **int8_options(),  # the embedder's recipe: vectors alike on every CPU
                # Fused ops (Attention, SkipLayerNormalization) are outside ONNX's type
                # inference; their outputs are float.
                extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
            )
        # Rename into place last: a concurrent process sees a complete export or none.
        try:
            tmp.rename(target)
        except OSError:
            if not target.exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _fuse_transformer_ops(source: Path, target: Path, config: Any) -> None:
    """Fuse attention, layer norms and GELU with onnxruntime's transformer optimizer.

    Fusion finds BERT-style encoder patterns (BERT, RoBERTa, XLM-R, MiniLM); for another
    architecture it fuses what it recognises, and if it fails the unfused graph is kept.
    """
    from onnxruntime.transformers import optimizer

    try:
        optimized = optimizer.optimize_model(
            str(source),
            model_type="bert",
            num_heads=int(getattr(config, "num_attention_heads", 0)),
            hidden_size=int(getattr(config, "hidden_size", 0)),
        )
        optimized.save_model_to_file(str(target))
    except Exception as exc:  # an optional speed-up: never a reason to fail the export
        log.warning("onnxruntime graph fusion failed (%s); using the unfused graph", exc)
        shutil.copyfile(source, target)


class CrossEncoderReranker:
    """A cross-encoder reranker (``loader.models.rerank.Reranker``): it reads each candidate's
    text alone, so it needs no lookup.

    Args:
        model: CrossEncoder name or local folder (bundled names resolve like the embedder's).
        backend: ``torch``, ``onnx`` or ``onnx-int8``.
        max_tokens: tokens of question + passage given to the model (longer pairs are truncated,
            the longer of the two first).
        batch_size: pairs per forward pass. On CPU small batches are not slower: 32 pairs of
            256 tokens make 12 MB activations per layer, which stream through memory, while
            batches of 1-8 stay in cache (measured: onnx-int8 ~20 % faster at 4-8 than at 32).
        device: torch device (``cpu``, ``cuda``); the ONNX backend uses CUDA if onnxruntime has it.
        cache_dir: root of the ONNX exports (default ``onnx_cache_root()``).

    Raises:
        RerankerUnavailableError: ``model`` is no cross-encoder on this machine (decided from its
            files, before torch is imported); ModelError: the model cannot be loaded or
            exported; ConfigError: an unknown backend.
    """

    def __init__(
        self,
        model: str,
        backend: str = "torch",
        max_tokens: int = 256,
        batch_size: int = 8,
        device: str = "cpu",
        cache_dir: str | Path | None = None,
    ) -> None:
        if backend not in BACKENDS:
            raise ConfigError(
                f"rerank_backend must be one of {', '.join(BACKENDS)}, got {backend!r}"
            )
        if max_tokens < 8:
            raise ConfigError(f"rerank_max_tokens must be at least 8, got {max_tokens}")
        if batch_size < 1:
            raise ConfigError(f"rerank_batch_size must be at least 1, got {batch_size}")
        require_reranker(model)
        self.name = model
        self.backend = backend
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self.device = device
        self.path = resolve_model_path(model)
        self._cross_encoder: Any = None
        self._onnx: _OnnxScorer | None = None
        if backend == "torch":
            self._cross_encoder = _load_cross_encoder(model, self.path, max_tokens, device)
        else:
            self._onnx = self._load_onnx(Path(cache_dir) if cache_dir else onnx_cache_root())
        log.info("reranker %s loaded (backend %s, max %d tokens)", model, backend, max_tokens)

    def _load_onnx(self, cache_root: Path) -> _OnnxScorer:
        quantize = self.backend == "onnx-int8"
        cross_encoder = _load_cross_encoder(self.name, self.path, self.max_tokens, "cpu")
        target = cache_root / _model_fingerprint(self.path)
        onnx_path = target / (ONNX_INT8_FILE if quantize else ONNX_FILE)
        if not onnx_path.is_file():
            if target.exists():  # an export without the int8 file: redo it whole
                shutil.rmtree(target, ignore_errors=True)
            log.info("exporting reranker %s to ONNX in %s (once)", self.name, target)
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                # Always quantize too: the int8 file is cheap to make and then ready.
                _export_onnx(cross_encoder, target, quantize=True)
            except Exception as exc:
                raise ModelError(
                    f"cannot export reranker model {self.name!r} to ONNX in {target}: {exc}; "
                    "set rerank_backend=torch"
                ) from exc
        return _OnnxScorer(onnx_path, cross_encoder.tokenizer, self.max_tokens, self.device)

    kind = "cross-encoder"

    def lookup(self, query: RerankQuery, hits: Sequence[Candidate]) -> None:
        """Nothing to ask the index: the passages' text is on the hits."""
        return None

    def score(
        self, query: RerankQuery, hits: Sequence[Candidate], answers: object = None
    ) -> list[float]:
        """Each hit's relevance to ``query.question``, from its text (``rerank``)."""
        return self.rerank(query.question, [hit.text or hit.body for hit in hits])

    def rerank(self, question: str, passages: list[str]) -> list[float]:
        """Relevance score of each passage for the question, in the passages' order.

        Higher is more relevant; the scale is the model's (a sigmoid for most rerankers).
        """
        if not passages:
            return []
        if self._cross_encoder is not None:
            scores = self._cross_encoder.predict(
                [(question, passage) for passage in passages],
                batch_size=self.batch_size,
                show_progress_bar=False,
                convert_to_numpy=True,
            )
            return [float(value) for value in scores.reshape(-1)]
        assert self._onnx is not None
        # Longest first, as CrossEncoder.predict does: batches of similar length pad less.
        order = sorted(range(len(passages)), key=lambda i: len(passages[i]), reverse=True)
        scores = [0.0] * len(passages)
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            batch_scores = self._onnx.score([question] * len(batch), [passages[i] for i in batch])
            for index, score in zip(batch, batch_scores, strict=True):
                scores[index] = score
        return scores


@functools.lru_cache(maxsize=4)
def cached_cross_encoder(
    model: str, backend: str, max_tokens: int, batch_size: int, device: str
) -> CrossEncoderReranker:
    """The process-wide cross-encoder of these settings, loaded once."""
    return CrossEncoderReranker(
        model, backend=backend, max_tokens=max_tokens, batch_size=batch_size, device=device
    )
