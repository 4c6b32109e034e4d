"""`loader up` beside a container it made earlier for another port, with real Docker: it says so
at once, naming both ports, instead of waiting 180 s for a port nothing publishes and then
blaming the node's health (what a newcomer met after changing local_port)."""

from __future__ import annotations

import subprocess
import time
import uuid

import pytest

from loader.cluster import local
from loader.errors import DockerError
from loader.settings import Settings
from tests.integration.serve.http_server import free_port


@pytest.fixture
def container_on_another_port(monkeypatch: pytest.MonkeyPatch):
    """A container of the project's image under a name of this test's, publishing a free port
    as its 9200 (it only sleeps: no node is needed to read its port)."""
    name = f"loader-test-up-{uuid.uuid4().hex[:8]}"
    port = free_port()
    image = Settings().opensearch_image
    subprocess.run(
        ["docker", "run", "--detach", "--name", name, "--publish", f"127.0.0.1:{port}:9200",
         "--entrypoint", "sleep", image, "300"],
        check=True, capture_output=True,
    )  # fmt: skip
    monkeypatch.setattr(local, "CONTAINER_NAME", name)
    try:
        yield port
    finally:
        subprocess.run(["docker", "rm", "--force", name], capture_output=True)


def test_up_refuses_at_once_a_container_published_on_another_port(container_on_another_port):
    port = container_on_another_port
    wanted = port + 1 if port < 65535 else port - 1
    started = time.monotonic()
    with pytest.raises(DockerError) as refused:
        local.start_local(Settings().opensearch_image, wanted)
    assert time.monotonic() - started < 30  # not the 180 s start timeout
    message = str(refused.value)
    assert f"publishes port {port}, not {wanted}" in message
    assert "`loader down`, then `loader up`" in message and f"local_port = {port}" in message
