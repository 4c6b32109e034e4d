"""The embedding model exported to what ml-commons runs offline: an ONNX zip, once per model.

The transformer is traced to ONNX (it outputs the token embeddings; ml-commons mean-pools and
normalises them, as sentence-transformers does) and zipped with a ``tokenizer.json`` whose
truncation matches the model's ``max_seq_length``. The export is cached under
``~/.cache/loader/ml/<fingerprint>``, where the fingerprint hashes the model's files and the export
format, so the same model content gives the same zip (same bytes) and a new model a new one.
Registering and deploying the zip on the cluster is ``loader.index.ml_model``'s job.

Example::

    package = export_model(settings)
    package.name, package.path      # ('all-MiniLM-L6-v2-3f9c...', PosixPath('.../....zip'))
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loader.errors import ModelError
from loader.models.onnx_export import trace_to_onnx
from loader.settings import Settings

if TYPE_CHECKING:
    from loader.models.embedding import Embedder

log = logging.getLogger(__name__)

ONNX_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
# Bump when the export changes (opset, outputs, tokenizer settings): a new fingerprint, a new model.
EXPORT_FORMAT = 1
ONNX_OPSET = 15  # ml-commons 3.x runs onnxruntime 1.16, which reads opsets up to 19
ONNX_IR_VERSION = 8  # onnxruntime 1.16 reads IR versions up to 9
# ml-commons feeds input_ids, attention_mask and token_type_ids (model_type bert).
ONNX_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
# Model files whose bytes define the model: the fingerprint hashes these.
FINGERPRINT_FILES = ("config.json", "model.safetensors", "pytorch_model.bin", TOKENIZER_FILE)
# Fixed timestamps: the same export zips to the same bytes.
ZIP_DATE_TIME = (2020, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class ModelPackage:
    """The exported model zip and what ml-commons' register call needs to know about it."""

    name: str  # registered name: "<model>-<fingerprint>"
    path: Path  # the zip
    content_hash: str  # sha256 of the zip
    size: int  # bytes
    dimension: int
    fingerprint: str


def describe(package: ModelPackage) -> str:
    """One line for plans and logs."""
    return json.dumps({"name": package.name, "sha256": package.content_hash[:12]})


