"""The single OpenSearch node the tests start, and the benchmarks that start their own: the
project's image through testcontainers, talked to over loopback only."""

from __future__ import annotations

import os

from loader.settings import Settings

# These machines have /.dockerenv, so testcontainers would otherwise talk to the bridge gateway;
# tests and benchmarks may only talk to loopback. A node with ml-commons takes one to three
# minutes to turn green on two busy cores; testcontainers waits TC_MAX_TRIES seconds.
TESTCONTAINERS_ENVIRONMENT = {
    "TESTCONTAINERS_CONNECTION_MODE": "docker_host",
    "TC_HOST": "127.0.0.1",
    "TESTCONTAINERS_RYUK_DISABLED": "true",
    "TC_MAX_TRIES": "400",
}

# OpenSearch's disk watermarks default to a share of the disk used: past 85 % no replica is
# allocated, past 90 % shards move away, past 95 % every index turns read-only. The tests run on
# shared machines whose disk is often that full, though tens of GB are free, and a 3-node
# cluster then stays yellow (CI of stop 56: 3 replicas unassigned at 84 % used). Absolute free
# space keeps the disk monitor on, as in production, but measures what the tests need: room to
# write, not a share of someone else's disk. All three must be bytes or all shares.
DISK_WATERMARKS = {
    "cluster.routing.allocation.disk.watermark.low": "2gb",
    "cluster.routing.allocation.disk.watermark.high": "1gb",
    "cluster.routing.allocation.disk.watermark.flood_stage": "512mb",
}


def use_loopback_testcontainers() -> None:
    """Set testcontainers' environment (above) where the caller's environment does not."""
    for name, value in TESTCONTAINERS_ENVIRONMENT.items():
        os.environ.setdefault(name, value)


def single_node():
    """An unstarted container of one node of ``OPENSEARCH_IMAGE`` (else the settings' image),
    security off, a 1 GB heap and the disk watermarks above; use it as a context manager."""
    use_loopback_testcontainers()  # before the import: testcontainers reads it when imported
    from testcontainers.community.opensearch import OpenSearchContainer

    image = os.environ.get("OPENSEARCH_IMAGE") or Settings().opensearch_image
    container = OpenSearchContainer(image=image, security_enabled=False)
    container.with_env("OPENSEARCH_JAVA_OPTS", "-Xms1g -Xmx1g")
    for name, value in DISK_WATERMARKS.items():
        container.with_env(name, value)
    return container
