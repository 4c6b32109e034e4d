"""What a sentence-transformers folder says about itself, in either layout its versions write,
and the instructions it names."""

from __future__ import annotations

import json

import pytest

from loader.errors import ModelError
from loader.models.registry import effective_prefixes, model_spec, spec_from_folder
from loader.settings import Settings


def _write(folder, files):
    for name, value in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value), encoding="utf-8")


NORMALIZE = {"idx": 2, "name": "2", "path": "2_Normalize"}


def test_a_folder_saved_before_sentence_transformers_6(tmp_path):
    _write(
        tmp_path,
        {
            "1_Pooling/config.json": {
                "word_embedding_dimension": 384,
                "pooling_mode_cls_token": True,
            },
            "modules.json": [NORMALIZE | {"type": "sentence_transformers.models.Normalize"}],
            "sentence_bert_config.json": {"max_seq_length": 256},
        },
    )
    spec = spec_from_folder("old", tmp_path)
    assert (spec.pooling, spec.normalize, spec.max_tokens, spec.dimension) == (
        "cls",
        True,
        256,
        384,
    )


def test_a_folder_saved_by_sentence_transformers_6(tmp_path):
    _write(
        tmp_path,
        {
            "1_Pooling/config.json": {"embedding_dimension": 768, "pooling_mode": "mean"},
            "modules.json": [
                NORMALIZE | {"type": "sentence_transformers.base.modules.normalize.Normalize"}
            ],
            "sentence_bert_config.json": {"transformer_task": "feature-extraction"},
            "tokenizer_config.json": {"model_max_length": 384},
        },
    )
    spec = spec_from_folder("new", tmp_path)
    assert (spec.pooling, spec.normalize, spec.max_tokens, spec.dimension) == (
        "mean",
        True,
        384,
        768,
    )
    # transformers' "no limit" sentinel is not a limit the chunker can use.
    _write(tmp_path, {"tokenizer_config.json": {"model_max_length": int(1e30)}})
    assert spec_from_folder("new", tmp_path).max_tokens == 512


def test_max_pooling_is_left_to_sentence_transformers(tmp_path):
    _write(tmp_path, {"1_Pooling/config.json": {"embedding_dimension": 384, "pooling_mode": "max"}})
    assert spec_from_folder("max", tmp_path) is None
    assert spec_from_folder("none", tmp_path / "missing") is None


def test_a_folders_prompts_are_its_instructions(tmp_path):
    """``loader fine-tune`` and ``adapt`` save the instructions they trained with as the
    folder's prompts: searching and pushing with the folder use them, and the index records the
    passage one."""
    _write(
        tmp_path,
        {
            "1_Pooling/config.json": {"embedding_dimension": 384, "pooling_mode": "cls"},
            "config_sentence_transformers.json": {
                "prompts": {"query": "Represent this: ", "document": "passage: "},
                "default_prompt_name": None,
            },
        },
    )
    spec = model_spec(str(tmp_path))
    assert (spec.query_prefix, spec.passage_prefix) == ("Represent this: ", "passage: ")
    settings = Settings(embedding_model=str(tmp_path))
    assert effective_prefixes(settings) == ("Represent this: ", "passage: ")
    assert effective_prefixes(settings.replace(query_instruction=False)) == ("", "passage: ")
    assert effective_prefixes(settings.replace(query_prefix="q: ")) == ("q: ", "passage: ")

    _write(tmp_path, {"config_sentence_transformers.json": {"prompts": {}}})
    spec = spec_from_folder("plain", tmp_path)
    assert (spec.query_prefix, spec.passage_prefix) == ("", "")
    assert model_spec(str(tmp_path / "missing")) is None


def test_the_passage_prompt_goes_by_any_of_sentence_transformers_names(tmp_path):
    """``document``, else ``passage``, else ``corpus``, as sentence-transformers' encode_document
    reads them; prompts that are not a mapping are none; a damaged config is named."""
    _write(tmp_path, {"1_Pooling/config.json": {"embedding_dimension": 8, "pooling_mode": "mean"}})
    for prompts, expected in [
        ({"query": "query: ", "passage": "passage: "}, ("query: ", "passage: ")),
        ({"corpus": "c: ", "passage": ""}, ("", "c: ")),
        (["query: "], ("", "")),
    ]:
        _write(tmp_path, {"config_sentence_transformers.json": {"prompts": prompts}})
        spec = spec_from_folder("folder", tmp_path)
        assert (spec.query_prefix, spec.passage_prefix) == expected, prompts
    (tmp_path / "config_sentence_transformers.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ModelError, match="config_sentence_transformers.json: not a JSON file"):
        spec_from_folder("folder", tmp_path)
