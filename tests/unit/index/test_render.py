"""The config files render to valid JSON from the settings; projects override packaged files."""

from __future__ import annotations

import json

import pytest

from loader.errors import ConfigError
from loader.index.render import (
    INDEX_FILE,
    config_names,
    list_config_files,
    render_config,
    render_file,
)
from loader.settings import Settings


def test_every_packaged_file_renders_valid_json(tmp_path):
    names = list_config_files(project_dir=tmp_path)
    assert INDEX_FILE in names
    assert {
        "pipelines/search/rrf.json.j2",
        "pipelines/search/minmax.json.j2",
        "pipelines/ingest/ingest.json.j2",
        "search_templates/hybrid.json.j2",
        "search_templates/bm25.json.j2",
        "search_templates/vector.json.j2",
    } <= set(names)
    for name in names:
        body = render_file(name, Settings(), 384, project_dir=tmp_path)
        json.loads(json.dumps(body))  # plain JSON types only
        assert isinstance(body, dict) and body


def test_mapping_follows_settings_and_dimension(tmp_path):
    settings = Settings(
        index_name="docs",
        number_of_shards=2,
        number_of_replicas=1,
        text_analyzer="french",
        hnsw_m=24,
        hnsw_ef_construction=200,
        hnsw_ef_search=64,
        space_type="l2",
    )
    index = render_config(settings, 768, project_dir=tmp_path).index
    assert index["settings"]["index"]["number_of_shards"] == 2
    assert index["settings"]["index"]["number_of_replicas"] == 1
    assert index["settings"]["index"]["knn"] is True
    assert index["settings"]["index"]["knn.algo_param.ef_search"] == 64
    assert index["settings"]["index"]["default_pipeline"] == "docs-ingest"
    mappings = index["mappings"]
    assert mappings["dynamic"] == "strict"
    fields = mappings["properties"]
    vector = fields["embedding"]
    assert vector["type"] == "knn_vector" and vector["dimension"] == 768
    assert vector["method"] == {
        "name": "hnsw",
        "engine": "lucene",
        "space_type": "l2",
        "parameters": {"m": 24, "ef_construction": 200},
    }
    assert fields["content"]["analyzer"] == "french"
    assert fields["content"]["fields"]["exact"]["analyzer"] == "standard"
    assert fields["title"]["fields"]["keyword"]["type"] == "keyword"
    assert fields["heading_path"]["fields"]["keyword"]["type"] == "keyword"
    assert fields["body"]["index"] is False
    for name in (
        "chunk_id",
        "doc_id",
        "source",
        "collection",
        "content_hash",
        "doc_hash",
        "tenant",
        "lang",
        "tags",
        "section_id",
        "strategy",
    ):
        assert fields[name]["type"] == "keyword", name
    assert fields["position"]["type"] == fields["page"]["type"] == "integer"
    assert fields["published"]["type"] == fields["indexed_at"]["type"] == "date"
    assert fields["parent_text"]["index"] is False and fields["window"]["index"] is False


def test_pipelines_follow_settings(tmp_path):
    settings = Settings(index_name="docs", rrf_rank_constant=20, bm25_weight=0.4, exact_weight=0.5)
    config = render_config(settings, 384, project_dir=tmp_path)
    assert set(config.search_pipelines) == {"docs-rrf", "docs-minmax", "docs-zscore"}
    rrf = config.search_pipelines["docs-rrf"]["phase_results_processors"][0]
    # weights in the hybrid template's order: BM25, vector, exact
    assert rrf["score-ranker-processor"]["combination"] == {
        "technique": "rrf",
        "rank_constant": 20,
        "parameters": {"weights": [0.25, 0.25, 0.5]},
    }
    minmax = config.search_pipelines["docs-minmax"]["phase_results_processors"][0]
    processor = minmax["normalization-processor"]
    assert processor["normalization"] == {"technique": "min_max"}
    assert processor["combination"]["technique"] == "arithmetic_mean"
    assert processor["combination"]["parameters"]["weights"] == [0.2, 0.3, 0.5]
    assert set(config.ingest_pipelines) == {"docs-ingest"}


def test_rrf_weights_split_by_rrf_bm25_weight(tmp_path):
    settings = Settings(index_name="docs", rrf_bm25_weight=0.25, exact_weight=0.6)
    config = render_config(settings, 384, project_dir=tmp_path)
    rrf = config.search_pipelines["docs-rrf"]["phase_results_processors"][0]
    weights = rrf["score-ranker-processor"]["combination"]["parameters"]["weights"]
    assert weights == [0.1, 0.3, 0.6]  # BM25 a quarter of the shared 0.4, the vector the rest


def test_search_templates_are_mustache_strings(tmp_path):
    config = render_config(Settings(index_name="docs", top_k=7), 384, project_dir=tmp_path)
    assert set(config.search_templates) == {"docs-hybrid", "docs-bm25", "docs-vector"}
    for body in config.search_templates.values():
        script = body["script"]
        assert script["lang"] == "mustache"
        source = script["source"]
        assert isinstance(source, str)
        assert source.startswith("{{^tenant}}TENANT_PARAMETER_IS_REQUIRED{{/tenant}}")
        assert '"size": "{{size}}{{^size}}7{{/size}}"' in source
        assert "{{{" not in source  # never an unescaped mustache variable
        assert '"excludes": ["embedding", "second_embedding"]' in source
    assert '"hybrid"' in config.search_templates["docs-hybrid"]["script"]["source"]
    assert (
        "{{#toJson}}query_vector{{/toJson}}"
        in config.search_templates["docs-vector"]["script"]["source"]
    )
    assert "knn" not in config.search_templates["docs-bm25"]["script"]["source"]


