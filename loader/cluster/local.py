"""A local single-node OpenSearch in Docker for the main job (`loader up` / `loader down`).

The image is the ``opensearch_image`` setting: the project's own image built by
``opensearch/build-image.sh``, or ``opensearchproject/opensearch:3.6.0`` where it can be pulled.
Data lives in a named Docker volume, so `down` then `up` keeps the index.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import time
import urllib.error
import urllib.request

from loader.errors import DockerError

log = logging.getLogger(__name__)

CONTAINER_NAME = "loader-opensearch"
DATA_VOLUME = "loader-opensearch-data"
START_TIMEOUT_SECONDS = 180


def _docker(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    if shutil.which("docker") is None:
        raise DockerError("docker is not installed: install it (apt-get install docker.io)")
    result = subprocess.run(["docker", *args], capture_output=True, text=True)
    if check and result.returncode != 0:
        stderr = result.stderr.strip()
        if "Cannot connect to the Docker daemon" in stderr or "docker daemon" in stderr.lower():
            raise DockerError("Docker is not running: start it (e.g. `dockerd &` or systemctl)")
        raise DockerError(f"`docker {' '.join(args[:2])}` failed: {stderr}")
    return result


def _container_state() -> str | None:
    """'running', 'exited', ... or None when there is no such container."""
    result = _docker("inspect", "--format", "{{.State.Status}}", CONTAINER_NAME, check=False)
    if result.returncode != 0:
        _docker("info", "--format", "{{.ServerVersion}}")  # raises if the daemon is down
        return None
    return result.stdout.strip()


def local_url(local_port: int) -> str:
    return f"http://127.0.0.1:{local_port}"


def start_local(opensearch_image: str, local_port: int) -> str:
    """Start the local node from ``opensearch_image`` on 127.0.0.1:``local_port`` unless it runs
    already; wait until it answers; return its URL."""
    state = _container_state()
    if state is None:
        if _docker("image", "inspect", opensearch_image, check=False).returncode != 0:
            raise DockerError(
                f"image {opensearch_image} not found: build it with "
                "opensearch/build-image.sh, or set OPENSEARCH_IMAGE to an image you can pull"
            )
        _docker(
            "run", "--detach", "--name", CONTAINER_NAME,
            "--publish", f"127.0.0.1:{local_port}:9200",
            "--volume", f"{DATA_VOLUME}:/usr/share/opensearch/data",
            # The first is read by this project's image, the second by the official one.
            "--env", "discovery.type=single-node",
            "--env", "DISABLE_SECURITY_PLUGIN=true",
            opensearch_image,
        )  # fmt: skip
    else:
        _require_published_port(local_port)
        if state != "running":
            _docker("start", CONTAINER_NAME)
    url = local_url(local_port)
    _wait_until_healthy(url)
    return url


def published_port(port_bindings: str) -> int | None:
    """The host port publishing the node's 9200, from ``docker inspect``'s JSON of
    ``.HostConfig.PortBindings`` (``{"9200/tcp": [{"HostIp": "127.0.0.1", "HostPort": "9201"}]}``);
    None when it is not published."""
    bindings = json.loads(port_bindings or "null") or {}
    for binding in bindings.get("9200/tcp") or ():
        if str(binding.get("HostPort", "")).isdigit():
            return int(binding["HostPort"])
    return None


def _require_published_port(local_port: int) -> None:
    """Refuse at once a container made for another ``local_port``: waiting for a port that
    nothing publishes took the full start timeout and then blamed the node's health."""
    inspected = _docker(
        "inspect", "--format", "{{json .HostConfig.PortBindings}}", CONTAINER_NAME
    ).stdout.strip()
    port = published_port(inspected)
    if port == local_port:
        return
    remake = f"run `loader down`, then `loader up` (the data volume {DATA_VOLUME} stays)"
    if port is None:
        raise DockerError(f"the container {CONTAINER_NAME} publishes no port: {remake}")
    raise DockerError(
        f"the container {CONTAINER_NAME} publishes port {port}, not {local_port} (the "
        f"local_port setting): {remake} to make it on {local_port}, or set local_port = {port}"
    )


def stop_local() -> bool:
    """Stop and remove the local node's container (the data volume stays). False if none ran."""
    if _container_state() is None:
        return False
    _docker("rm", "--force", CONTAINER_NAME)
    return True


def _wait_until_healthy(url: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/_cluster/health", timeout=5) as response:
                if json.load(response).get("status") in ("green", "yellow"):
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
            pass
        if _container_state() not in ("running", "created", "restarting"):
            logs = _docker("logs", "--tail", "20", CONTAINER_NAME, check=False).stderr
            raise DockerError(f"OpenSearch container stopped while starting:\n{logs}")
        time.sleep(2)
    raise DockerError(
        f"OpenSearch at {url} was not healthy after {START_TIMEOUT_SECONDS} s; "
        f"see `docker logs {CONTAINER_NAME}`"
    )
