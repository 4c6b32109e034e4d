"""Server-side query embedding: `loader apply` with server_side_embedding registers and deploys the
index's embedding model in ml-commons (idempotently) and stores the text-only templates; they
return what the vector-passing templates return, and the cluster's query vector is the client's.

Needs the project's image with ml-commons (opensearch/build-image.sh). Deploying the model takes
a while on a small machine; the module shares one corpus and one deployment.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from loader.index import ml_model as ml
from loader.index.apply import apply_config, plan_apply
from loader.index.ml_model import PENDING_ML_MODEL_ID, PENDING_SECOND_ML_MODEL_ID
from loader.index.plan import SECOND_ML_MODEL
from loader.index.render import config_names
from loader.models.embedding import embedder_for, resolve_model_path
from loader.models.embedding_export import export_model
from loader.models.onnx_file import model_fingerprint
from loader.models.readers import reader_settings, second_embedder_for
from loader.query.identifiers import exact_terms
from tests.conftest import cleanup_owned
from tests.integration.query.search_corpus import build_corpus

QUESTIONS = [
    "my food came really late, can I get my money back?",
    "what does printer error E1043 mean",
    "how do I reset my password",
    "how long does shipping take",
    "refund for a damaged item",
]


@pytest.fixture(scope="module")
def ml_setup(client, base_settings, tmp_path_factory, embedder):
    """The search corpus, then `loader apply` again with server_side_embedding on."""
    built = None
    try:
        built = build_corpus(client, base_settings, tmp_path_factory.mktemp("ml"), embedder)
        settings = built.replace(server_side_embedding=True, request_timeout=120.0)
        plan = apply_config(settings, dimension=embedder.dimension, client=client)
        yield settings, plan
    finally:
        if built is not None:
            cleanup_owned(client, built.index_name)


def _template_ids(client, settings, template, params, pipeline=None):
    response = client.search_template(
        index=settings.index_name,
        body={"id": template, "params": params},
        params={"search_pipeline": pipeline} if pipeline else {},
    )
    return [hit["_id"] for hit in response["hits"]["hits"]]


def test_apply_registers_deploys_and_renders_the_model_id(client, ml_setup):
    settings, plan = ml_setup
    model_changes = [change for change in plan.changes if change.kind == "ml model"]
    assert len(model_changes) == 1 and model_changes[0].action in ("create", "update", "none")
    assert plan.applied
    status = ml.model_status(client, settings)
    assert status.deployed and status.model_id
    names = config_names(settings.index_name)
    for stem in ("hybrid_text", "vector_text"):
        source = client.get_script(id=names.object_name(stem))["script"]["source"]
        assert json.dumps(status.model_id) in source
        assert '"neural"' in source and "query_vector" not in source
        assert PENDING_ML_MODEL_ID not in source
    second = reader_settings(settings)
    if second is not None:  # the second reader's model beside the first, in hybrid_text
        (step,) = [change for change in plan.changes if change.kind == SECOND_ML_MODEL]
        second_status = ml.model_status(client, second)
        assert second_status.deployed and second_status.model_id != status.model_id
        source = client.get_script(id=names.object_name("hybrid_text"))["script"]["source"]
        assert source.count('"neural"') == 2 and json.dumps(second_status.model_id) in source
        assert PENDING_SECOND_ML_MODEL_ID not in source


def test_apply_again_changes_nothing_and_keeps_the_id(client, ml_setup, embedder):
    settings, _ = ml_setup
    before = ml.model_status(client, settings).model_id
    plan = plan_apply(settings, dimension=embedder.dimension, client=client)
    assert not plan.has_changes, plan.lines()
    assert ml.ensure_model(client, settings).model_id == before


def test_new_model_content_gets_a_new_fingerprint(tmp_path):
    # A new model registers under a new name (name = model + fingerprint), hence a new id.
    source = resolve_model_path("all-MiniLM-L6-v2")
    copy = tmp_path / "model"
    shutil.copytree(source, copy)
    same = model_fingerprint(copy)
    assert same == model_fingerprint(source)
    config = json.loads((copy / "config.json").read_text())
    config["layer_norm_eps"] = 1e-6
    (copy / "config.json").write_text(json.dumps(config))
    assert model_fingerprint(copy) != same


def test_server_query_vector_equals_client_vector(client, ml_setup, embedder):
    settings, _ = ml_setup
    model_id = ml.model_status(client, settings).model_id
    texts = [*QUESTIONS, "refund " * 400]  # the last one is truncated on both sides
    server = np.array(ml.embed_on_cluster(client, settings, model_id, texts), dtype=np.float32)
    local = embedder.embed_queries(texts)  # MiniLM has no instruction: queries = passages
    assert server.shape == local.shape
    cosine = (server * local).sum(axis=1) / (
        np.linalg.norm(server, axis=1) * np.linalg.norm(local, axis=1)
    )
    assert cosine.min() >= 0.999, cosine


@pytest.mark.parametrize(
    ("template", "pipeline"),
    [("hybrid", "rrf"), ("hybrid", "minmax"), ("vector", None)],
)
def test_text_template_returns_the_vector_templates_top5(
    client, ml_setup, embedder, template, pipeline
):
    settings, _ = ml_setup
    names = config_names(settings.index_name)
    pipeline_name = names.object_name(pipeline) if pipeline else None
    second = second_embedder_for(settings)
    for question in QUESTIONS:
        # exact_terms as loader search sends them: the E1043 question's one holder ranks first
        # in both (the text-only template orders holders by BM25, the other by the vector).
        params = {
            "query_text": question,
            "tenant": "A",
            "size": 5,
            "k": 50,
            "exact_terms": list(exact_terms(question)),
        }
        vectors = {"query_vector": embedder.embed_queries([question])[0].tolist()}
        if second is not None and template == "hybrid":  # the text-only one embeds with both
            vectors["second_query_vector"] = second.embed_queries([question])[0].tolist()
        with_vector = _template_ids(
            client, settings, names.object_name(template), {**params, **vectors}, pipeline_name
        )
        text_only = _template_ids(
            client, settings, names.object_name(f"{template}_text"), params, pipeline_name
        )
        assert with_vector, question
        assert text_only == with_vector, (template, pipeline, question)


def test_text_template_keeps_the_tenant_guard_and_filters(client, ml_setup):
    from opensearchpy import TransportError

    settings, _ = ml_setup
    template = config_names(settings.index_name).object_name("hybrid_text")
    with pytest.raises(TransportError):
        _template_ids(client, settings, template, {"query_text": "refund", "size": 5})
    hostile = 'refund"}}, {"match_all": {}}], "x": [{"'
    for tenant in ("A", "B"):
        response = client.search_template(
            index=settings.index_name,
            body={"id": template, "params": {"query_text": hostile, "tenant": tenant}},
            params={"search_pipeline": config_names(settings.index_name).rrf_pipeline},
        )
        tenants = {hit["_source"]["tenant"] for hit in response["hits"]["hits"]}
        assert tenants <= {tenant}


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_bge_on_the_cluster_pools_cls_and_prefixes_queries_like_the_client(client, base_settings):
    """bge-small's jar ONNX file, registered with CLS pooling and its query instruction: a
    neural query (content type QUERY) embeds as ``embed_queries``, a passage as
    ``embed_passages``."""
    settings = base_settings.replace(
        embedding_model="bge-small-en-v1.5", embedding_backend="onnx", request_timeout=120.0
    )
    embedder = embedder_for(settings)
    package = export_model(settings)
    body = ml.register_body(package, "group")
    assert body["model_config"]["pooling_mode"] == "cls"
    assert body["model_config"]["query_prefix"] == embedder.query_prefix != ""
    # Other instructions: the same zip under another name, so apply cannot find the model
    # registered with the old ones (ml-commons keeps them in its config).
    plain = export_model(settings.replace(query_instruction=False))
    assert (plain.path, plain.query_prefix) == (package.path, "") and plain.name != package.name
    assert "query_prefix" not in ml.register_body(plain, "group")["model_config"]
    model_id = ml.ensure_model(client, settings, package).model_id
    texts = [*QUESTIONS, "refund " * 700]  # the last one is truncated at 512 on both sides
    for content_type, local in (
        ("query", embedder.embed_queries(texts)),
        ("passage", embedder.embed_passages(texts)),
    ):
        server = ml.embed_on_cluster(client, settings, model_id, texts, content_type)
        cosine = _cosines(np.array(server, dtype=np.float32), local)
        assert cosine.min() >= 0.999, (content_type, cosine)
