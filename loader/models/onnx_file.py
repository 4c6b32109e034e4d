"""The local ONNX file of a sentence-transformers BERT model, which the ONNX embedding backends
run and ``embedding_export`` zips for ml-commons.

- ``model_fingerprint``: a hash of the files that define a model and of the export format;
- ``local_onnx_export``: the model's encoder written to ONNX once from its safetensors weights by
  ``bert_onnx`` (numpy and onnx, no torch; it outputs the token states, pooling is the
  backend's), cached under ``~/.cache/loader/models/<name>-<fingerprint>``. A jar-shipped model
  (bge) brings its own ONNX file. Other architectures run with ``embedding_backend = "torch"``.
- ``drop_local_onnx_exports``: those exports of a scratch folder, deleted with it;
- ``discard_derived_copy``: an export or int8 copy that cannot be loaded, deleted to be made again.

Apart from ``embedding`` (which runs the file) and ``embedding_export`` (which packages it), so
that both import it and neither imports the other for it.

Example::

    path = local_onnx_export("all-MiniLM-L6-v2", Path("models/all-MiniLM-L6-v2"))
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import logging
import os
import shutil
from pathlib import Path

from loader.errors import ModelError
from loader.models.artifacts import models_cache_root
from loader.models.registry import INT8_RECIPE
from loader.models.scratch import scratch_folder

log = logging.getLogger(__name__)

ONNX_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
# Bump when the export changes (opset, outputs, tokenizer settings): a new fingerprint, a new model.
# 3: eager attention (no SDPA NaN guards), the same vectors. 4: written from the safetensors
# weights without torch (bert_onnx), the same vectors; a new file, so a new registered model.
EXPORT_FORMAT = 4
# Model files whose bytes define the model: the fingerprint hashes these.
FINGERPRINT_FILES = ("config.json", "model.safetensors", "pytorch_model.bin", TOKENIZER_FILE)


def drop_local_onnx_exports(folder: Path, cache_root: Path | None = None) -> list[Path]:
    """Delete the cached ONNX exports (and their int8 copies) of a scratch model folder, one
    whose model was only measured and whose files go away: nothing can read them again, and
    each is the size of the model (87 MB for MiniLM; ``loader adapt`` left one a run).

    Only for folders with a name of their own (not a package's ``model/``): the exports are
    found by it, ``<name>-<fingerprint>``, as ``local_onnx_export`` names them.

    Returns:
        The folders deleted.
    """
    root = cache_root or models_cache_root()
    dropped = []
    for export in root.glob(f"{glob.escape(folder.name)}-*"):
        if _is_export_name(export.name, folder.name):
            shutil.rmtree(export, ignore_errors=True)
            dropped.append(export)
    return dropped


def discard_derived_copy(onnx_path: Path, cache_root: Path | None = None) -> bool:
    """Delete ``onnx_path`` if it is a file made here from another, which can be made again: an
    int8 copy (with what was measured of it on this CPU) or a local export (its whole folder,
    int8 copy included). A file killed mid-write or damaged on disk then heals on the next load
    instead of failing every one. Any other file (a jar's, the user's own) is left as it is.

    Returns:
        Whether it was deleted.
    """
    root = (cache_root or models_cache_root()).resolve()
    path = onnx_path.resolve()
    if root not in path.parents:
        return False
    if path.name.endswith(f"_int8-{INT8_RECIPE}.onnx"):
        path.unlink(missing_ok=True)
        path.with_name(path.name + ".cpu-agreement.json").unlink(missing_ok=True)
        return True
    if path.name == ONNX_FILE and path.parent.parent == root and _is_export_name(path.parent.name):
        shutil.rmtree(path.parent, ignore_errors=True)
        return True
    return False


def _is_export_name(name: str, base: str | None = None) -> bool:
    """``<base>-<16 hex>``, as ``local_onnx_export`` names its folders (any base when None)."""
    stem, _, suffix = name.rpartition("-")
    return (
        (base is None or stem == base)
        and len(suffix) == 16
        and all(c in "0123456789abcdef" for c in suffix)
    )


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
    tmp = scratch_folder(target.parent, ".export-")
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
