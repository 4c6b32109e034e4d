"""Bulk writes in layers, without a cluster: actions -> batches -> send -> per-item results.

``FakeBulkClient`` stands in for the OpenSearch client: it records every bulk request (parsed
back from its NDJSON body) and answers each item as OpenSearch's bulk API does, with statuses
the test scripts per chunk id (``201`` created / ``200`` deleted when nothing is scripted).
"""

from __future__ import annotations

import json

import numpy as np
import opensearchpy
import pytest

from loader.ingest.bulk import BulkAction, batches, send_bulk, to_json

ERRORS = {
    400: {"type": "mapper_parsing_exception", "reason": "failed to parse field [published]"},
    429: {"type": "rejected_execution_exception", "reason": "rejected execution of bulk"},
    503: {"type": "unavailable_shards_exception", "reason": "primary shard is not active"},
}


class FakeBulkClient:
    """Answers ``bulk(body=...)`` like OpenSearch; records the requests.

    Args:
        statuses: chunk id -> the statuses of its successive attempts (the last one repeats).
        failures: exceptions the whole request raises, one per call, before any answer.
        errors: status -> the error object answered with it (default: ``ERRORS``).
    """

    def __init__(
        self,
        statuses: dict[str, list[int]] | None = None,
        failures: list[Exception] | None = None,
        errors: dict[int, dict] | None = None,
    ) -> None:
        self.errors = {**ERRORS, **(errors or {})}
        self.statuses = {key: list(value) for key, value in (statuses or {}).items()}
        self.failures = list(failures or [])
        self.requests: list[list[tuple[str, str]]] = []  # per request: (op, id) per item
        self.documents: list[dict] = []  # the sources of every index item sent

    def bulk(self, body: bytes) -> dict:
        assert body.endswith(b"\n"), "an NDJSON bulk body ends with a newline"
        lines = [json.loads(line) for line in body.splitlines()]
        items = []
        while lines:
            header = lines.pop(0)
            ((op, meta),) = header.items()
            if op == "index":
                self.documents.append(lines.pop(0))
            items.append((op, meta["_id"]))
        self.requests.append(items)
        if self.failures:
            raise self.failures.pop(0)
        answers = [{op: self._outcome(op, item_id)} for op, item_id in items]
        errors = any(item[op]["status"] >= 300 for item in answers for op in item)
        return {"took": 3, "errors": errors, "items": answers}

    def _outcome(self, op: str, item_id: str) -> dict:
        queue = self.statuses.get(item_id)
        status = (queue.pop(0) if len(queue) > 1 else queue[0]) if queue else None
        if status is None:
            status = 201 if op == "index" else 200
        outcome = {"_index": "chunks", "_id": item_id, "status": status}
        if status == 404 and op == "delete":
            outcome["result"] = "not_found"
        elif status >= 300:
            outcome["error"] = self.errors.get(status, f"status {status}")
        else:
            outcome["result"] = "created" if op == "index" else "deleted"
        return outcome


def index(item_id: str, tag: str = "a.md", text: str = "some text") -> BulkAction:
    return BulkAction("index", "chunks", item_id, tag, {"chunk_id": item_id, "content": text})


def delete(item_id: str, tag: str = "gone.md") -> BulkAction:
    return BulkAction("delete", "chunks", item_id, tag)


def send(client: FakeBulkClient, actions: list[BulkAction], **options):
    sleeps: list[float] = []
    result = send_bulk(client, actions, sleep=sleeps.append, **options)
    return result, sleeps


# --- expand: one action, its NDJSON lines ------------------------------------------------------


def test_an_index_action_is_a_header_and_its_document():
    header, source, end = index("d-0").payload().split(b"\n")
    assert json.loads(header) == {"index": {"_index": "chunks", "_id": "d-0"}}
    assert source == b'{"chunk_id":"d-0","content":"some text"}'  # compact: smaller requests
    assert end == b""


def test_a_delete_action_is_a_header_alone():
    assert delete("d-1").payload() == b'{"delete":{"_index":"chunks","_id":"d-1"}}\n'


