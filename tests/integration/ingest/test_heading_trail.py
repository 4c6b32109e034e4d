"""A section whose heading path is longer than the embedded prefix's budget, pushed to the real
node: the chunk stores the whole trail, a BM25 search for the outermost heading's words finds it
(those words are not in its embedded content), and every result form (search, assembled context,
`loader search` and its --json, `loader serve`) shows the whole trail."""

from __future__ import annotations

import json

from click.testing import CliRunner

from loader.cli import cli
from loader.documents import PATH_SEPARATOR
from loader.index.apply import apply_config
from loader.ingest.chunking import chunking_config
from loader.ingest.chunking.limits import ELLIPSIS, MAX_PREFIX_SHARE
from loader.ingest.sync import push
from loader.query.context import assemble
from loader.query.request import SearchRequest
from loader.query.search import search
from loader.serve.app import create_app
from tests.integration.serve.http_server import Server

TITLE = "Northwind Fleet Telematics Gateway Administrator and Integration Guide"
PATH = (
    "Part III: Deploying the gateway in customer-managed cloud environments",
    "Chapter 12: Networking, proxies and outbound connectivity requirements",
    "12.4 Configuring an authenticating HTTP proxy for telemetry uploads",
    "12.4.3 Troubleshooting certificate pinning failures behind TLS-inspecting proxies",
)
BODY = "Add the proxy's root certificate to the gateway trust store and restart the uploader."
GUIDE = f"""---
title: {TITLE}
---
# {PATH[0]}

## {PATH[1]}

### {PATH[2]}

#### {PATH[3]}

{BODY}
"""
OTHER = """---
title: Billing guide
---
# Invoices

Invoices are sent on the first working day of every month.
"""


def test_a_path_over_the_budget_is_stored_found_and_shown_whole(
    tmp_path, client, base_settings, embedder, unique_name
) -> None:
    settings = base_settings.replace(index_name=unique_name)
    cap = chunking_config(settings, embedder.max_text_tokens).max_tokens // MAX_PREFIX_SHARE
    trail = PATH_SEPARATOR.join((TITLE, *PATH))
    assert embedder.count_tokens(trail) > cap  # the premise: the path does not fit
    apply_config(settings, dimension=embedder.dimension, client=client)
    folder = tmp_path / "guides"
    folder.mkdir()
    (folder / "gateway.md").write_text(GUIDE, encoding="utf-8")
    (folder / "billing.md").write_text(OTHER, encoding="utf-8")
    report = push(folder, settings, client=client, embedder=embedder)
    assert report.failed == 0, report

    stored = client.search(index=unique_name, body={"query": {"term": {"source": "gateway.md"}}})[
        "hits"
    ]["hits"]
    (chunk,) = [hit["_source"] for hit in stored]
    assert (chunk["title"], chunk["heading_path"]) == (TITLE, PATH_SEPARATOR.join(PATH))
    # What is embedded is the budget's share: the title and the innermost headings.
    assert chunk["content"] == f"{TITLE} > {ELLIPSIS} > {PATH[2]} > {PATH[3]}\n\n{BODY}"
    assert "cloud environments" not in chunk["content"]

    # The outermost heading's words are found by BM25, through the stored heading path.
    question = "customer-managed cloud environments"
    request = SearchRequest.from_settings(
        settings, question, tenant=settings.tenant, mode="bm25", rerank=False
    )
    result = search(request, settings, client=client)
    assert [hit.source for hit in result.hits] == ["gateway.md"]
    (hit,) = result.hits
    assert (hit.title, hit.heading_path) == (TITLE, PATH)
    assert hit.heading == trail
    (assembled,) = assemble(result.hits, 5, expand=None, merge=True)
    assert (assembled.title, assembled.heading_path) == (TITLE, PATH)

    config = tmp_path / "loader.toml"
    config.write_text("", encoding="utf-8")
    base = ["search", question, "--mode", "bm25", "--no-rerank", "--url",
            settings.opensearch_url, "--index", unique_name, "--config", str(config)]  # fmt: skip
    printed = CliRunner().invoke(cli, base, catch_exceptions=False)
    assert printed.exit_code == 0, printed.output
    assert printed.output.splitlines()[0] == f"1. {trail}  (gateway.md)"
    as_json = CliRunner().invoke(cli, [*base, "--json"], catch_exceptions=False)
    assert as_json.exit_code == 0, as_json.output
    (shown,) = json.loads(as_json.output)["hits"]
    assert (shown["title"], shown["heading_path"]) == (TITLE, list(PATH))

    with Server(create_app(settings)) as server:
        status, answer = server.request(
            "POST",
            "/search",
            {"question": question, "tenant": settings.tenant, "mode": "bm25", "rerank": False},
        )
    assert status == 200, answer
    (served,) = answer["hits"]
    assert (served["title"], served["heading_path"]) == (TITLE, list(PATH))
