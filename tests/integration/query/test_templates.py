"""The stored search templates on a small fixture index: expected documents, filters, and tenant
isolation against injection attempts in every parameter, through every template and pipeline."""

from __future__ import annotations

import json

import opensearchpy
import pytest

from loader.index.apply import apply_config
from loader.index.render import config_names

DOCS = [
    # (id, tenant, lang, tags, published, title, heading_path, body)
    (
        "a-refund",
        "A",
        "en",
        ["billing"],
        "2025-06-01",
        "Refund policy",
        "Late deliveries",
        "Customers get a full refund when a delivery arrives more than ten days late.",
    ),
    (
        "a-error",
        "A",
        "en",
        ["support"],
        "2019-03-01",
        "Printer manual",
        "Error codes",
        "Error E1043 means the paper tray is empty. Ticket 44821 tracks the firmware fix.",
    ),
    (
        "a-fr",
        "A",
        "fr",
        ["billing"],
        "2024-01-10",
        "Politique de remboursement",
        "Retards",
        "Le client est rembourse si la livraison arrive en retard.",
    ),
    (
        "b-refund",
        "B",
        "en",
        ["billing"],
        "2025-06-01",
        "Refund policy",
        "Late deliveries",
        "Tenant B secret: customers get a full refund when a delivery arrives late.",
    ),
    (
        "b-error",
        "B",
        "en",
        ["support"],
        "2025-02-01",
        "Printer manual",
        "Error codes",
        "Tenant B secret: error E1043 means the paper tray is empty.",
    ),
]

INJECTIONS = [
    '"',
    '\\"',
    '"}}',
    "}}",
    "{{",
    "{{tenant}}",
    "{{#toJson}}tenant{{/toJson}}",
    "{{/tenant}}{{^tenant}}",
    "{{{tenant}}}",
    'A" OR "B',
    'B", "A',
    '"]}}',
    '"}}, {"match_all": {}}, {"term": {"x": "',
    '{"match_all": {}}',
    '10, "query": {"match_all": {}}',
    '1}}]}}, "query": {"match_all": {}}, "x": [{"y": {"z": "',
    "*",
    "\n\t\u0000\u2028",
]
NUMBER_INJECTIONS = ['10, "query": {"match_all": {}}', "10}}", "-1", "1e9", "A", '"10"']


@pytest.fixture
def fixture_index(client, base_settings, unique_name, embedder):
    """The configuration applied under a unique alias, with DOCS indexed through the alias."""
    settings = base_settings.replace(index_name=unique_name)
    apply_config(settings, dimension=embedder.dimension, client=client)
    texts = [f"{title} > {path}\n\n{body}" for _, _, _, _, _, title, path, body in DOCS]
    vectors = embedder.embed(texts)
    actions = []
    for (doc_id, tenant, lang, tags, published, title, path, body), text, vector in zip(
        DOCS, texts, vectors, strict=True
    ):
        actions.append({"index": {"_index": unique_name, "_id": doc_id}})
        actions.append(
            {
                "chunk_id": doc_id,
                "doc_id": doc_id,
                "source": f"{doc_id}.md",
                "tenant": tenant,
                "lang": lang,
                "tags": tags,
                "published": published,
                "title": title,
                "heading_path": path,
                "content": text,
                "body": body,
                "position": 0,
                "embedding": vector.tolist(),
            }
        )
    result = client.bulk(body=actions, refresh=True)
    assert not result["errors"], result
    return settings


def call(client, settings, template: str, pipeline: str | None, params: dict) -> dict:
    """Run a stored template through the alias, the pipeline passed as a URL parameter."""
    names = config_names(settings.index_name)
    kwargs = {"search_pipeline": pipeline} if pipeline else {}
    return client.search_template(
        index=names.alias, body={"id": names.object_name(template), "params": params}, **kwargs
    )


def hit_ids(response: dict) -> list[str]:
    return [hit["_id"] for hit in response["hits"]["hits"]]


