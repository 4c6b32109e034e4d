"""Document-level security per tenant, on a node with the OpenSearch security plugin.

The node is the secure test image (``OPENSEARCH_VARIANT=secure bash opensearch/build-image.sh``,
``loader-opensearch-secure:2.19.1``): TLS on REST and transport, HTTP basic users, and the roles
of ``opensearch/secure/security/roles.yml``: ``acme_reader`` may read the ``chunks*`` indices
through the DLS query ``{"term": {"tenant": "acme"}}``, ``globex_reader`` likewise for globex.

The admin applies the project's configuration and pushes two tenants' folders; then each way a
reader could reach the other tenant's chunks is tried on the real cluster — ``_search``,
``_count``, aggregations, an inline ``_search/template``, ``_msearch``, ``_mget`` and get by id,
and ``loader.query.search.search`` through the stored templates — and none returns them. TLS
verification stays on throughout: the CA certificate is copied out of the container.
"""

from __future__ import annotations

import base64
import io
import json
import os
import secrets
import ssl
import subprocess
import tarfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import opensearchpy
import pytest

from loader.cluster.client import connect
from loader.errors import QueryError
from loader.index.apply import apply_config
from loader.ingest.sync import push
from loader.models.embedding import get_embedder
from loader.query.request import SearchRequest
from loader.query.search import search
from loader.settings import Settings
from tests.single_node import DISK_WATERMARKS

IMAGE = os.environ.get("OPENSEARCH_SECURE_IMAGE", "loader-opensearch-secure:2.19.1")
CA_PATH = "/usr/share/opensearch/config/root-ca.pem"
USERS = ("admin", "acme_reader", "globex_reader")
ACME = {
    "pricing.md": "# Pricing\n\n## Plans\n\nAcme sells the Rocket plan at 40 euros a month.\n\n"
    "## Discounts\n\nAcme gives schools 30 % off the Rocket plan.\n",
    "roadmap.md": "# Roadmap\n\n## Next quarter\n\nAcme ships anvils with tracking.\n",
}
# "quokka" appears in globex's documents only.
GLOBEX = {
    "pricing.md": "# Pricing\n\n## Plans\n\nGlobex sells the Hammock plan at 12 dollars a week; "
    "every Hammock comes with a quokka.\n",
    "faq.md": "# FAQ\n\n## Support\n\nGlobex quokka support answers on weekdays.\n",
}


def _image_missing() -> bool:
    found = subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True, check=False)
    return found.returncode != 0


@dataclass(frozen=True)
class SecureNode:
    port: int
    ca_certs: str
    passwords: dict[str, str]

    def settings(self, user: str, **changes) -> Settings:
        url = f"https://{user}:{self.passwords[user]}@127.0.0.1:{self.port}"
        return Settings(opensearch_url=url, ca_certs=self.ca_certs, **changes)

    def client(self, user: str) -> opensearchpy.OpenSearch:
        return connect(self.settings(user))


def _wait_green(port: int, ca_certs: str, password: str, container, timeout: float = 300) -> None:
    """Poll cluster health over verified TLS until the node and its security index are ready."""
    context = ssl.create_default_context(cafile=ca_certs)
    token = base64.b64encode(f"admin:{password}".encode()).decode()
    request = urllib.request.Request(
        f"https://127.0.0.1:{port}/_cluster/health?wait_for_status=yellow&timeout=5s",
        headers={"Authorization": f"Basic {token}"},
    )
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        container.reload()
        if container.status == "exited":
            logs = container.logs(tail=20).decode(errors="replace")
            raise RuntimeError(f"secure node exited before it was ready:\n{logs}")
        try:
            with urllib.request.urlopen(request, context=context, timeout=10) as response:
                if json.load(response).get("status") in ("green", "yellow"):
                    return
        except (urllib.error.URLError, ConnectionError, OSError) as exc:  # not up yet
            last = exc
        time.sleep(1)
    raise TimeoutError(f"secure node on port {port} not ready after {timeout} s: {last}")


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureNode]:
    if _image_missing():
        pytest.skip(
            f"image {IMAGE} is not built: run OPENSEARCH_VARIANT=secure bash "
            "opensearch/build-image.sh (scripts/setup.sh does)"
        )
    from testcontainers.core.container import DockerContainer

    passwords = {user: f"Pw-{secrets.token_urlsafe(18)}" for user in USERS}
    container = DockerContainer(IMAGE).with_exposed_ports(9200)
    container.with_env("OPENSEARCH_JAVA_OPTS", "-Xms1g -Xmx1g")
    for name, value in DISK_WATERMARKS.items():
        container.with_env(name, value)
    for user, password in passwords.items():
        container.with_env(f"OPENSEARCH_PASSWORD_{user}", password)
    with container:
        archive, _ = container.get_wrapped_container().get_archive(CA_PATH)
        with tarfile.open(fileobj=io.BytesIO(b"".join(archive))) as tar:
            pem = tar.extractfile(Path(CA_PATH).name).read()
        ca_certs = tmp_path_factory.mktemp("secure-ca") / "root-ca.pem"
        ca_certs.write_bytes(pem)
        port = int(container.get_exposed_port(9200))
        _wait_green(port, str(ca_certs), passwords["admin"], container.get_wrapped_container())
        yield SecureNode(port, str(ca_certs), passwords)


