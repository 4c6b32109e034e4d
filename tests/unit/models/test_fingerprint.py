"""The index records which model made its vectors; another model or backend is a new version."""

from __future__ import annotations

from loader.index.diff import diff_index, flatten_settings
from loader.index.render import render_config
from loader.models.registry import EMBEDDING_META_KEY, index_fingerprint
from loader.settings import Settings

MINILM = Settings(embedding_model="all-MiniLM-L6-v2", embedding_backend="onnx")


def _as_cluster(index: dict) -> dict:
    """A rendered index body as the cluster answers it (flat settings)."""
    return {"settings": flatten_settings(index["settings"]), "mappings": index["mappings"]}


def test_the_mapping_records_the_model_fingerprint():
    meta = render_config(MINILM, 384).index["mappings"]["_meta"]
    assert meta[EMBEDDING_META_KEY] == {
        "model": "all-MiniLM-L6-v2",
        "backend": "onnx",
        "dimension": 384,
        "passage_prefix": "",
    }
    # Aliases of a known model fingerprint alike.
    alias = MINILM.replace(embedding_model="sentence-transformers/all-MiniLM-L6-v2")
    assert index_fingerprint(alias, 384) == index_fingerprint(MINILM, 384)


def test_same_model_is_no_change():
    index = render_config(MINILM, 384).index
    diff = diff_index(index, _as_cluster(index))
    assert not diff.incompatible and not diff.in_place and diff.model_change is None


def test_another_model_or_backend_of_the_same_dimension_is_a_new_version():
    current = _as_cluster(render_config(MINILM, 384).index)
    for other in (
        MINILM.replace(embedding_model="bge-small-en-v1.5"),
        MINILM.replace(embedding_backend="onnx-int8"),
        MINILM.replace(passage_prefix="passage: "),
    ):
        diff = diff_index(render_config(other, 384).index, current)
        assert diff.model_change is not None, other
        assert diff.model_change[0]["model"] == "all-MiniLM-L6-v2"
        assert any(reason.startswith("embedding model: ") for reason in diff.incompatible)
    bge = diff_index(
        render_config(MINILM.replace(embedding_model="bge-small-en-v1.5"), 384).index, current
    )
    assert bge.incompatible == [
        "embedding model: all-MiniLM-L6-v2 (onnx, 384 dims) -> bge-small-en-v1.5 (onnx, 384 dims)"
    ]


def test_a_query_instruction_is_not_an_index_change():
    current = _as_cluster(render_config(MINILM, 384).index)
    diff = diff_index(render_config(MINILM.replace(query_prefix="query: "), 384).index, current)
    assert not diff.incompatible


def test_an_index_without_a_fingerprint_records_it_in_place():
    index = render_config(MINILM, 384).index
    legacy = _as_cluster(index)
    scheme = index["mappings"]["_meta"]["doc_id_scheme"]
    legacy["mappings"] = {**legacy["mappings"], "_meta": {"doc_id_scheme": scheme}}
    diff = diff_index(index, legacy)
    assert not diff.incompatible
    assert diff.mapping_params["_meta"][EMBEDDING_META_KEY] == index_fingerprint(MINILM, 384)


def test_an_int8_index_of_another_quantization_recipe_is_a_new_version():
    # The full-range int8 copy gave vectors that depend on the CPU (no VNNI: saturated sums);
    # an index pushed with it must not take vectors of the 7-bit recipe, nor the other way.
    int8 = MINILM.replace(embedding_backend="onnx-int8")
    fingerprint = index_fingerprint(int8, 384)
    assert fingerprint["int8_recipe"] == "dynamic-s8-per-channel-reduce-range"
    assert "int8_recipe" not in index_fingerprint(MINILM, 384)  # fp32 vectors have no recipe
    before_recipes = _as_cluster(render_config(int8, 384).index)
    meta = before_recipes["mappings"]["_meta"]
    meta[EMBEDDING_META_KEY] = {
        k: v for k, v in meta[EMBEDDING_META_KEY].items() if k != "int8_recipe"
    }
    diff = diff_index(render_config(int8, 384).index, before_recipes)
    assert diff.incompatible == [
        "embedding model: all-MiniLM-L6-v2 (onnx-int8, 384 dims) -> all-MiniLM-L6-v2 "
        "(onnx-int8 dynamic-s8-per-channel-reduce-range, 384 dims)"
    ]
    same = diff_index(render_config(int8, 384).index, _as_cluster(render_config(int8, 384).index))
    assert not same.incompatible