def vector(embedder, text: str) -> list[float]:
    return embedder.embed([text])[0].tolist()


MODES = [("hybrid", "rrf"), ("hybrid", "minmax"), ("bm25", None), ("vector", None)]


def test_every_template_finds_the_expected_document(client, fixture_index, embedder):
    question = "refund for a late delivery"
    params = {"query_text": question, "query_vector": vector(embedder, question), "tenant": "A"}
    names = config_names(fixture_index.index_name)
    for template, pipeline in MODES:
        response = call(
            client, fixture_index, template, pipeline and names.object_name(pipeline), params
        )
        ids = hit_ids(response)
        assert ids[0] == "a-refund", (template, pipeline, ids)
        assert all(i.startswith("a-") for i in ids), (template, pipeline, ids)
        assert all("embedding" not in hit["_source"] for hit in response["hits"]["hits"])


def test_identifiers_are_found_by_bm25(client, fixture_index):
    for query in ("E1043", "44821", "e1043"):
        response = call(client, fixture_index, "bm25", None, {"query_text": query, "tenant": "A"})
        assert hit_ids(response) == ["a-error"], query


def test_filters_and_size(client, fixture_index, embedder):
    question = "refund"
    base = {"query_text": question, "query_vector": vector(embedder, question), "tenant": "A"}
    rrf = config_names(fixture_index.index_name).rrf_pipeline
    for template, pipeline in (("hybrid", rrf), ("bm25", None), ("vector", None)):

        def ids(template=template, pipeline=pipeline, **extra):
            return set(hit_ids(call(client, fixture_index, template, pipeline, base | extra)))

        assert ids(tags=["support"]) <= {"a-error"}
        assert ids(tags=["billing", "support"]) <= {"a-refund", "a-fr", "a-error"}
        assert ids(tags="support") <= {"a-error"}
        assert ids(tags=["nope"]) == set()
        assert ids(lang="fr") <= {"a-fr"}
        assert "a-error" not in ids(published_from="2024-01-01")
        assert ids(published_to="2020-01-01") <= {"a-error"}
        assert ids(published_from="2024-01-01", published_to="2024-12-31") <= {"a-fr"}
        assert (
            len(hit_ids(call(client, fixture_index, template, pipeline, base | {"size": 1}))) <= 1
        )
        assert ids(decay_scale="180d") <= {"a-refund", "a-fr", "a-error"}
    # vector search always has neighbours: the filters, not the text, decide what comes back
    vector_only = set(hit_ids(call(client, fixture_index, "vector", None, base | {"lang": "fr"})))
    assert vector_only == {"a-fr"}


def test_recency_decay_prefers_recent_documents(client, fixture_index):
    params = {"query_text": "printer error paper tray", "tenant": "A", "decay_scale": "30d"}
    response = call(client, fixture_index, "bm25", None, params)
    plain = call(client, fixture_index, "bm25", None, params | {"decay_scale": ""})
    # a-error is from 2019: the decay shrinks its score to almost nothing
    assert response["hits"]["hits"][0]["_score"] < plain["hits"]["hits"][0]["_score"] / 10


def _outcome(client, settings, template, pipeline, params) -> list[dict] | None:
    """The hits, or None when OpenSearch refused the request."""
    try:
        return call(client, settings, template, pipeline, params)["hits"]["hits"]
    except opensearchpy.TransportError as exc:
        assert exc.status_code == 400, exc  # refused as a bad request, never a server error
        return None