@dataclass(frozen=True)
class Loaded:
    alias: str
    index: str
    chunks: dict[str, set[str]]  # tenant -> its chunk ids, as the admin sees them


@pytest.fixture(scope="module")
def loaded(node: SecureNode, tmp_path_factory: pytest.TempPathFactory) -> Loaded:
    """As admin: the project's configuration applied, then acme's and globex's folders pushed."""
    alias = f"chunks-secure-{uuid.uuid4().hex[:8]}"  # the roles grant chunks*
    settings = node.settings("admin", index_name=alias)
    embedder = get_embedder(settings.embedding_model, device=settings.device)
    admin = node.client("admin")
    # 2.19.1 has no search-pipeline-common (not on Maven Central), so no script request
    # processor: a project override of the pipelines' shared partial leaves the size guard out.
    project = tmp_path_factory.mktemp("project")
    (project / "pipelines" / "search").mkdir(parents=True)
    (project / "pipelines" / "search" / "_request_processors.j2").write_text("")
    # 2.19's score-ranker-processor takes no weights: plain RRF of the three sub-queries.
    (project / "pipelines" / "search" / "rrf.json.j2").write_text(
        '{"description": "RRF for 2.19", "phase_results_processors": [{"score-ranker-processor":'
        ' {"combination": {"technique": "rrf", "rank_constant": 60}}}]}'
    )
    apply_config(settings, dimension=embedder.dimension, client=admin, project_dir=project)
    root = tmp_path_factory.mktemp("tenants")
    for tenant, files in (("acme", ACME), ("globex", GLOBEX)):
        folder = root / tenant / "kb"
        folder.mkdir(parents=True)
        for name, text in files.items():
            (folder / name).write_text(text, encoding="utf-8")
        report = push(folder, settings, tenant=tenant, client=admin, embedder=embedder)
        assert report.failed == 0, report
    admin.indices.refresh(index=alias)
    chunks = {}
    for tenant in ("acme", "globex"):
        found = admin.search(
            index=alias, body={"query": {"term": {"tenant": tenant}}, "size": 100, "_source": False}
        )
        chunks[tenant] = {hit["_id"] for hit in found["hits"]["hits"]}
        assert chunks[tenant], tenant
    (index,) = admin.indices.get_alias(name=alias)
    return Loaded(alias, index, chunks)


def hit_ids(response: dict) -> set[str]:
    return {hit["_id"] for hit in response["hits"]["hits"]}


def test_tls_verification_is_on(node):
    without_ca = Settings(opensearch_url=f"https://127.0.0.1:{node.port}")
    with pytest.raises(opensearchpy.SSLError):
        connect(without_ca).info()


def test_wrong_or_missing_password_is_401(node):
    wrong = Settings(
        opensearch_url=f"https://acme_reader:nope@127.0.0.1:{node.port}", ca_certs=node.ca_certs
    )
    with pytest.raises(opensearchpy.AuthenticationException):
        connect(wrong).info()
    anonymous = Settings(opensearch_url=f"https://127.0.0.1:{node.port}", ca_certs=node.ca_certs)
    with pytest.raises(opensearchpy.AuthenticationException):
        connect(anonymous).info()


def test_match_all_search_and_count_see_own_tenant_only(node, loaded):
    acme = node.client("acme_reader")
    found = acme.search(index=loaded.alias, body={"query": {"match_all": {}}, "size": 100})
    assert hit_ids(found) == loaded.chunks["acme"]
    assert {hit["_source"]["tenant"] for hit in found["hits"]["hits"]} == {"acme"}
    assert found["hits"]["total"]["value"] == len(loaded.chunks["acme"])
    # The concrete index version behind the alias is filtered the same way.
    assert hit_ids(acme.search(index=loaded.index, body={"size": 100})) == loaded.chunks["acme"]
    assert acme.count(index=loaded.alias)["count"] == len(loaded.chunks["acme"])
    globex_only = {"query": {"term": {"tenant": "globex"}}}
    assert acme.count(index=loaded.alias, body=globex_only)["count"] == 0


def test_other_tenants_words_find_nothing(node, loaded):
    admin, acme = node.client("admin"), node.client("acme_reader")
    query = {"query": {"match": {"content": "quokka"}}, "size": 100}
    assert hit_ids(admin.search(index=loaded.alias, body=query)) == loaded.chunks["globex"]
    assert hit_ids(acme.search(index=loaded.alias, body=query)) == set()
    # The other direction: globex's reader does not find acme's words.
    rocket = {"query": {"match": {"content": "rocket"}}, "size": 100}
    assert hit_ids(node.client("globex_reader").search(index=loaded.alias, body=rocket)) == set()
    assert hit_ids(acme.search(index=loaded.alias, body=rocket)) <= loaded.chunks["acme"]


