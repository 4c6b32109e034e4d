"""Shared fixtures: one OpenSearch node per test session, one model load per session.

With ``OPENSEARCH_URL`` set, the tests use that cluster and start nothing. Otherwise a node of the
project's image (``OPENSEARCH_IMAGE``, built by ``opensearch/build-image.sh``) is started through
testcontainers' ``OpenSearchContainer`` and stopped at the end.

Each test works in indices, pipelines and templates named by the ``unique_name`` fixture and
deletes them by exact name afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from opensearchpy import NotFoundError

from loader.settings import Settings
from tests.models import make_cross_encoder
from tests.single_node import single_node, use_loopback_testcontainers

use_loopback_testcontainers()
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Haystack sends usage events on every pipeline run unless told not to (read when it is imported).
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration/" in item.nodeid.replace(os.sep, "/"):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def opensearch_url() -> Iterator[str]:
    """URL of the session's OpenSearch: ``OPENSEARCH_URL`` or a fresh container."""
    if os.environ.get("OPENSEARCH_URL"):
        yield os.environ["OPENSEARCH_URL"].rstrip("/")
        return
    with single_node() as container:
        port = container.get_exposed_port(9200)
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="session")
def base_settings(opensearch_url: str) -> Settings:
    """Settings pointing at the session's cluster, ignoring any loader.toml in the working dir."""
    return Settings(opensearch_url=opensearch_url)


@pytest.fixture(scope="session")
def client(base_settings: Settings):
    from loader.cluster.client import connect

    return connect(base_settings)


@pytest.fixture
def unique_name(request: pytest.FixtureRequest, client) -> Iterator[str]:
    """A lowercase name owned by this test; indices, aliases, pipelines and templates that start
    with it are deleted by exact name when the test ends."""
    name = f"t-{request.node.name[:24].lower().strip('_-')}-{uuid.uuid4().hex[:8]}"
    name = "".join(c if c.isalnum() or c == "-" else "-" for c in name)
    yield name
    cleanup_owned(client, name)


def cleanup_owned(client, prefix: str) -> None:
    """Delete the indices, search pipelines and stored scripts whose names start with prefix."""
    indices = client.indices.get(index=f"{prefix}*", expand_wildcards="all", ignore=[404])
    for index in indices if isinstance(indices, dict) and "error" not in indices else []:
        client.indices.delete(index=index, ignore=[404])
    try:
        pipelines = client.transport.perform_request("GET", "/_search/pipeline")
    except NotFoundError:  # answered when no search pipeline exists at all
        pipelines = {}
    for pipeline in pipelines:
        if pipeline.startswith(prefix):
            client.transport.perform_request("DELETE", f"/_search/pipeline/{pipeline}")
    state = client.cluster.state(metric="metadata", filter_path="metadata.stored_scripts")
    for script in (state.get("metadata") or {}).get("stored_scripts") or {}:
        if script.startswith(prefix):
            client.delete_script(id=script)
    ingest = client.ingest.get_pipeline(ignore=[404])
    for pipeline in ingest if isinstance(ingest, dict) and "error" not in ingest else []:
        if pipeline.startswith(prefix):
            client.ingest.delete_pipeline(id=pipeline)


@pytest.fixture(scope="session")
def cross_encoder_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A small local CrossEncoder (see ``tests.models.make_cross_encoder``), made once."""
    return make_cross_encoder(tmp_path_factory.mktemp("cross-encoder"))