def test_a_float32_vector_is_written_as_the_float32_it_is_in_fewer_bytes():
    vectors = np.random.default_rng(7).standard_normal((50, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    for row in vectors:
        line = to_json({"embedding": row})
        read_back = np.array(json.loads(line)["embedding"], dtype=np.float32)
        assert np.array_equal(read_back, row)  # what a knn_vector stores, bit for bit
        as_floats = json.dumps({"embedding": row.tolist()}, separators=(",", ":"))
        assert len(line) < 0.75 * len(as_floats)


@pytest.mark.parametrize(
    "document",
    [
        {"id": 2**70, "content": "an integer beyond 64 bits, from a document's front matter"},
        {"title": "a lone surrogate \udc9f from JSON metadata"},
        {"embedding": np.arange(8, dtype=np.float32)[::2]},  # a strided view, not contiguous
        {"tags": ["unicode \u00e9\u4e2d", 'quote " and \\ and \n'], "n": np.int64(3)},
    ],
    ids=["big-int", "surrogate", "strided-vector", "plain"],
)
def test_what_orjson_refuses_is_written_as_the_standard_library_writes_it(document):
    line = to_json(document)
    plain = {
        key: value.tolist() if isinstance(value, np.ndarray | np.generic) else value
        for key, value in document.items()
    }
    assert json.loads(line) == plain


# --- chunk: batches by count and by bytes -------------------------------------------------------


def test_batches_are_cut_by_count():
    actions = [index(f"d-{n}") for n in range(5)]
    sizes = [len(batch) for batch in batches(actions, max_count=2, max_bytes=10**9)]
    assert sizes == [2, 2, 1]


def test_batches_are_cut_by_bytes_and_keep_the_order():
    actions = [index(f"d-{n}", text="x" * 100) for n in range(4)]
    one = len(actions[0].payload())
    grouped = list(batches(actions, max_count=100, max_bytes=2 * one))
    assert [[action.id for action, _ in batch] for batch in grouped] == [
        ["d-0", "d-1"],
        ["d-2", "d-3"],
    ]
    assert all(payload.endswith(b"\n") for batch in grouped for _, payload in batch)


def test_an_action_larger_than_max_bytes_is_sent_alone_not_dropped():
    actions = [index("small"), index("huge", text="x" * 1000), index("small-2")]
    grouped = list(batches(actions, max_count=100, max_bytes=200))
    assert [[action.id for action, _ in batch] for batch in grouped] == [
        ["small"],
        ["huge"],
        ["small-2"],
    ]


def test_no_actions_no_batches_no_requests():
    assert list(batches([], max_count=10, max_bytes=100)) == []
    client = FakeBulkClient()
    result, sleeps = send(client, [])
    assert (result.succeeded, result.retries, result.errors, client.requests, sleeps) == (
        0, 0, [], [], []
    )  # fmt: skip


# --- send and read per-item results ------------------------------------------------------------


def test_every_action_is_sent_once_in_order_and_counted():
    client = FakeBulkClient()
    actions = [index("d-0"), index("d-1"), delete("old-0")]
    done: list[int] = []
    result, sleeps = send(client, actions, max_count=2, on_batch=done.append)
    assert client.requests == [[("index", "d-0"), ("index", "d-1")], [("delete", "old-0")]]
    assert [doc["chunk_id"] for doc in client.documents] == ["d-0", "d-1"]
    assert (result.succeeded, result.retries, result.errors, sleeps) == (3, 0, [], [])
    assert done == [2, 1]  # progress: once per batch, with its size


def test_a_rejected_item_is_returned_with_its_tag_and_the_servers_reason():
    client = FakeBulkClient({"d-1": [400]})
    result, sleeps = send(client, [index("d-0"), index("d-1", tag="bad.md"), index("d-2")])
    assert result.succeeded == 2
    assert result.errors == [("bad.md", "d-1", "400: failed to parse field [published]")]
    assert (result.retries, sleeps, len(client.requests)) == (0, [], 1)  # 400 is not retried


def test_an_error_that_is_not_an_object_is_kept_as_text():
    client = FakeBulkClient({"d-0": [409]})
    result, _ = send(client, [index("d-0")])
    assert result.errors == [("a.md", "d-0", "409: status 409")]


def test_deleting_a_chunk_that_is_already_gone_is_a_success():
    client = FakeBulkClient({"old-0": [404], "d-0": [404]})
    result, _ = send(client, [delete("old-0"), index("d-0")])
    assert result.succeeded == 1  # the delete; an index answered 404 is an error
    assert result.errors == [("a.md", "d-0", "404: status 404")]


def test_a_delete_in_an_index_that_does_not_exist_is_a_failure():
    # What OpenSearch answers for a delete into a missing index (a wildcard name, a deleted
    # index): 404 with an error, not the "not_found" result of a missing chunk.
    class MissingIndex(FakeBulkClient):
        def _outcome(self, op, item_id):
            reason = {"type": "index_not_found_exception", "reason": "no such index [kb-*]"}
            return {"_index": "kb-*", "_id": item_id, "status": 404, "error": reason}

    result, _ = send(MissingIndex(), [delete("old-0")])
    assert result.succeeded == 0
    assert result.errors == [("gone.md", "old-0", "404: no such index [kb-*]")]


# What OpenSearch answers for an item an index block refuses: 403 for the write block `loader
# apply` puts on the version it copies; 429 for the block it puts on every index with a shard on a
# node past the flood-stage disk watermark.
BLOCKED = {
    403: {
        "type": "cluster_block_exception",
        "reason": "index [chunks] blocked by: [FORBIDDEN/8/index write (api)];",
    },
    429: {
        "type": "cluster_block_exception",
        "reason": "index [chunks] blocked by: [TOO_MANY_REQUESTS/12/disk usage exceeded "
        "flood-stage watermark, index has read-only-allow-delete block];",
    },
}


@pytest.mark.parametrize("status", [403, 429])
def test_an_item_an_index_block_refused_names_the_block_and_is_not_retried(status):
    client = FakeBulkClient({"d-0": [status], "old-0": [status]}, errors=BLOCKED)
    result, sleeps = send(client, [index("d-0"), delete("old-0")])
    assert (result.succeeded, result.retries, sleeps, len(client.requests)) == (0, 0, [], 1)
    assert result.blocked == {"d-0": "chunks", "old-0": "chunks"}
    reason = (
        f"{status}: index chunks is write-blocked (a `loader apply` copying it to a new version, "
        "or a full disk); push again when `loader doctor` shows no block "
        f"({BLOCKED[status]['reason']})"
    )
    assert result.errors == [("a.md", "d-0", reason), ("gone.md", "old-0", reason)]


# --- retries -----------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [429, 502, 503, 504])
def test_items_the_cluster_asks_to_retry_are_resent_alone(status):
    client = FakeBulkClient({"d-1": [status, 201]})
    result, sleeps = send(client, [index("d-0"), index("d-1"), index("d-2")])
    assert client.requests == [
        [("index", "d-0"), ("index", "d-1"), ("index", "d-2")],
        [("index", "d-1")],
    ]
    assert (result.succeeded, result.retries, result.errors, sleeps) == (3, 1, [], [0.5])


def test_an_item_whose_embedding_model_is_not_ready_yet_is_retried():
    # What ml-commons answers while a just-deployed model has not reached the node's routing.
    not_ready = {"type": "illegal_argument_exception", "reason": "Model not ready yet. Please "
                 "deploy the model first."}  # fmt: skip
    client = FakeBulkClient({"d-0": [400, 201]}, errors={400: not_ready})
    result, sleeps = send(client, [index("d-0")])
    assert (result.succeeded, result.retries, result.errors, sleeps) == (1, 1, [], [0.5])


def test_backoff_doubles_up_to_its_cap():
    client = FakeBulkClient({"d-0": [429] * 5 + [201]})
    result, sleeps = send(client, [index("d-0")], initial_backoff=1.0, max_backoff=5.0)
    assert sleeps == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert (result.succeeded, result.retries, result.errors) == (1, 5, [])


def test_an_item_still_rejected_after_max_retries_is_an_error_not_dropped():
    client = FakeBulkClient({"d-1": [429]})
    result, sleeps = send(client, [index("d-0"), index("d-1", tag="busy.md")], max_retries=3)
    assert len(client.requests) == 4  # the first attempt and three retries
    assert sleeps == [0.5, 1.0, 2.0]
    assert result.succeeded == 1
    assert result.retries == 3
    assert result.errors == [("busy.md", "d-1", "still rejected after 3 retries")]


def test_a_refused_request_is_retried_whole():
    unavailable = opensearchpy.TransportError(503, "unavailable_shards_exception", {})
    lost = opensearchpy.ConnectionError("N/A", "connection refused", None)
    client = FakeBulkClient(failures=[unavailable, lost])
    result, sleeps = send(client, [index("d-0"), delete("old-0")])
    assert len(client.requests) == 3
    assert client.requests[0] == client.requests[2] == [("index", "d-0"), ("delete", "old-0")]
    assert (result.succeeded, result.retries, result.errors, sleeps) == (2, 4, [], [0.5, 1.0])


def test_a_cluster_that_stays_unreachable_raises_its_error():
    lost = opensearchpy.ConnectionError("N/A", "connection refused", None)
    client = FakeBulkClient(failures=[lost] * 3)
    with pytest.raises(opensearchpy.ConnectionError) as raised:
        send(client, [index("d-0")], max_retries=2)
    assert raised.value is lost
    assert len(client.requests) == 3


def test_a_request_refused_for_good_raises_at_once():
    forbidden = opensearchpy.AuthorizationException(403, "security_exception", {})
    client = FakeBulkClient(failures=[forbidden])
    with pytest.raises(opensearchpy.AuthorizationException):
        send(client, [index("d-0")])
    assert len(client.requests) == 1  # not retried


def test_a_retry_of_one_batch_does_not_resend_the_others():
    client = FakeBulkClient({"d-2": [429, 201]})
    done: list[int] = []
    result, _ = send(client, [index(f"d-{n}") for n in range(4)], max_count=2, on_batch=done.append)
    assert client.requests == [
        [("index", "d-0"), ("index", "d-1")],
        [("index", "d-2"), ("index", "d-3")],
        [("index", "d-2")],
    ]
    assert (result.succeeded, result.retries, done) == (4, 1, [2, 2])
