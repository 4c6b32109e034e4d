"""Clusters of the project's image started for the multi-node and fault tests.

``three_nodes`` is one 3-node cluster shared by the tests of this package (started on first use,
removed when the package's last test ends); ``start_cluster`` starts any other cluster a test
needs (e.g. one node with a tiny write queue). Every container and network is removed by a
finalizer, also when starting fails half-way.

How the nodes meet: a node whose transport binds a non-loopback address in a multi-node cluster
enforces the bootstrap checks, and two of them cannot pass on these machines without changing the
host: ``vm.max_map_count`` is 65530 (< 262144; ``node.store.allow_mmap=false`` would skip that
one) and the open-files hard limit of dockerd is 20000 (< 65535; a container cannot raise it,
and there is no setting to skip it). So the nodes share one network namespace, like the
containers of a Kubernetes pod: node 1 owns it (on its own user-defined Docker network), nodes 2
and 3 join it, and each binds 127.0.0.1 with its own HTTP and transport port. They are still
separate JVMs in separate containers with separate data, talking over TCP; killing a node's
container is a real node loss. Node 1 owns the namespace, so the fault tests never kill it.

Every HTTP port is published on 127.0.0.1 only: the tests talk to loopback and nothing else.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from opensearchpy import OpenSearch

from loader.cluster.client import connect
from loader.documents import Document
from loader.errors import LoaderError
from loader.ingest.plan import chunk_id, identify, plan_document
from loader.ingest.readers import iter_documents
from loader.ingest.report import PushReport
from loader.ingest.sync import push
from loader.settings import Settings
from tests.single_node import DISK_WATERMARKS

log = logging.getLogger(__name__)

# C1 only: the JVMs start faster on 2 shared cores; steady-state speed does not matter here.
# 1 GB like the single test node (see opensearch/opensearch.yml on its parent circuit breaker).
HEAP = "-Xms1g -Xmx1g -XX:TieredStopAtLevel=1"
# Seconds for a cold cluster: about a minute on an idle 2-core machine, minutes when it is busy.
START_TIMEOUT = float(os.environ.get("LOADER_TEST_START_TIMEOUT", "300"))
LABEL = "loader.tests"  # every container and network started here carries it


@dataclass
class Node:
    """One container of a test cluster and its HTTP URL on loopback."""

    name: str
    container: object  # docker.models.containers.Container
    port: int  # HTTP port inside the shared network namespace
    url: str = ""


@dataclass
class DockerCluster:
    """Containers of one test cluster; ``nodes[0]`` is the node clients talk to."""

    prefix: str
    docker: object  # docker.DockerClient
    network: object
    nodes: list[Node] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.nodes[0].url

    def client(self, node: int = 0, timeout: float = 30.0) -> OpenSearch:
        return connect(Settings(opensearch_url=self.nodes[node].url, request_timeout=timeout))

    def kill(self, node: int) -> None:
        """SIGKILL one node: no shutdown, no goodbye to the cluster."""
        self.nodes[node].container.kill()

    def start(self, node: int) -> None:
        self.nodes[node].container.start()

    def refresh_urls(self) -> None:
        """Read the host ports node 1 publishes for every node's HTTP port."""
        owner = self.nodes[0].container
        owner.reload()
        for node in self.nodes:
            bindings = owner.ports.get(f"{node.port}/tcp") or []
            node.url = f"http://127.0.0.1:{bindings[0]['HostPort']}" if bindings else ""

    def wait_healthy(
        self, status: str = "green", nodes: int | None = None, timeout: float = START_TIMEOUT
    ) -> dict:
        """Wait until the cluster has all its nodes (or ``nodes``) and ``status``; fail loudly
        with the containers' last log lines otherwise."""
        expected = len(self.nodes) if nodes is None else nodes
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            running = 0
            for node in self.nodes:
                node.container.reload()
                running += node.container.status == "running"
            if running < expected:  # e.g. a bootstrap check failed: no point in waiting
                raise AssertionError(
                    f"only {running} of {expected} containers of {self.prefix} are running\n"
                    f"{self.logs()}"
                )
            try:
                # The query string is written out: opensearch-py takes a `timeout` parameter
                # as its own request timeout. A wait that times out answers 408.
                health = self.client(timeout=10).transport.perform_request(
                    "GET",
                    f"/_cluster/health?wait_for_nodes={expected}&wait_for_status={status}"
                    "&timeout=5s",
                )
                if not health.get("timed_out") and health["number_of_nodes"] == expected:
                    return health
                last = health
            except Exception as exc:  # the node is still starting: keep polling until the deadline
                last = exc
            time.sleep(1)
        raise AssertionError(
            f"cluster {self.prefix} not {status} with {expected} nodes after {timeout:.0f} s "
            f"(last answer: {last!r})\n{self.logs()}"
        )

    def logs(self, lines: int = 30) -> str:
        parts = []
        for node in self.nodes:
            try:
                tail = node.container.logs(tail=lines).decode("utf-8", "replace")
            except Exception as exc:  # the container may be gone already
                tail = f"(no logs: {exc})"
            parts.append(f"--- {node.name} ---\n{tail}")
        return "\n".join(parts)

    def remove(self) -> None:
        """Remove the containers (also one whose start failed) and the network; never raises
        (it runs in finalizers). Nodes 2 and 3 go first: they live in node 1's namespace."""
        try:
            containers = self.docker.containers.list(
                all=True, filters={"label": f"{LABEL}={self.prefix}"}
            )
        except Exception as exc:
            log.warning("could not list the containers of %s: %s", self.prefix, exc)
            containers = [node.container for node in self.nodes]
        for container in sorted(containers, key=lambda c: c.name, reverse=True):
            try:
                container.remove(force=True, v=True)
            except Exception as exc:
                log.warning("could not remove container %s: %s", container.name, exc)
        try:
            self.network.remove()
        except Exception as exc:
            log.warning("could not remove network %s: %s", self.prefix, exc)


