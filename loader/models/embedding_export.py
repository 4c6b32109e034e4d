"""The embedding model as ONNX: the local ONNX backend's file and what ml-commons runs offline.

- ``local_onnx_export``: a sentence-transformers BERT model's encoder written to ONNX once from
  its safetensors weights by ``bert_onnx`` (numpy and onnx, no torch; it outputs the token
  states, pooling is the backend's), cached under ``~/.cache/loader/models/<name>-<fingerprint>``,
  where the fingerprint hashes the model's files and the export format. A jar-shipped model (bge)
  brings its own ONNX file. Other architectures run with ``embedding_backend = "torch"``.
- ``export_model``: the ONNX file the configured backend runs (the same bytes), zipped with a
  ``tokenizer.json`` whose truncation matches the model's limit, for ml-commons, cached under
  ``~/.cache/loader/ml/<fingerprint>`` (the fingerprint hashes the zip's contents), so the same
  model gives the same zip and a new model a new one. ml-commons pools and normalises as the
  model's ``ModelSpec`` says. Registering it is ``loader.index.ml_model``'s job.

Example::

    package = export_model(settings)
    package.name, package.path      # ('all-MiniLM-L6-v2-3f9c...', PosixPath('.../....zip'))
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from loader.errors import ModelError
from loader.models.artifacts import file_sha256, models_cache_root
from loader.models.registry import ModelSpec
from loader.settings import Settings

if TYPE_CHECKING:
    from loader.models.embedding import Embedder

log = logging.getLogger(__name__)

ONNX_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
# Bump when the export changes (opset, outputs, tokenizer settings): a new fingerprint, a new model.
# 3: eager attention (no SDPA NaN guards), the same vectors. 4: written from the safetensors
# weights without torch (bert_onnx), the same vectors; a new file, so a new registered model.
EXPORT_FORMAT = 4
# Model files whose bytes define the model: the fingerprint hashes these.
FINGERPRINT_FILES = ("config.json", "model.safetensors", "pytorch_model.bin", TOKENIZER_FILE)
# Fixed timestamps: the same export zips to the same bytes.
ZIP_DATE_TIME = (2020, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class ModelPackage:
    """The exported model zip and what ml-commons' register call needs to know about it."""

    name: str  # registered name: "<model>-<fingerprint>[-i<instructions digest>]"
    path: Path  # the zip
    content_hash: str  # sha256 of the zip
    size: int  # bytes
    dimension: int
    fingerprint: str
    spec: ModelSpec  # pooling and normalisation ml-commons applies
    query_prefix: str = ""  # instructions ml-commons prepends (neural queries / ingest)
    passage_prefix: str = ""


def describe(package: ModelPackage) -> str:
    """One line for plans and logs."""
    return json.dumps({"name": package.name, "sha256": package.content_hash[:12]})


def ml_cache_root() -> Path:
    """``$XDG_CACHE_HOME/loader/ml`` or ``~/.cache/loader/ml``."""
    return models_cache_root().parent / "ml"


def model_fingerprint(model_path: str | Path) -> str:
    """A hash of the files that define a model (weights, config, tokenizer) and the export format.

    Args:
        model_path: the sentence-transformers model folder.

    Returns:
        16 hex characters; equal for equal model content.
    """
    folder = Path(model_path)
    files = [(name, folder / name) for name in FINGERPRINT_FILES if (folder / name).is_file()]
    if not files:
        raise ModelError(
            f"embedding model folder {folder} has none of {', '.join(FINGERPRINT_FILES)}; "
            "set embedding_model to a local sentence-transformers folder"
        )
    # Hashing the weights costs ~70 ms a process (90 MB for MiniLM), on every search's start:
    # the result is kept under the files' identity (inode, size, change times), which any
    # write changes.
    identity = hashlib.sha256(f"{EXPORT_FORMAT}:{folder.resolve()}".encode())
    for name, path in files:
        stat = path.stat()
        identity.update(
            f"{name}:{stat.st_ino}:{stat.st_size}:{stat.st_mtime_ns}:{stat.st_ctime_ns}".encode()
        )
    memo = models_cache_root() / "fingerprints" / identity.hexdigest()[:32]
    with contextlib.suppress(OSError, UnicodeDecodeError):
        known = memo.read_text(encoding="ascii").strip()
        if len(known) == 16:
            return known
    digest = hashlib.sha256(f"export-format-{EXPORT_FORMAT}".encode())
    for name, path in files:
        digest.update(name.encode())
        with path.open("rb") as handle:
            for block in iter(lambda handle=handle: handle.read(1 << 20), b""):
                digest.update(block)
    fingerprint = digest.hexdigest()[:16]
    with contextlib.suppress(OSError):  # a cache that cannot be written: hashed next time
        memo.parent.mkdir(parents=True, exist_ok=True)
        partial = memo.with_name(f".{memo.name}.{os.getpid()}")
        partial.write_text(fingerprint, encoding="ascii")
        partial.replace(memo)  # whole or absent for a concurrent reader
    return fingerprint


# --- the local ONNX file of a sentence-transformers model ---------------------------------------


