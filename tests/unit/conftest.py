"""Unit tests run without a cluster: whatever listens on the default address (a node that
`loader up` or a documentation example started) must not decide whether they pass."""

from __future__ import annotations

import pytest

# The discard port: nothing answers there as OpenSearch, on any machine.
NO_CLUSTER_URL = "http://127.0.0.1:9"


@pytest.fixture(autouse=True)
def no_cluster_at_the_default_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENSEARCH_URL", NO_CLUSTER_URL)


@pytest.fixture(autouse=True)
def no_bge_jar_for_the_second_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    """``second_embedding_model = "auto"`` adds bge-small-en-v1.5 as a second reader when its jar
    is on the machine: whether it is must not decide what a unit test renders or plans. A test of
    the choice itself sets ``jar_on_machine`` again."""
    from loader.models import readers

    monkeypatch.setattr(readers, "jar_on_machine", lambda name: False)