def ml_cache_root() -> Path:
    """``$XDG_CACHE_HOME/loader/ml`` or ``~/.cache/loader/ml``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "loader" / "ml"


def model_fingerprint(model_path: str | Path) -> str:
    """A hash of the files that define a model (weights, config, tokenizer) and the export format.

    Args:
        model_path: the sentence-transformers model folder.

    Returns:
        16 hex characters; equal for equal model content.
    """
    folder = Path(model_path)
    digest = hashlib.sha256(f"export-format-{EXPORT_FORMAT}".encode())
    found = False
    for name in FINGERPRINT_FILES:
        path = folder / name
        if path.is_file():
            found = True
            digest.update(name.encode())
            with path.open("rb") as handle:
                for block in iter(lambda handle=handle: handle.read(1 << 20), b""):
                    digest.update(block)
    if not found:
        raise ModelError(
            f"embedding model folder {folder} has none of {', '.join(FINGERPRINT_FILES)}; "
            "set embedding_model to a local sentence-transformers folder"
        )
    return digest.hexdigest()[:16]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def export_model(settings: Settings, cache_root: Path | None = None) -> ModelPackage:
    """Export ``settings.embedding_model`` to an ml-commons ONNX zip, once per model content.

    Args:
        settings: ``embedding_model`` names the model (a bundled name or a local folder).
        cache_root: where exports are kept (default ``ml_cache_root()``).

    Returns:
        The package to register.

    Raises:
        ModelError: the model cannot be loaded or exported (``pip install 'loader[onnx]'``).
    """
    from loader.models.embedding import embedder_for

    embedder = embedder_for(settings)
    folder = Path(embedder.path)
    if not folder.is_dir():
        raise ModelError(
            f"embedding model {settings.embedding_model!r} is not a local folder; server-side "
            "embedding exports the model's files, set embedding_model to a local folder"
        )
    fingerprint = model_fingerprint(folder)
    base = folder.name if folder.name != "model" else settings.embedding_model
    name = f"{Path(base).name}-{fingerprint}"
    target = (cache_root or ml_cache_root()) / fingerprint
    zip_path = target / f"{name}.zip"
    if not zip_path.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        _export_zip(embedder, target, zip_path.name)
    return ModelPackage(
        name=name,
        path=zip_path,
        content_hash=_sha256(zip_path),
        size=zip_path.stat().st_size,
        dimension=embedder.dimension,
        fingerprint=fingerprint,
    )


# --- writing the zip ---------------------------------------------------------------------------


def _export_zip(embedder: Embedder, target: Path, zip_name: str) -> None:
    """Write ``<target>/<zip_name>``: the transformer as ONNX plus a tokenizer.json whose
    truncation matches the model's ``max_seq_length`` (the file's own says 128 and pads to 128)."""
    _require_export_libraries()
    module, example = _token_embeddings(embedder)
    tmp = Path(tempfile.mkdtemp(prefix=".export-", dir=target.parent))
    try:
        _write_onnx(module, example, tmp / ONNX_FILE, embedder.name)
        _write_tokenizer(embedder, tmp / TOKENIZER_FILE)
        _write_zip(tmp, zip_name, (ONNX_FILE, TOKENIZER_FILE))
        # Rename into place last: a concurrent process sees a complete export or none.
        try:
            tmp.rename(target)
        except OSError:
            if not (target / zip_name).is_file():
                raise
    finally:
        _remove_folder(tmp)
    log.info("exported %s for ml-commons to %s", embedder.name, target / zip_name)


def _require_export_libraries() -> None:
    """Fail early, with the fix, when the optional ``onnx`` extra is not installed."""
    try:
        import onnx  # noqa: F401
        import tokenizers  # noqa: F401
        import torch  # noqa: F401
    except ImportError as exc:
        raise ModelError(
            f"exporting the embedding model for ml-commons needs onnx: pip install 'loader[onnx]' "
            f"({exc})"
        ) from exc


def _token_embeddings(embedder: Embedder) -> tuple[Any, Any]:
    """The transformer as a module whose output is the token embeddings, and an example to trace."""
    import torch

    model = embedder.model
    transformer = model[0].auto_model.eval()

    class _TokenEmbeddings(torch.nn.Module):
        # ml-commons feeds input_ids, attention_mask and token_type_ids (model_type bert) and
        # pools the first output itself.
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids, attention_mask, token_type_ids):  # noqa: ANN001
            return self.transformer(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    example = model.tokenizer(["an example sentence to trace"], return_tensors="pt")
    return _TokenEmbeddings(), example


def _write_onnx(module: Any, example: Any, path: Path, model_name: str) -> None:
    """Trace ``module`` to ``path`` with an IR version ml-commons' onnxruntime reads."""
    import onnx

    try:
        trace_to_onnx(
            module,
            example,
            ONNX_INPUTS,
            "last_hidden_state",
            {0: "batch", 1: "tokens"},
            path,
            ONNX_OPSET,
        )
        exported = onnx.load(str(path))
        exported.ir_version = min(exported.ir_version, ONNX_IR_VERSION)
        onnx.save(exported, str(path))
    except Exception as exc:  # the exporter raises many kinds; all mean "cannot export"
        raise ModelError(f"cannot export {model_name!r} to ONNX: {exc}") from exc


def _write_tokenizer(embedder: Embedder, path: Path) -> None:
    """The model's tokenizer.json without padding, truncated at the model's ``max_seq_length``."""
    from tokenizers import Tokenizer

    fast = Tokenizer.from_file(str(Path(embedder.path) / TOKENIZER_FILE))
    fast.no_padding()
    fast.enable_truncation(max_length=int(embedder.max_seq_length))
    fast.save(str(path))


def _write_zip(folder: Path, zip_name: str, members: tuple[str, ...]) -> None:
    """Zip ``members`` of ``folder`` into ``folder/zip_name`` (same bytes for the same files),
    then remove them."""
    with zipfile.ZipFile(folder / zip_name, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for member in members:
            info = zipfile.ZipInfo(member, date_time=ZIP_DATE_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, (folder / member).read_bytes())
    for member in members:
        (folder / member).unlink()


def _remove_folder(folder: Path) -> None:
    """Remove a flat temporary folder, if it is still there."""
    if folder.exists():
        for leftover in folder.iterdir():
            leftover.unlink()
        folder.rmdir()