def local_onnx_export(name: str, folder: Path, cache_root: Path | None = None) -> Path:
    """The encoder of a sentence-transformers BERT folder as ONNX (token states), written once
    from its safetensors weights (``bert_onnx``: numpy and onnx, no torch).

    Raises:
        ModelError: the folder is not a local BERT model with ``model.safetensors`` (such models
            run with ``embedding_backend = "torch"``), or its files cannot be read.
    """
    if not folder.is_dir():
        raise ModelError(
            f"embedding model {name!r} is not a local folder; the ONNX backends need its files: "
            'set embedding_model to a local folder, or embedding_backend = "torch" '
            "(pip install 'loader[torch]')"
        )
    # A package's model/ folder is named after the model.
    base = Path(name).name if folder.name == "model" else folder.name
    target = (cache_root or models_cache_root()) / f"{base}-{model_fingerprint(folder)}"
    onnx_path = target / ONNX_FILE
    if onnx_path.is_file():
        return onnx_path
    from loader.models.bert_onnx import NotBertError, write_bert_onnx

    log.info("writing embedding model %s as ONNX in %s (once)", name, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".export-", dir=target.parent))
    try:
        try:
            write_bert_onnx(folder, tmp / ONNX_FILE)
        except NotBertError as exc:
            raise ModelError(
                f"embedding model {name!r} ({folder}) cannot run on the ONNX backends, which "
                f"read BERT models with model.safetensors: {exc}. Set "
                "embedding_backend = \"torch\" and pip install 'loader[torch]'"
            ) from exc
        # Rename into place last: a concurrent process sees a complete export or none.
        try:
            tmp.rename(target)
        except OSError:
            if not onnx_path.is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return onnx_path


# --- the ml-commons package ----------------------------------------------------------------------


def export_model(settings: Settings, cache_root: Path | None = None) -> ModelPackage:
    """Zip the ONNX file the configured backend runs (fp32 for ``torch``) for ml-commons, once
    per model content.

    Args:
        settings: ``embedding_model`` and ``embedding_backend`` name the model and its file.
        cache_root: where packages are kept (default ``ml_cache_root()``).

    Returns:
        The package to register.

    Raises:
        ModelError: the model cannot be loaded or exported, or its pooling is not known.
    """
    from loader.models.embedding import embedder_for, onnx_model_file

    embedder = embedder_for(settings)
    if embedder.spec is None:
        raise ModelError(
            f"embedding model {settings.embedding_model!r}: server-side embedding needs its "
            "pooling (a local sentence-transformers folder with 1_Pooling/config.json)"
        )
    backend = "onnx" if settings.embedding_backend == "torch" else settings.embedding_backend
    onnx_path = onnx_model_file(embedder.name, embedder.path, backend)
    tokenizer = Path(embedder.path) / TOKENIZER_FILE
    digest = hashlib.sha256(f"export-format-{EXPORT_FORMAT}:{embedder.spec}".encode())
    digest.update(file_sha256(onnx_path).encode() + file_sha256(tokenizer).encode())
    fingerprint = digest.hexdigest()[:16]
    content_name = f"{Path(embedder.spec.name).name}-{fingerprint}"
    target = (cache_root or ml_cache_root()) / fingerprint
    zip_path = target / f"{content_name}.zip"
    if not zip_path.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        _export_zip(onnx_path, tokenizer, embedder.spec.max_tokens, target, zip_path.name)
    return ModelPackage(
        name=content_name + _instructions_suffix(embedder),
        path=zip_path,
        content_hash=file_sha256(zip_path),
        size=zip_path.stat().st_size,
        dimension=embedder.dimension,
        fingerprint=fingerprint,
        spec=embedder.spec,
        query_prefix=embedder.query_prefix,
        passage_prefix=embedder.passage_prefix,
    )


def _instructions_suffix(embedder: Embedder) -> str:
    """``-i<digest>`` where the instructions are not the model's own, else nothing.

    The model is looked up by name, and ml-commons keeps the instructions in the model's config:
    without this, a changed ``query_prefix`` or ``query_instruction`` would find the model
    registered with the old ones, and neural queries would embed questions unlike the client.
    """
    own = (embedder.spec.query_prefix, embedder.spec.passage_prefix)
    used = (embedder.query_prefix, embedder.passage_prefix)
    if used == own:
        return ""
    return "-i" + hashlib.sha256("\x00".join(used).encode()).hexdigest()[:8]


def _export_zip(
    onnx_path: Path, tokenizer: Path, max_tokens: int, target: Path, zip_name: str
) -> None:
    """Write ``<target>/<zip_name>``: the ONNX file plus a tokenizer.json without padding,
    truncated at the model's limit (MiniLM's own file says 128 and pads to 128)."""
    from tokenizers import Tokenizer

    tmp = Path(tempfile.mkdtemp(prefix=".export-", dir=target.parent))
    try:
        fast = Tokenizer.from_file(str(tokenizer))
        fast.no_padding()
        fast.enable_truncation(max_length=max_tokens)
        fast.save(str(tmp / TOKENIZER_FILE))
        with zipfile.ZipFile(tmp / zip_name, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for member, source in ((ONNX_FILE, onnx_path), (TOKENIZER_FILE, tmp / TOKENIZER_FILE)):
                info = zipfile.ZipInfo(member, date_time=ZIP_DATE_TIME)
                info.compress_type = zipfile.ZIP_DEFLATED
                with archive.open(info, "w") as sink, source.open("rb") as handle:
                    shutil.copyfileobj(handle, sink, 1 << 20)
        (tmp / TOKENIZER_FILE).unlink()
        # Rename into place last: a concurrent process sees a complete export or none.
        try:
            tmp.rename(target)
        except OSError:
            if not (target / zip_name).is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log.info("packaged %s for ml-commons as %s", onnx_path, target / zip_name)