def test_aggregation_sees_own_tenant_only(node, loaded):
    body = {
        "size": 0,
        "aggs": {
            "tenants": {"terms": {"field": "tenant"}},
            "sources": {"terms": {"field": "source", "size": 50}},
        },
    }
    found = node.client("acme_reader").search(index=loaded.alias, body=body)
    buckets = {b["key"]: b["doc_count"] for b in found["aggregations"]["tenants"]["buckets"]}
    assert buckets == {"acme": len(loaded.chunks["acme"])}


def test_inline_search_template_and_msearch_see_own_tenant_only(node, loaded):
    acme = node.client("acme_reader")
    template = {
        "source": '{"query": {"term": {"tenant": "{{t}}"}}, "size": 100}',
        "params": {"t": "globex"},
    }
    found = acme.search_template(index=loaded.alias, body=template)
    assert hit_ids(found) == set()
    template["params"]["t"] = "acme"
    assert hit_ids(acme.search_template(index=loaded.alias, body=template)) == loaded.chunks["acme"]
    searches = [
        {"index": loaded.alias},
        {"query": {"match_all": {}}, "size": 100},
        {"index": loaded.alias},
        {"query": {"term": {"tenant": "globex"}}, "size": 100},
    ]
    everything, globex = acme.msearch(body=searches)["responses"]
    assert hit_ids(everything) == loaded.chunks["acme"]
    assert hit_ids(globex) == set()


def test_get_and_mget_by_id_do_not_return_other_tenants_chunks(node, loaded):
    acme = node.client("acme_reader")
    globex_id = sorted(loaded.chunks["globex"])[0]
    acme_id = sorted(loaded.chunks["acme"])[0]
    docs = acme.mget(index=loaded.index, body={"ids": [globex_id, acme_id]})["docs"]
    assert [(doc["_id"], doc["found"]) for doc in docs] == [(globex_id, False), (acme_id, True)]
    assert "_source" not in docs[0]
    with pytest.raises(opensearchpy.NotFoundError):
        acme.get(index=loaded.index, id=globex_id)
    assert acme.get(index=loaded.index, id=acme_id)["_source"]["tenant"] == "acme"


def test_readers_cannot_write_documents_scripts_or_templates(node, loaded):
    acme = node.client("acme_reader")
    with pytest.raises(opensearchpy.AuthorizationException):
        acme.index(index=loaded.alias, body={"tenant": "globex"}, id="forged")
    with pytest.raises(opensearchpy.AuthorizationException):
        acme.delete(index=loaded.index, id=sorted(loaded.chunks["acme"])[0])
    with pytest.raises(opensearchpy.AuthorizationException):
        acme.put_script(
            id=f"{loaded.alias}-bm25",
            body={"script": {"lang": "mustache", "source": '{"query": {"match_all": {}}}'}},
        )


@pytest.mark.parametrize("mode", ["bm25"])
def test_loader_search_finds_own_chunks_and_never_the_other_tenants(node, loaded, mode):
    settings = node.settings("acme_reader", index_name=loaded.alias)
    embedder = get_embedder(settings.embedding_model, device=settings.device)
    client = connect(settings)
    own = search(
        SearchRequest.from_settings(
            settings, "How much is the Rocket plan?", tenant="acme", mode=mode, rerank=False
        ),
        settings,
        client=client,
        embedder=embedder,
    )
    assert own.hits and {hit.chunk_id for hit in own.hits} <= loaded.chunks["acme"]
    assert own.hits[0].tenant == "acme"
    # The stored templates filter on the tenant parameter; DLS keeps globex's chunks away even
    # when acme's reader asks for tenant globex.
    other = search(
        SearchRequest.from_settings(
            settings, "Hammock plan quokka", tenant="globex", mode=mode, rerank=False
        ),
        settings,
        client=client,
        embedder=embedder,
    )
    assert other.hits == []


@pytest.mark.parametrize("mode", ["hybrid-rrf", "hybrid-minmax"])
def test_hybrid_search_under_dls_is_refused_by_the_cluster(node, loaded, mode):
    """What 2.19.1 does today: DLS wraps a reader's query in a bool filter, and neural-search
    refuses a hybrid query that is not at the top. The admin (no DLS) gets hybrid results from
    the same templates. When this starts failing, hybrid works under DLS: assert the hits."""
    admin_settings = node.settings("admin", index_name=loaded.alias)
    embedder = get_embedder(admin_settings.embedding_model, device=admin_settings.device)
    as_admin = search(
        SearchRequest.from_settings(
            admin_settings, "How much is the Rocket plan?", tenant="acme", mode=mode, rerank=False
        ),
        admin_settings,
        client=connect(admin_settings),
        embedder=embedder,
    )
    assert as_admin.hits and {hit.chunk_id for hit in as_admin.hits} <= loaded.chunks["acme"]
    settings = node.settings("acme_reader", index_name=loaded.alias)
    with pytest.raises(QueryError, match="hybrid query must be a top level query"):
        search(
            SearchRequest.from_settings(
                settings, "How much is the Rocket plan?", tenant="acme", mode=mode, rerank=False
            ),
            settings,
            client=connect(settings),
            embedder=embedder,
        )