def test_tenant_isolation_against_injection(client, fixture_index, embedder):
    names = config_names(fixture_index.index_name)
    question = "refund for a late delivery"
    base = {
        "query_text": question,
        "query_vector": vector(embedder, question),
        "tenant": "B",
        "size": 10,
        "k": 10,
    }
    cases = []
    for payload in INJECTIONS:
        for key in ("query_text", "lang", "published_from", "published_to", "decay_scale"):
            cases.append(base | {key: payload})
        cases.append(base | {"tags": [payload]})
        cases.append(base | {"tags": ["billing", payload]})
        cases.append(base | {"tags": payload})
        cases.append(base | {"exact_terms": [payload]})
        cases.append(base | {"exact_terms": ["E1043", payload]})
        cases.append(base | {"exact_terms": payload})
        cases.append(base | {"collapse_doc": payload})
        cases.append(base | {"tenant": payload})
        cases.append(base | {"tenant": "B" + payload})
    for payload in NUMBER_INJECTIONS:
        cases.append(base | {"size": payload})
        cases.append(base | {"k": payload})
    cases += [
        base | {"tenant": ["A", "B"]},
        base | {"tenant": ["B"]},
        base | {"tenant": {"term": "A"}},
        base | {"tenant": {"tenant": "A"}},
        base | {"tags": {"index": names.version_index(1), "id": "a-refund", "path": "tags"}},
        base | {"tags": [{"tags": "x"}]},
        base | {"lang": {"lang": '"}}, {"match_all": {}}, {"term": {"lang": "'}},
        base
        | {"query_vector": json.dumps(base["query_vector"]) + ', "k": 100}}, {"match_all": {}'},
        base | {"query_vector": '[0.1], "filter": {"match_all": {}}'},
        base | {"query_vector": {"0": 1, "match_all": {}}},
        base | {"query_vector": [{"query_vector": '[1], "x": 1'}]},
        base | {"decay_scale": ["180d", "1d"]},
    ]
    refused = answered = 0
    for template, pipeline in MODES:
        pipeline_name = pipeline and names.object_name(pipeline)
        for params in cases:
            hits = _outcome(client, fixture_index, template, pipeline_name, params)
            if hits is None:
                refused += 1
                continue
            tenants = {hit["_source"]["tenant"] for hit in hits}
            # Only documents of exactly the tenant asked for, never tenant A's.
            assert tenants <= (
                {params["tenant"]} if isinstance(params["tenant"], str) else set()
            ), (
                template,
                pipeline,
                params,
                tenants,
            )
            assert "A" not in tenants
            answered += bool(tenants)
    assert refused > 0  # some attempts break the JSON and are refused outright
    assert answered > 0  # others are harmless text and still find tenant B's documents


def test_a_call_without_tenant_fails_or_returns_nothing(client, fixture_index, embedder):
    names = config_names(fixture_index.index_name)
    question = "refund"
    base = {"query_text": question, "query_vector": vector(embedder, question)}
    for template, pipeline in MODES:
        pipeline_name = pipeline and names.object_name(pipeline)
        for params in (
            base,
            base | {"tenant": ""},
            base | {"tenant": None},
            base | {"tenant": False},
            base | {"tenant": []},
        ):
            with pytest.raises(opensearchpy.TransportError) as error:
                call(client, fixture_index, template, pipeline_name, params)
            assert "TENANT_PARAMETER_IS_REQUIRED" in str(error.value.info)


def test_rendered_templates_are_valid_json(client, fixture_index):
    """_render/template shows the JSON a caller's parameters produce."""
    names = config_names(fixture_index.index_name)
    params_sets = [
        {"tenant": "A"},
        {"tenant": "A", "query_text": "x", "query_vector": [0.0, 1.5], "size": 3, "k": 7},
        {
            "tenant": "A",
            "tags": ["a", "b"],
            "lang": "en",
            "published_from": "2020-01-01",
            "published_to": "now",
            "decay_scale": "180d",
            "query_vector": [1],
        },
    ]
    for template in ("hybrid", "bm25", "vector"):
        for params in params_sets:
            if template != "bm25" and "query_vector" not in params:
                continue
            rendered = client.render_search_template(
                body={"id": names.object_name(template), "params": params}
            )["template_output"]
            assert isinstance(rendered, dict)
            assert rendered["_source"] == {"excludes": ["embedding", "second_embedding"]}
