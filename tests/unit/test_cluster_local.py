"""``loader up``'s reading of the container it finds: which host port publishes the node."""

from __future__ import annotations

import pytest

from loader.cluster.local import published_port


@pytest.mark.parametrize(
    ("inspected", "port"),
    [
        ('{"9200/tcp":[{"HostIp":"127.0.0.1","HostPort":"9201"}]}', 9201),
        ('{"9200/tcp":[{"HostIp":"","HostPort":""}],"9600/tcp":[{"HostPort":"9600"}]}', None),
        ('{"9600/tcp":[{"HostIp":"127.0.0.1","HostPort":"9200"}]}', None),
        ("{}", None),
        ("null", None),
        ("", None),
    ],
)
def test_the_published_port_is_the_one_mapped_to_9200(inspected, port):
    assert published_port(inspected) == port