def test_names_derive_from_alias():
    names = config_names("kb")
    assert names.version_index(3) == "kb-v3"
    assert (names.rrf_pipeline, names.minmax_pipeline) == ("kb-rrf", "kb-minmax")
    assert (names.hybrid_template, names.bm25_template, names.vector_template) == (
        "kb-hybrid",
        "kb-bm25",
        "kb-vector",
    )
    assert names.for_search_mode("hybrid-minmax") == ("kb-hybrid", "kb-minmax")
    assert names.for_search_mode("bm25") == ("kb-bm25", None)
    with pytest.raises(ConfigError, match="search_mode 'nope'"):
        names.for_search_mode("nope")


def test_project_files_override_and_extend_the_packaged_ones(tmp_path):
    (tmp_path / "pipelines" / "search").mkdir(parents=True)
    (tmp_path / "pipelines" / "search" / "rrf.json.j2").write_text(
        '{"description": "mine {{ settings.rrf_rank_constant }}", "phase_results_processors": []}'
    )
    (tmp_path / "pipelines" / "search" / "extra.json.j2").write_text('{"description": "x"}')
    config = render_config(Settings(), 384, project_dir=tmp_path)
    assert config.search_pipelines["chunks-rrf"]["description"] == "mine 60"
    assert config.search_pipelines["chunks-extra"] == {"description": "x"}
    assert "chunks-minmax" in config.search_pipelines  # packaged default still used


def test_invalid_json_names_the_file(tmp_path):
    (tmp_path / "mappings").mkdir()
    (tmp_path / "mappings" / "chunks.json.j2").write_text('{"settings": {,}}')
    with pytest.raises(ConfigError, match=r"mappings/chunks.json.j2 does not render valid JSON"):
        render_config(Settings(), 384, project_dir=tmp_path)


def test_unknown_variable_names_the_file(tmp_path):
    (tmp_path / "mappings").mkdir()
    (tmp_path / "mappings" / "chunks.json.j2").write_text('{"x": {{ settings.no_such_setting }}}')
    with pytest.raises(ConfigError, match=r"mappings/chunks.json.j2.*no_such_setting"):
        render_config(Settings(), 384, project_dir=tmp_path)


def test_object_source_in_a_search_template_is_refused(tmp_path):
    (tmp_path / "search_templates").mkdir()
    (tmp_path / "search_templates" / "bm25.json.j2").write_text(
        '{"script": {"lang": "mustache", "source": {"query": {}}}}'
    )
    with pytest.raises(ConfigError, match="search template search_templates/bm25.json.j2"):
        render_config(Settings(), 384, project_dir=tmp_path)


def test_templates_take_exact_terms_and_collapse_doc(tmp_path):
    config = render_config(Settings(index_name="docs"), 384, project_dir=tmp_path, ml_model_id="m")
    sources = {name: body["script"]["source"] for name, body in config.search_templates.items()}
    assert set(sources) == {
        "docs-hybrid",
        "docs-hybrid_text",
        "docs-bm25",
        "docs-vector",
        "docs-vector_text",
    }
    collapse = '{{#collapse_doc}}"collapse": {"field": "doc_id"},{{/collapse_doc}}'
    phrase = '{"match_phrase": {"content.exact": "{{.}}"}}'
    boost = '{"constant_score": {"filter": ' + phrase + ', "boost": 1000}}'
    holders = '{"bool": {"should": [{{#exact_terms}}' + phrase + ", {{/exact_terms}}"
    for name, source in sources.items():
        assert source.count(collapse) == 1, name
        hybrid = name.startswith("docs-hybrid")
        # hybrid: the exact sub-query boosts and filters on the terms; with a query vector it
        # orders the holders by a k-NN clause filtered to them too; bm25: boosts only
        assert source.count(boost) == (1 if hybrid or name == "docs-bm25" else 0), name
        assert source.count(holders) == {"docs-hybrid": 2, "docs-hybrid_text": 1}.get(name, 0)
        if hybrid:
            queries = source.split('"queries": [', 1)[1]
            assert queries.count('{"bool": {\n        "must"') == 2  # BM25 and exact


@pytest.mark.parametrize(
    "version, pipelines",
    [
        (None, {"docs-rrf", "docs-minmax", "docs-zscore"}),  # unknown: every file
        ((3, 6), {"docs-rrf", "docs-minmax", "docs-zscore"}),
        ((2, 19), {"docs-rrf", "docs-minmax"}),  # 2.x refuses z_score: no pipeline, no error
    ],
)
def test_a_modes_pipeline_the_cluster_cannot_run_is_left_out(tmp_path, version, pipelines):
    config = render_config(Settings(index_name="docs"), 384, tmp_path, cluster_version=version)
    assert set(config.search_pipelines) == pipelines
