"""The index's embedding model inside OpenSearch (ml-commons), for server-side query embedding.

With ``server_side_embedding`` on, ``loader apply`` puts the configured sentence-transformers model
(the one ``loader push`` embeds chunks with) on the cluster, so applications can call the
text-only search templates (``<alias>-hybrid_text``, ``<alias>-vector_text``) with a question and
no vector. Steps, each idempotent:

1. **export** the model to what ml-commons runs offline: the transformer as ONNX (outputs the token
   embeddings; ml-commons mean-pools and normalises them, as sentence-transformers does) zipped
   with ``tokenizer.json``. Cached under ``~/.cache/loader/ml/<fingerprint>``;
2. **register** it with the chunked upload API (``_plugins/_ml/models/_register_meta`` then
   ``upload_chunk/<n>``): nothing is downloaded from a URL. The registered name carries a
   fingerprint of the model's files (``<model>-<fingerprint>``), so the same model content is
   found again by name (same id) and a new model gets a new name and a new id;
3. **deploy** it and wait for the task.

Where the model id lives: in ml-commons' own model index, found by that name (and its content
hash); ``loader apply`` renders it into the text-only templates. Nothing else records it.

Example::

    model = ensure_model(connect(settings), settings)
    model.model_id, model.state        # ('Xk3...', 'DEPLOYED')
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loader.cluster.client import cluster_errors
from loader.errors import ClusterError, ModelError
from loader.models.onnx_export import trace_to_onnx
from loader.settings import Settings

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

log = logging.getLogger(__name__)

ML_BASE = "/_plugins/_ml"
MODEL_GROUP_NAME = "loader"
ONNX_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
# ml-commons' upload API takes the zip in pieces of at most 10 MB (decimal, it turns out).
CHUNK_BYTES = 8 * 1024 * 1024
# Bump when the export changes (opset, outputs, tokenizer settings): a new fingerprint, a new model.
EXPORT_FORMAT = 1
ONNX_OPSET = 15  # ml-commons 3.x runs onnxruntime 1.16, which reads opsets up to 19
ONNX_IR_VERSION = 8  # onnxruntime 1.16 reads IR versions up to 9
DEPLOYED = "DEPLOYED"
# States of a registered model whose content is complete (it can be deployed or is).
USABLE_STATES = frozenset(
    {"REGISTERED", DEPLOYED, "DEPLOYING", "PARTIALLY_DEPLOYED", "DEPLOY_FAILED", "UNDEPLOYED"}
)
TASK_POLL_SECONDS = 1.0
DEPLOY_TIMEOUT_SECONDS = 300.0
# Model files whose bytes define the model: the fingerprint hashes these.
FINGERPRINT_FILES = ("config.json", "model.safetensors", "pytorch_model.bin", TOKENIZER_FILE)


@dataclass(frozen=True)
class ModelPackage:
    """The exported model zip and what ml-commons' register call needs to know about it."""

    name: str  # registered name: "<model>-<fingerprint>"
    path: Path  # the zip
    content_hash: str  # sha256 of the zip
    size: int  # bytes
    dimension: int
    fingerprint: str

    def register_body(self, model_group_id: str) -> dict[str, Any]:
        """The ``_register_meta`` body: an ONNX sentence-transformers text embedder."""
        return {
            "name": self.name,
            "version": "1",
            "description": f"loader: {self.name} (fingerprint {self.fingerprint})",
            "model_group_id": model_group_id,
            "function_name": "TEXT_EMBEDDING",
            "model_format": "ONNX",
            "model_content_hash_value": self.content_hash,
            "model_content_size_in_bytes": self.size,
            "total_chunks": max(1, math.ceil(self.size / CHUNK_BYTES)),
            "model_config": {
                "model_type": "bert",
                "embedding_dimension": self.dimension,
                "framework_type": "sentence_transformers",
                "pooling_mode": "mean",
                "normalize_result": True,
            },
        }


@dataclass(frozen=True)
class ModelStatus:
    """What the cluster holds of a model package: its id (``None`` if not registered) and state."""

    name: str
    model_id: str | None
    state: str | None

    @property
    def deployed(self) -> bool:
        return self.state == DEPLOYED


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