def start_cluster(
    request: pytest.FixtureRequest,
    size: int,
    extra_settings: Mapping[str, str] | None = None,
    node_settings: Mapping[int, Mapping[str, str]] | None = None,
    java_opts: str = HEAP,
) -> DockerCluster:
    """Start ``size`` nodes of the project's image on a new network and wait until green.

    Single nodes use ``discovery.type=single-node``; larger clusters ``zen`` (the multi-node
    value in OpenSearch 3.x) with every node cluster-manager-eligible, seeding from each other.
    ``extra_settings`` go to every node, ``node_settings[i]`` to node ``i`` only. The cluster is
    removed by a finalizer of ``request``.
    """
    import docker

    image = os.environ.get("OPENSEARCH_IMAGE") or Settings().opensearch_image
    docker_client = docker.from_env()
    prefix = f"loader-test-{uuid.uuid4().hex[:8]}"
    names = [f"{prefix}-node{i + 1}" for i in range(size)]
    network = docker_client.networks.create(prefix, driver="bridge", labels={LABEL: prefix})
    cluster = DockerCluster(prefix, docker_client, network)
    request.addfinalizer(cluster.remove)  # registered first: cleans up even a half-started cluster

    seeds = ",".join(f"127.0.0.1:{9300 + i}" for i in range(size))
    for i, name in enumerate(names):
        environment = {
            "OPENSEARCH_JAVA_OPTS": java_opts,
            "cluster.name": prefix,
            "node.name": name,
            # Transport on loopback: no bootstrap checks (see the module docstring). HTTP on
            # every interface of the namespace, so Docker can forward the published port.
            "network.host": "127.0.0.1",
            "http.host": "0.0.0.0",
            "http.port": str(9200 + i),
            "transport.port": str(9300 + i),
            **DISK_WATERMARKS,
        }
        if size == 1:
            environment["discovery.type"] = "single-node"
        else:
            environment["discovery.type"] = "zen"  # the multi-node value in OpenSearch 3.x
            environment["discovery.seed_hosts"] = seeds
            environment["cluster.initial_cluster_manager_nodes"] = ",".join(names)
        environment.update(extra_settings or {})
        environment.update((node_settings or {}).get(i, {}))
        if i == 0:  # owns the network namespace and publishes every node's HTTP port
            placement = {
                "network": prefix,
                "ports": {f"{9200 + j}/tcp": ("127.0.0.1", None) for j in range(size)},
            }
        else:
            placement = {"network_mode": f"container:{cluster.nodes[0].container.id}"}
        container = docker_client.containers.run(
            image,
            name=name,
            detach=True,
            environment=environment,
            labels={LABEL: prefix},
            **placement,
        )
        cluster.nodes.append(Node(name, container, port=9200 + i))
    cluster.refresh_urls()
    cluster.wait_healthy("green")
    return cluster


