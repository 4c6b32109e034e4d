"""Bulk writes in layers: actions -> batches by count and bytes -> send -> per-item results.

Items rejected with 429 (queue full) or 503 (shard unavailable, e.g. a node just left), and items
the index's embedding processor could not embed yet because its model is still being deployed on
the node (``embedding_location = cluster``), are retried with capped exponential backoff; every
other per-item error is returned with the action's ``tag`` (the source file) so the caller can
report it. Nothing is dropped silently. An item refused by a block on its index (``loader apply``
write-blocks the version it copies; a full disk makes OpenSearch block writes, answering 429) is
not retried (a block outlasts any backoff) and is also noted in ``BulkResult.blocked``, so the
caller can say why in one line and what to do.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import opensearchpy
import orjson

log = logging.getLogger(__name__)

RETRYABLE_STATUSES = (429, 502, 503, 504)
# ml-commons answers 400 with this while a model it reports DEPLOYED has not reached the node's
# routing yet (seconds after a deploy, or while it redeploys after a node loss): transient.
MODEL_NOT_READY = "Model not ready yet"
# What one chunk may add to a bulk request's time when the cluster's ingest pipeline embeds it
# (embedding_location = cluster): measured 0.14 to 0.6 s per SciFact chunk on the 2-core dev node
# under load (the upper figure behind a backlog), so a default 500-chunk request needs minutes.
CLUSTER_EMBED_SECONDS_PER_ACTION = 1.0


@dataclass
class BulkAction:
    """One index, update or delete operation; ``tag`` says what it belongs to (the source
    file). An update's ``document`` holds the fields it sets (a partial update)."""

    op: str  # "index", "update" or "delete"
    index: str
    id: str
    tag: str
    document: dict[str, Any] | None = None

    def payload(self) -> bytes:
        """The operation's NDJSON lines, each ending in a newline: its header, then (to index)
        its document."""
        header = to_json({self.op: {"_index": self.index, "_id": self.id}})
        if self.op == "delete":
            return header + b"\n"
        document = {"doc": self.document} if self.op == "update" else self.document
        return header + b"\n" + to_json(document) + b"\n"


def to_json(document: Any) -> bytes:
    """Compact JSON (UTF-8) of a bulk line.

    orjson writes a numpy float32 vector as the shortest decimals that read back to the same
    float32 (what a ``knn_vector`` stores): 40% fewer bytes than the repr of Python floats, and
    ~15 x faster than the standard library (0.02 s instead of 0.36 s for the 814 chunks of an
    11.9 s MiniLM int8 push, 5.3 MB instead of 8.0 MB). What orjson refuses (an integer beyond
    64 bits or a lone surrogate from a document's metadata, a vector that is not contiguous) goes
    through the standard library, as every line did before.
    """
    try:
        return orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY)
    except orjson.JSONEncodeError:
        return json.dumps(document, separators=(",", ":"), default=_plain).encode("utf-8")


def _plain(value: Any) -> Any:
    """numpy arrays and scalars as the standard library's JSON writes them."""
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


# The error type of a bulk item refused by an index block: 403 "index [kb-v1] blocked by:
# [FORBIDDEN/8/index write (api)];" (``index.blocks.write``, ``read_only``), or 429 for the
# ``read_only_allow_delete`` OpenSearch sets on a node past the flood-stage disk watermark.
BLOCK_ERROR = "cluster_block_exception"
BLOCKED_REMEDY = "push again when `loader doctor` shows no block"


@dataclass
class BulkResult:
    succeeded: int = 0
    retries: int = 0
    errors: list[tuple[str, str, str]] = field(default_factory=list)  # (tag, id, reason)
    # The failed items an index block refused: item id -> the blocked index (also in errors).
    blocked: dict[str, str] = field(default_factory=dict)


def write_blocked(index: str) -> str:
    """Why a bulk item was refused by a block on ``index`` (``BLOCKED_REMEDY``: what to do)."""
    return (
        f"index {index} is write-blocked (a `loader apply` copying it to a new version, or a "
        "full disk)"
    )


def batches(
    actions: Iterable[BulkAction], max_count: int, max_bytes: int
) -> Iterator[list[tuple[BulkAction, bytes]]]:
    """Group actions (with their serialized lines) into requests of bounded count and size."""
    batch: list[tuple[BulkAction, bytes]] = []
    size = 0
    for action in actions:
        payload = action.payload()
        length = len(payload)
        if batch and (len(batch) >= max_count or size + length > max_bytes):
            yield batch
            batch, size = [], 0
        batch.append((action, payload))
        size += length
    if batch:
        yield batch