def _export_zip(embedder: Any, target: Path, zip_name: str) -> None:
    """Write ``<target>/<zip_name>``: the transformer as ONNX plus a tokenizer.json whose
    truncation matches the model's ``max_seq_length`` (the file's own says 128 and pads to 128)."""
    try:
        import onnx
        import torch
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise ModelError(
            f"exporting the embedding model for ml-commons needs onnx: pip install 'loader[onnx]' "
            f"({exc})"
        ) from exc

    model = embedder.model
    transformer = model[0].auto_model.eval()
    tokenizer = model.tokenizer
    input_names = ["input_ids", "attention_mask", "token_type_ids"]

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

    example = tokenizer(["an example sentence to trace"], return_tensors="pt")
    tmp = Path(tempfile.mkdtemp(prefix=".export-", dir=target.parent))
    try:
        onnx_path = tmp / ONNX_FILE
        try:
            trace_to_onnx(
                _TokenEmbeddings(),
                example,
                input_names,
                "last_hidden_state",
                {0: "batch", 1: "tokens"},
                onnx_path,
                ONNX_OPSET,
            )
            exported = onnx.load(str(onnx_path))
            exported.ir_version = min(exported.ir_version, ONNX_IR_VERSION)
            onnx.save(exported, str(onnx_path))
        except Exception as exc:  # the exporter raises many kinds; all mean "cannot export"
            raise ModelError(f"cannot export {embedder.name!r} to ONNX: {exc}") from exc

        fast = Tokenizer.from_file(str(Path(embedder.path) / TOKENIZER_FILE))
        fast.no_padding()
        fast.enable_truncation(max_length=int(embedder.max_seq_length))
        fast.save(str(tmp / TOKENIZER_FILE))

        # Fixed timestamps: the same export zips to the same bytes.
        with zipfile.ZipFile(tmp / zip_name, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for member in (ONNX_FILE, TOKENIZER_FILE):
                info = zipfile.ZipInfo(member, date_time=(2020, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, (tmp / member).read_bytes())
        (tmp / ONNX_FILE).unlink()
        (tmp / TOKENIZER_FILE).unlink()
        # Rename into place last: a concurrent process sees a complete export or none.
        try:
            tmp.rename(target)
        except OSError:
            if not (target / zip_name).is_file():
                raise
    finally:
        if tmp.exists():
            for leftover in tmp.iterdir():
                leftover.unlink()
            tmp.rmdir()
    log.info("exported %s for ml-commons to %s", embedder.name, target / zip_name)


# --- the cluster side --------------------------------------------------------------------------


def _request(client: OpenSearch, method: str, path: str, **kwargs: Any) -> Any:
    return client.transport.perform_request(method, path, **kwargs)


def _search_ml(client: OpenSearch, what: str, query: dict[str, Any]) -> list[dict[str, Any]]:
    """Hits of ``_plugins/_ml/<what>/_search``; no hits when the ml index does not exist yet."""
    answer = _request(
        client, "POST", f"{ML_BASE}/{what}/_search", body={"query": query, "size": 10}
    )
    return (answer or {}).get("hits", {}).get("hits", [])


def find_model(client: OpenSearch, settings: Settings, package: ModelPackage) -> ModelStatus:
    """The registered model with the package's name and content hash, if any. Changes nothing.

    Args:
        client: from ``loader.cluster.client.connect``.
        settings: for error messages.
        package: from ``export_model``.

    Returns:
        Its id and state; ``model_id`` is ``None`` when it is not registered.
    """
    query = {
        "bool": {
            "filter": [
                {"term": {"name.keyword": package.name}},
                {"term": {"model_content_hash_value": package.content_hash}},
            ],
            # The uploaded chunks are documents of the same index.
            "must_not": [{"exists": {"field": "chunk_number"}}],
        }
    }
    with cluster_errors(settings, f"looking up ml model {package.name}"):
        hits = _search_ml(client, "models", query)
    # A model left REGISTERING (an upload that stopped half-way) or failed is not reused.
    usable = [hit for hit in hits if (hit.get("_source") or {}).get("model_state") in USABLE_STATES]
    if not usable:
        return ModelStatus(package.name, None, None)
    # Prefer a deployed copy (two registrations can exist after an interrupted apply).
    usable.sort(key=lambda hit: (hit["_source"].get("model_state") != DEPLOYED, hit["_id"]))
    best = usable[0]
    return ModelStatus(package.name, best["_id"], best["_source"].get("model_state"))


def _model_group_id(client: OpenSearch, settings: Settings) -> str:
    """The id of the ``loader`` model group, registered on first use."""
    with cluster_errors(settings, f"looking up ml model group {MODEL_GROUP_NAME}"):
        hits = _search_ml(client, "model_groups", {"term": {"name.keyword": MODEL_GROUP_NAME}})
        if hits:
            return hits[0]["_id"]
        answer = _request(
            client,
            "POST",
            f"{ML_BASE}/model_groups/_register",
            body={"name": MODEL_GROUP_NAME, "description": "Models registered by loader apply"},
        )
    return answer["model_group_id"]


def register_model(client: OpenSearch, settings: Settings, package: ModelPackage) -> str:
    """Register the package through the chunked upload API (no URL download).

    Returns:
        The new model id.
    """
    group_id = _model_group_id(client, settings)
    body = package.register_body(group_id)
    with cluster_errors(settings, f"registering ml model {package.name}"):
        answer = _request(client, "POST", f"{ML_BASE}/models/_register_meta", body=body)
    model_id = answer["model_id"]
    try:
        with (
            cluster_errors(settings, f"uploading ml model {package.name} ({model_id})"),
            package.path.open("rb") as handle,
        ):
            for number in range(body["total_chunks"]):
                _request(
                    client,
                    "POST",
                    f"{ML_BASE}/models/{model_id}/upload_chunk/{number}",
                    # Sent as the client's default application/json: ml-commons reads the raw
                    # bytes and answers 406 to application/octet-stream.
                    body=handle.read(CHUNK_BYTES),
                )
    except ClusterError:
        # Leave no half-uploaded model behind (it would stay REGISTERING for ever).
        _request(client, "DELETE", f"{ML_BASE}/models/{model_id}", params={"ignore": 404})
        raise
    log.info(
        "registered ml model %s as %s (%d chunks)", package.name, model_id, body["total_chunks"]
    )
    return model_id


def _model_state(client: OpenSearch, settings: Settings, model_id: str) -> dict[str, Any]:
    with cluster_errors(settings, f"reading ml model {model_id}"):
        return _request(client, "GET", f"{ML_BASE}/models/{model_id}")


def _wait_registered(client: OpenSearch, settings: Settings, model_id: str, timeout: float) -> None:
    """The upload's chunks are merged asynchronously; wait until the model is REGISTERED."""
    deadline = time.monotonic() + timeout
    while True:
        state = _model_state(client, settings, model_id).get("model_state")
        if state in ("REGISTERED", DEPLOYED, "DEPLOYING", "PARTIALLY_DEPLOYED"):
            return
        if state in ("REGISTER_FAILED", "FAILED"):
            raise ClusterError(f"ml model {model_id} failed to register (state {state})")
        if time.monotonic() > deadline:
            raise ClusterError(f"ml model {model_id} still {state} after {timeout:g} s")
        time.sleep(TASK_POLL_SECONDS)


def deploy_model(
    client: OpenSearch,
    settings: Settings,
    model_id: str,
    timeout: float = DEPLOY_TIMEOUT_SECONDS,
) -> None:
    """Deploy a registered model and wait for the deploy task.

    Raises:
        ClusterError: the task failed (ml-commons' reason kept, e.g. a native library that could
            not load) or did not finish within ``timeout`` seconds.
    """
    _wait_registered(client, settings, model_id, timeout)
    with cluster_errors(settings, f"deploying ml model {model_id}"):
        answer = _request(client, "POST", f"{ML_BASE}/models/{model_id}/_deploy")
    task_id = answer.get("task_id")
    deadline = time.monotonic() + timeout
    while task_id:
        with cluster_errors(settings, f"reading ml task {task_id}"):
            task = _request(client, "GET", f"{ML_BASE}/tasks/{task_id}")
        state = task.get("state")
        if state == "COMPLETED":
            break
        if state in ("FAILED", "COMPLETED_WITH_ERROR", "CANCELLED"):
            raise ClusterError(
                f"deploying ml model {model_id} failed ({state}): {task.get('error', task)}; "
                "see the node's log"
            )
        if time.monotonic() > deadline:
            raise ClusterError(f"deploying ml model {model_id}: task {task_id} still {state}")
        time.sleep(TASK_POLL_SECONDS)
    log.info("deployed ml model %s", model_id)


def model_status(
    client: OpenSearch, settings: Settings, package: ModelPackage | None = None
) -> ModelStatus:
    """Like ``find_model``, exporting the package first when it is not given."""
    return find_model(client, settings, package or export_model(settings))


def ensure_model(
    client: OpenSearch, settings: Settings, package: ModelPackage | None = None
) -> ModelStatus:
    """Register (if new) and deploy (if not deployed) the index's embedding model.

    Args:
        client: from ``loader.cluster.client.connect``.
        settings: ``embedding_model`` names the model.
        package: from ``export_model`` (default: exported now, or taken from the cache).

    Returns:
        The deployed model's status; the same model content always gives the same id.
    """
    package = package or export_model(settings)
    status = find_model(client, settings, package)
    model_id = status.model_id or register_model(client, settings, package)
    if not status.deployed:
        deploy_model(client, settings, model_id)
    return ModelStatus(package.name, model_id, DEPLOYED)


def embed_on_cluster(client: OpenSearch, settings: Settings, model_id: str, texts: list[str]):
    """Vectors ml-commons computes for ``texts`` (its ``_predict`` API), one list per text."""
    with cluster_errors(settings, f"embedding with ml model {model_id}"):
        answer = _request(
            client,
            "POST",
            f"{ML_BASE}/_predict/text_embedding/{model_id}",
            body={"text_docs": list(texts), "target_response": ["sentence_embedding"]},
        )
    vectors = []
    for result in answer.get("inference_results", []):
        outputs = {output.get("name"): output for output in result.get("output", [])}
        vectors.append([float(value) for value in outputs["sentence_embedding"]["data"]])
    return vectors


def describe(package: ModelPackage) -> str:
    """One line for plans and logs."""
    return json.dumps({"name": package.name, "sha256": package.content_hash[:12]})
