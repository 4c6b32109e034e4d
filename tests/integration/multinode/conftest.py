"""Fixtures of the multi-node and fault tests: the clusters they need, started from
``cluster_fixtures`` (where the way the nodes meet is explained), and the marker that names
these slower tests."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from .cluster_fixtures import DockerCluster, start_cluster

log = logging.getLogger(__name__)

SLOW_NODE = 1  # index of the node with the tiny write queue (node 2)
TINY_WRITE_QUEUE = {"thread_pool.write.size": "1", "thread_pool.write.queue_size": "1"}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "multinode: starts its own OpenSearch containers (a few minutes); runs by default, "
        "deselect with -m 'not multinode'",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).parent == here:
            item.add_marker(pytest.mark.multinode)


@pytest.fixture(scope="package")
def three_nodes(request: pytest.FixtureRequest) -> DockerCluster:
    """A 3-node cluster of the project's image, shared by this package's tests.

    Node 2 is started with a one-thread, one-slot write queue (``SLOW_NODE``): the backpressure
    test pins an index onto it to get 429s. Other tests' pushes are sequential, so they rarely
    fill it, and when they do they must cope anyway. One cluster instead of a fourth container
    keeps the package within a few minutes on a 2-core machine.
    """
    started = time.monotonic()
    cluster = start_cluster(request, 3, node_settings={SLOW_NODE: TINY_WRITE_QUEUE})
    log.info("3-node cluster %s green in %.0f s", cluster.prefix, time.monotonic() - started)
    return cluster


@pytest.fixture
def index_name(request: pytest.FixtureRequest) -> Iterator[str]:
    """A name owned by this test; clusters are per package, so the index is deleted by the
    test that uses it (see ``delete_index``)."""
    yield f"t-{request.node.name[:20].lower().strip('_-')}-{uuid.uuid4().hex[:8]}".replace(
        "[", "-"
    ).replace("]", "")