def send_bulk(
    client: opensearchpy.OpenSearch,
    actions: Iterable[BulkAction],
    *,
    max_count: int = 500,
    max_bytes: int = 8 * 1024 * 1024,
    max_retries: int = 8,
    initial_backoff: float = 0.5,
    max_backoff: float = 20.0,
    on_batch: Callable[[int], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    request_timeout: float | None = None,
) -> BulkResult:
    """Send actions in batches; retry what the cluster asks to retry; report every failure.

    Args:
        client: the OpenSearch client.
        actions: the operations, in order.
        max_count, max_bytes: limits of one bulk request.
        max_retries: how often one item may be retried (429/5xx) before it counts as failed.
        on_batch: called with the number of actions of each batch once it is done (progress).
        request_timeout: seconds one bulk request may take (default: the client's timeout).

    Returns:
        Counts of successes and retries, and one ``(tag, id, reason)`` per failed item.
    """
    result = BulkResult()
    for batch in batches(actions, max_count, max_bytes):
        pending = batch
        for attempt in range(max_retries + 1):
            retry, failure = _send_once(client, pending, result, request_timeout)
            if not retry:
                break
            if attempt == max_retries:
                if failure is not None:
                    raise failure  # the cluster itself stayed unreachable: stop, loudly
                for action, _ in retry:
                    result.errors.append(
                        (action.tag, action.id, f"still rejected after {max_retries} retries")
                    )
                break
            result.retries += len(retry)
            delay = min(max_backoff, initial_backoff * 2**attempt)
            log.info("bulk: %d items rejected, retrying in %.1f s", len(retry), delay)
            sleep(delay)
            pending = retry
        if on_batch:
            on_batch(len(batch))
    return result


def _send_once(
    client: opensearchpy.OpenSearch,
    batch: list[tuple[BulkAction, bytes]],
    result: BulkResult,
    request_timeout: float | None = None,
) -> tuple[list[tuple[BulkAction, bytes]], opensearchpy.TransportError | None]:
    """One bulk request; returns the items to retry and, if the request as a whole failed in a
    retryable way, its exception."""
    body = b"".join(payload for _, payload in batch)
    timeout = {"request_timeout": request_timeout} if request_timeout else {}
    try:
        response = client.bulk(body=body, **timeout)
    except opensearchpy.TransportError as exc:
        status = exc.status_code if isinstance(exc.status_code, int) else None
        if status in RETRYABLE_STATUSES or isinstance(exc, opensearchpy.ConnectionError):
            return batch, exc  # the whole request was refused or lost: retry all of it
        raise
    retry = []
    for (action, payload), item in zip(batch, response["items"], strict=True):
        outcome = item[action.op]
        status = outcome.get("status", 500)
        if status < 300 or _already_deleted(action.op, outcome):
            result.succeeded += 1
        else:
            error = outcome.get("error", {})
            reason = error.get("reason", str(error)) if isinstance(error, dict) else str(error)
            if isinstance(error, dict) and error.get("type") == BLOCK_ERROR:
                # Not retried, even as the flood stage's 429: a block outlasts any backoff.
                index = outcome.get("_index") or action.index
                result.blocked[action.id] = index
                result.errors.append(
                    (
                        action.tag,
                        action.id,
                        f"{status}: {write_blocked(index)}; {BLOCKED_REMEDY} ({reason})",
                    )
                )
            elif status in RETRYABLE_STATUSES or MODEL_NOT_READY in reason:
                retry.append((action, payload))
            else:
                result.errors.append((action.tag, action.id, f"{status}: {reason}"))
    return retry, None


def _already_deleted(op: str, outcome: dict[str, Any]) -> bool:
    """A delete of a chunk that is not there: the push wanted it gone, so it succeeded. Only a
    document not found counts; a 404 carrying an error (the index itself missing) is a failure."""
    return op == "delete" and outcome.get("status") == 404 and outcome.get("result") == "not_found"


def bulk_request_timeout(base: float, max_count: int, embedding_on_cluster: bool) -> float:
    """Seconds to wait for one bulk request of up to ``max_count`` actions: ``base`` (the
    ``request_timeout`` setting), plus a budget per action when the cluster embeds them."""
    if not embedding_on_cluster:
        return base
    return base + CLUSTER_EMBED_SECONDS_PER_ACTION * max_count
