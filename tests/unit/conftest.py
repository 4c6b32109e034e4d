"""Unit tests run without a cluster: whatever listens on the default address (a node that
`loader up` or a documentation example started) must not decide whether they pass."""

from __future__ import annotations

import pytest

# The discard port: nothing answers there as OpenSearch, on any machine.
NO_CLUSTER_URL = "http://127.0.0.1:9"


@pytest.fixture(autouse=True)
def no_cluster_at_the_default_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENSEARCH_URL", NO_CLUSTER_URL)
