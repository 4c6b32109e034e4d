"""The embedding model as ml-commons runs it offline.

``export_model``: the ONNX file the configured backend runs (the same bytes: the local one is
``loader.models.onnx_file``'s), zipped with a ``tokenizer.json`` whose truncation matches the
model's limit, for ml-commons, cached under ``~/.cache/loader/ml/<fingerprint>`` (the fingerprint
hashes the zip's contents), so the same model gives the same zip and a new model a new one.
ml-commons pools and normalises as the model's ``ModelSpec`` says. Registering it is
``loader.index.ml_model``'s job.

Example::

    package = export_model(settings)
    package.name, package.path      # ('all-MiniLM-L6-v2-3f9c...', PosixPath('.../....zip'))
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from loader.errors import ModelError
from loader.models.artifacts import file_sha256, models_cache_root
from loader.models.onnx_file import EXPORT_FORMAT, ONNX_FILE, TOKENIZER_FILE
from loader.models.registry import ModelSpec
from loader.models.scratch import scratch_folder
from loader.settings import Settings

if TYPE_CHECKING:
    from loader.models.embedding import Embedder

log = logging.getLogger(__name__)

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

    tmp = scratch_folder(target.parent, ".export-")
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