def delete_index(client: OpenSearch, alias: str) -> None:
    """Delete the versioned indices behind ``alias`` by exact name."""
    found = client.indices.get_alias(name=alias, ignore=[404])
    for index in found if isinstance(found, dict) and "error" not in found else []:
        client.indices.delete(index=index, ignore=[404])


# --- corpora -----------------------------------------------------------------------------------

KEEPERS = ["Ada", "Bruno", "Chiara", "Dmitri", "Elena", "Farid", "Greta", "Hugo", "Ines", "Jonas"]
PLACES = ["Arven", "Brisk", "Corlan", "Dunmore", "Eskel", "Fennick", "Galloway", "Hollin"]
BIRDS = ["heron", "puffin", "gannet", "tern", "plover", "curlew", "osprey", "kittiwake"]


def station_text(number: int, revision: int = 1) -> str:
    """A small generated Markdown document about one fictitious lighthouse.

    Each has a unique keeper + place pair, so a search can name exactly one document; revision 2
    says "revised" and adds a section, so the two revisions have different chunks.
    """
    keeper = KEEPERS[number % len(KEEPERS)]
    place = PLACES[(number // len(KEEPERS)) % len(PLACES)]
    bird = BIRDS[number % len(BIRDS)]
    text = (
        f"# Lighthouse {number}\n\n## Keeper\n\nThe lighthouse of {place} point number {number} "
        f"is kept by {keeper} {place}son, who logs every {bird} seen from the gallery.\n\n"
        f"## Lamp\n\nThe lamp of lighthouse {number} turns every {number % 17 + 3} seconds and "
        f"can be seen {number % 23 + 8} nautical miles out at sea.\n"
    )
    if revision > 1:
        text += (
            f"\n## Revision {revision}\n\nThis revised log of lighthouse {number} adds that the "
            f"fog horn sounds {number % 5 + 2} times a minute when visibility drops.\n"
        )
    return text


def write_corpus(folder: Path, numbers: range | list[int], revision: int = 1) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for number in numbers:
        (folder / f"station-{number:04d}.md").write_text(
            station_text(number, revision), encoding="utf-8"
        )


def planned_chunks(
    folder: Path, settings: Settings, embedder, collection: str | None = None
) -> dict[str, tuple[str, str]]:
    """What an uninterrupted push of ``folder`` leaves in the index: id -> (content_hash,
    doc_hash), from the same planning code the push uses."""
    collection = collection or folder.resolve().name
    expected: dict[str, tuple[str, str]] = {}
    for item in iter_documents(folder, settings.max_file_bytes):
        assert isinstance(item, Document), f"generated file could not be read: {item}"
        doc_id, source_hash = identify(item, collection, settings, None)
        planned = plan_document(item, doc_id, source_hash, settings, embedder)
        for position, content_hash in enumerate(planned.hashes):
            expected[chunk_id(planned.doc_id, position)] = (content_hash, planned.doc_hash)
    return expected


def indexed_chunks(client: OpenSearch, alias: str) -> dict[str, tuple[str, str]]:
    """What the index holds: id -> (content_hash, doc_hash), after a refresh."""
    from opensearchpy import helpers

    client.indices.refresh(index=alias)
    hits = helpers.scan(
        client, index=alias, query={"_source": ["content_hash", "doc_hash"]}, size=1000
    )
    found: dict[str, tuple[str, str]] = {}
    for hit in hits:
        assert hit["_id"] not in found, f"chunk {hit['_id']} returned twice"
        found[hit["_id"]] = (hit["_source"]["content_hash"], hit["_source"]["doc_hash"])
    return found


def shard_copies(client: OpenSearch, alias: str) -> list[dict[str, str]]:
    """One row per shard copy: shard, prirep (p/r), state, docs, node (from _cat/shards)."""
    client.indices.refresh(index=alias)
    return client.cat.shards(index=alias, format="json", h="index,shard,prirep,state,docs,node")


SETTLE_TIMEOUT = 180.0  # a replica of a few thousand chunks recovers in seconds; busy machines


def wait_settled(client: OpenSearch, alias: str, timeout: float = SETTLE_TIMEOUT) -> None:
    """Wait until ``alias`` is green with no shard copy relocating or initializing.

    Green alone is not enough after a node comes back: the balancer then moves copies onto it,
    and a relocating copy's ``docs`` in _cat/shards is null or a partial count. On a timeout the
    message says what the cluster was still doing (its health and every copy not STARTED)."""
    deadline = time.monotonic() + timeout
    while True:
        # The query string is written out: opensearch-py takes `timeout` as its own.
        health = client.transport.perform_request(
            "GET",
            f"/_cluster/health/{alias}?wait_for_status=green&wait_for_no_relocating_shards=true"
            "&wait_for_no_initializing_shards=true&timeout=10s",
        )
        if not health.get("timed_out"):
            return
        if time.monotonic() >= deadline:
            moving = [row for row in shard_copies(client, alias) if row["state"] != "STARTED"]
            keys = ("status", "relocating_shards", "initializing_shards", "unassigned_shards")
            raise AssertionError(
                f"{alias} not settled after {timeout:.0f} s: "
                f"{ {key: health.get(key) for key in keys} }; copies not started: {moving}"
            )


COUNT_TIMEOUT = 60.0  # seconds for every copy of a settled index to report its document count


def counted_copies(
    read_copies: Callable[[], list[dict[str, str]]],
    timeout: float = COUNT_TIMEOUT,
    interval: float = 0.5,
) -> list[dict[str, str]]:
    """The rows ``read_copies`` (``shard_copies``) returns once every copy is STARTED and
    reports its document count.

    A settled index can still list a copy with ``docs`` null for a moment (issue #52: a replica
    back from a node loss, after ``wait_settled``). On a timeout the message names every copy
    still not started or without a count."""
    deadline = time.monotonic() + timeout
    while True:
        rows = read_copies()
        pending = [row for row in rows if row["state"] != "STARTED" or row["docs"] is None]
        if not pending:
            return rows
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"{len(pending)} of {len(rows)} shard copies not started or without a document "
                f"count after {timeout:.0f} s: {pending}"
            )
        time.sleep(interval)


def assert_copies_agree(client: OpenSearch, alias: str, expected_docs: int) -> None:
    """Once the index has settled (``wait_settled``) and every copy reports its count, every
    shard's copies hold the same number of documents, and the primaries together hold
    ``expected_docs``."""
    wait_settled(client, alias)
    rows = counted_copies(lambda: shard_copies(client, alias))
    by_shard: dict[str, set[int]] = {}
    for row in rows:
        by_shard.setdefault(row["shard"], set()).add(int(row["docs"]))
    assert all(len(counts) == 1 for counts in by_shard.values()), f"copies differ: {rows}"
    assert sum(int(r["docs"]) for r in rows if r["prirep"] == "p") == expected_docs, rows


def wait_for(condition, timeout: float, what: str, interval: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@dataclass
class NodeLossPush:
    """How a push went while node 3 was killed under it (``push_through_node_loss``)."""

    report: PushReport | None  # None when the push raised
    written_before: int  # chunks the index counted when node 3 was killed
    seconds_after_kill: float  # how long the push went on after the kill


def push_through_node_loss(
    cluster: DockerCluster,
    folder: Path,
    settings: Settings,
    embedder,
    *,
    request_timeout: float,
    start_timeout: float,
    join_timeout: float,
) -> NodeLossPush:
    """Push ``folder`` in a thread; once the index counts 60 chunks, SIGKILL node 3; wait for
    the push to end, start node 3 again and wait for green. The push must end (not hang) and, if
    it did not complete, fail loudly: an exception, or every failed item named in its report."""
    client = cluster.client()
    outcome: dict[str, object] = {}

    def run_push() -> None:
        try:
            outcome["report"] = push(
                folder,
                settings,
                client=cluster.client(timeout=request_timeout),
                embedder=embedder,
            )
        except LoaderError as exc:  # failing loudly is allowed; the rerun must then complete
            outcome["error"] = exc

    thread = threading.Thread(target=run_push, name="push-under-node-loss")
    thread.start()
    try:
        wait_for(
            lambda: not thread.is_alive() or client.count(index=settings.index_name)["count"] >= 60,
            timeout=start_timeout,
            what="the push to start writing",
        )
        assert thread.is_alive(), f"the push ended before the node was killed: {outcome}"
        written_before = client.count(index=settings.index_name)["count"]
        cluster.kill(2)
        killed_at = time.monotonic()
    finally:
        thread.join(timeout=join_timeout)
    assert not thread.is_alive(), "the push hung after the node loss"
    seconds_after_kill = time.monotonic() - killed_at
    cluster.start(2)
    cluster.wait_healthy("green")
    report = outcome.get("report")
    if report is None or report.failed:
        assert "error" in outcome or report.errors, outcome
    return NodeLossPush(report, written_before, seconds_after_kill)
