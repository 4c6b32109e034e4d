"""The index's embedding model inside OpenSearch (ml-commons), for server-side query embedding
and for embedding pushed chunks on the cluster.

With ``server_side_embedding`` on, ``loader apply`` puts the configured sentence-transformers model
(the one ``loader push`` embeds chunks with) on the cluster, so applications can call the
text-only search templates (``<alias>-hybrid_text``, ``<alias>-vector_text``) with a question and
no vector. ``embedding_location = cluster`` does the same and has the index's ingest pipeline embed
chunks pushed without a vector (``check_push_embedding`` is push's guard). Steps, each idempotent:

1. **export** the model to what ml-commons runs offline: the ONNX file the client's backend runs
   (outputs the token states; ml-commons pools them as the model's spec says, CLS for bge, mean
   for MiniLM, and normalises) zipped with ``tokenizer.json``. Cached under
   ``~/.cache/loader/ml/<fingerprint>``. That part is ``loader.models.embedding_export``
   (``export_model``); this module is the cluster side;
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

import dataclasses
import json
import logging
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from loader.cluster.client import cluster_errors
from loader.errors import ClusterError, ConfigError
from loader.index.plan import ML_MODEL, SECOND_ML_MODEL, STEP_ML_MODEL, Change
from loader.index.render import config_names
from loader.models.embedding_export import ModelPackage, export_model
from loader.models.readers import reader_settings
from loader.models.registry import effective_prefixes
from loader.settings import Settings

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

log = logging.getLogger(__name__)

ML_BASE = "/_plugins/_ml"
MODEL_GROUP_NAME = "loader"
# ml-commons' upload API takes the zip in pieces of at most 10 MB (decimal, it turns out).
CHUNK_BYTES = 8 * 1024 * 1024
DEPLOYED = "DEPLOYED"
# States of a registered model whose content is complete (it can be deployed or is).
USABLE_STATES = frozenset(
    {"REGISTERED", DEPLOYED, "DEPLOYING", "PARTIALLY_DEPLOYED", "DEPLOY_FAILED", "UNDEPLOYED"}
)
TASK_POLL_SECONDS = 1.0
DEPLOY_TIMEOUT_SECONDS = 300.0


@dataclass(frozen=True)
class ModelStatus:
    """What the cluster holds of a model package: its id (``None`` if not registered) and state."""

    name: str
    model_id: str | None
    state: str | None

    @property
    def deployed(self) -> bool:
        return self.state == DEPLOYED


def register_body(package: ModelPackage, model_group_id: str) -> dict[str, Any]:
    """The ``_register_meta`` body: an ONNX text embedder pooled and normalised as the model's
    spec says (CLS for bge, mean for MiniLM), with its instructions: ml-commons prepends
    ``query_prefix`` to what a neural query embeds, as the client does."""
    model_config: dict[str, Any] = {
        "model_type": "bert",
        "embedding_dimension": package.dimension,
        "framework_type": "sentence_transformers",
        "pooling_mode": package.spec.pooling,
        "normalize_result": package.spec.normalize,
    }
    if package.query_prefix or package.passage_prefix:
        model_config["query_prefix"] = package.query_prefix
        model_config["passage_prefix"] = package.passage_prefix
    return {
        "name": package.name,
        "version": "1",
        "description": f"loader: {package.name} (fingerprint {package.fingerprint})",
        "model_group_id": model_group_id,
        "function_name": "TEXT_EMBEDDING",
        "model_format": "ONNX",
        "model_content_hash_value": package.content_hash,
        "model_content_size_in_bytes": package.size,
        "total_chunks": max(1, math.ceil(package.size / CHUNK_BYTES)),
        "model_config": model_config,
    }


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
    body = register_body(package, group_id)
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


def embed_on_cluster(
    client: OpenSearch,
    settings: Settings,
    model_id: str,
    texts: list[str],
    content_type: str | None = None,
):
    """Vectors ml-commons computes for ``texts`` (its ``_predict`` API), one list per text;
    ``content_type`` ``query`` or ``passage`` applies the model's instruction, as neural queries
    (``query``) do."""
    body: dict[str, Any] = {"text_docs": list(texts), "target_response": ["sentence_embedding"]}
    if content_type is not None:
        body["parameters"] = {"content_type": content_type.upper()}
    with cluster_errors(settings, f"embedding with ml model {model_id}"):
        answer = _request(
            client, "POST", f"{ML_BASE}/_predict/text_embedding/{model_id}", body=body
        )
    vectors = []
    for result in answer.get("inference_results", []):
        outputs = {output.get("name"): output for output in result.get("output", [])}
        vectors.append([float(value) for value in outputs["sentence_embedding"]["data"]])
    return vectors


# --- embedding pushed chunks on the cluster (embedding_location = cluster) ---------------------

# The processor apply puts into the index's ingest pipeline (pipelines/ingest/ingest.json.j2).
EMBEDDING_PROCESSOR = "text_embedding"
VECTOR_FIELD = "embedding"
# Model states in which the processor's predict calls are answered (on some nodes at least).
SERVING_STATES = frozenset({DEPLOYED, "PARTIALLY_DEPLOYED"})


def model_on_cluster(*, server_side_embedding: bool, embedding_location: str) -> bool:
    """Whether ``loader apply`` puts the embedding model on the cluster: for the text-only search
    templates (``server_side_embedding``) or to embed pushed chunks (``embedding_location``)."""
    return server_side_embedding or embedding_location == "cluster"


def check_cluster_embedding(settings: Settings) -> None:
    """Refuse ``embedding_location = cluster`` where the cluster's vectors could differ from the
    client's.

    ml-commons prepends the registered model's ``passage_prefix`` to what the ingest processor
    embeds, but the registration is found again by the model's files alone (its name is
    ``<model>-<fingerprint of weights and tokenizer>``), so a model registered earlier with
    another instruction would be reused and the index would hold vectors of another
    instruction than its ``_meta`` records.

    Raises:
        ConfigError: the effective passage instruction is not empty.
    """
    if settings.embedding_location != "cluster":
        return
    passage = effective_prefixes(settings)[1]
    if passage:
        raise ConfigError(
            f"embedding_location = cluster cannot embed with the passage instruction "
            f"{passage!r} (passage_prefix, or model {settings.embedding_model!r}'s own): the "
            "model registered in ml-commons is identified by its files, not its instructions, "
            "so the cluster could prepend another one. Use embedding_location = client"
        )


def embedding_processor(pipeline: dict[str, Any] | None) -> dict[str, Any] | None:
    """The ``text_embedding`` processor of an ingest pipeline body that fills the vector field,
    if any."""
    for processor in (pipeline or {}).get("processors") or []:
        spec = processor.get(EMBEDDING_PROCESSOR) if isinstance(processor, dict) else None
        if isinstance(spec, dict) and VECTOR_FIELD in (spec.get("field_map") or {}).values():
            return spec
    return None


def check_push_embedding(client: OpenSearch, settings: Settings) -> None:
    """The guard ``loader push`` runs with ``embedding_location = cluster``: the index's ingest
    pipeline embeds chunks that arrive without a vector, with a model that is deployed.
    Otherwise the chunks would be indexed with no vector at all.

    Raises:
        ConfigError: no such processor (``loader apply`` has not run with the setting), or its
            model is missing or not deployed; the message names ``embedding_location``.
    """
    check_cluster_embedding(settings)
    pipeline = config_names(settings.index_name).ingest_pipeline
    with cluster_errors(settings, f"reading ingest pipeline {pipeline}"):
        stored = _request(client, "GET", f"/_ingest/pipeline/{pipeline}", params={"ignore": 404})
    processor = embedding_processor((stored or {}).get(pipeline))
    if processor is None:
        raise ConfigError(
            f"embedding_location = cluster, but ingest pipeline {pipeline} has no "
            f"{EMBEDDING_PROCESSOR} processor for field {VECTOR_FIELD!r}: chunks would be indexed "
            "without vectors. Run `loader apply` with this setting first, then push"
        )
    model_id = processor.get("model_id")
    with cluster_errors(settings, f"reading ml model {model_id}"):
        model = _request(client, "GET", f"{ML_BASE}/models/{model_id}", params={"ignore": 404})
    state = (model or {}).get("model_state")
    # A node that comes back redeploys the model (DEPLOYING) while the others keep serving it.
    serving = int((model or {}).get("current_worker_node_count") or 0) > 0
    if state not in SERVING_STATES and not serving:
        raise ConfigError(
            f"embedding_location = cluster, but the model {model_id} that ingest pipeline "
            f"{pipeline} embeds with is {state.lower() if state else 'not registered'}; run "
            "`loader apply` (it registers and deploys it), then push"
        )


# --- the plan's model steps ---------------------------------------------------------------------

# The text-only templates and the ingest pipeline's embedding processors are planned with these in
# place of the ids of models not yet registered; execute_plan puts the real ids in once the "ml
# model" steps have run (``with_model_ids``).
PENDING_ML_MODEL_ID = "ML-MODEL-ID-ASSIGNED-ON-APPLY"
# Neither placeholder holds the other: each is replaced on its own (``with_model_ids``).
PENDING_SECOND_ML_MODEL_ID = "SECOND-READER-MODEL-ID-ASSIGNED-ON-APPLY"
# The placeholder each model's id replaces, by the kind of its plan step.
PENDING_IDS = {ML_MODEL: PENDING_ML_MODEL_ID, SECOND_ML_MODEL: PENDING_SECOND_ML_MODEL_ID}


def model_change(
    client: OpenSearch, settings: Settings, kind: str = ML_MODEL
) -> tuple[Change, str | None]:
    """The plan step of one embedding model in ml-commons, and its id when it is registered:
    ``settings`` name it (``reader_settings`` for the second reader's, kind ``SECOND_ML_MODEL``);
    the step's payload is the package."""
    package = export_model(settings)
    status = find_model(client, settings, package)
    if status.model_id is None:
        action, detail = "create", f"(register and deploy, sha256 {package.content_hash[:12]})"
    elif not status.deployed:
        action, detail = "update", f"(deploy {status.model_id}, now {status.state})"
    else:
        action, detail = "none", ""
    name = f"{package.name} ({status.model_id})" if status.model_id else package.name
    change = Change(STEP_ML_MODEL, kind, name, action, detail, payload=package)
    return change, status.model_id


def plan_models(client: OpenSearch, settings: Settings) -> tuple[list[Change], str, str | None]:
    """The plan steps of the index's model and, with a second reader, of its model, and the ids
    the rendered files name them by: each one's id when it is registered, else its placeholder
    (``None`` for the second without a second reader)."""
    steps = [model_change(client, settings)]
    second = reader_settings(settings)
    if second is not None:
        steps.append(model_change(client, second, SECOND_ML_MODEL))
    ids = [model_id or PENDING_IDS[change.kind] for change, model_id in steps]
    return [change for change, _ in steps], ids[0], (ids[1] if second is not None else None)


def with_model_ids(change: Change, model_ids: Mapping[str, str]) -> Change:
    """The template or pipeline change with the just-registered models' ids in place of their
    placeholders (anywhere in its body: a template's mustache source, a processor's model_id)."""
    body = json.dumps(change.payload)
    if model_ids:  # all at once: an id put in is never read as another's placeholder
        pattern = re.compile("|".join(map(re.escape, sorted(model_ids, key=len, reverse=True))))
        body = pattern.sub(lambda match: model_ids[match.group()], body)
    return dataclasses.replace(change, payload=json.loads(body))
