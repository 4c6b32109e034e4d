"""Reading the cluster, without one: what ``read_cluster_state`` makes of the client's answers."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from loader.errors import ConfigError
from loader.index.plan import plan_changes
from loader.index.render import render_config
from loader.index.state import get_or_none, read_cluster_state
from loader.settings import Settings

ALIAS = "kb"
NOT_FOUND = {"status": 404, "error": "not found"}


class FakeClient:
    """Answers the GETs ``read_cluster_state`` makes from a dict of indices and aliases."""

    def __init__(self, indices: dict[str, dict], aliases: dict[str, list[str]]) -> None:
        self._indices = indices
        self._aliases = aliases
        self.indices = SimpleNamespace(
            get_alias=self._get_alias,
            exists=lambda index: index in indices,
            get_settings=self._get_settings,
            get=lambda index, flat_settings: {index: indices[index]},
        )
        self.transport = SimpleNamespace(perform_request=lambda *args, **kwargs: NOT_FOUND)
        self.ingest = SimpleNamespace(get_pipeline=lambda **kwargs: NOT_FOUND)

    def _get_alias(self, name, ignore):
        targets = self._aliases.get(name)
        return {index: {"aliases": {name: {}}} for index in targets} if targets else NOT_FOUND

    def _get_settings(self, index, expand_wildcards, allow_no_indices, ignore):
        prefix = index.removesuffix("*")
        return {name: {} for name in self._indices if name.startswith(prefix)}

    def get_script(self, id, ignore):
        return {"_id": id, "found": False}


@pytest.fixture
def desired(tmp_path):
    return render_config(Settings(index_name=ALIAS), 8, project_dir=tmp_path)


def test_an_empty_cluster_reads_as_nothing(desired):
    state = read_cluster_state(FakeClient({}, {}), Settings(index_name=ALIAS), desired)
    assert state.alias_targets == [] and state.versions == {} and state.index is None
    assert not state.alias_is_index
    assert set(state.search_pipelines) == set(desired.search_pipelines)
    assert all(body is None for body in state.search_pipelines.values())
    assert all(body is None for body in state.search_templates.values())


def test_versions_are_found_and_the_alias_target_is_compared(desired):
    body = {"settings": {"index.number_of_shards": "1"}, "mappings": {"properties": {}}}
    client = FakeClient({"kb-v1": body, "kb-v2": body, "kb-other": body}, {ALIAS: ["kb-v1"]})
    state = read_cluster_state(client, Settings(index_name=ALIAS), desired)
    assert state.alias_targets == ["kb-v1"]
    assert state.versions == {1: "kb-v1", 2: "kb-v2"}
    assert state.index_name == "kb-v1" and state.index == body


def test_without_the_alias_the_newest_version_is_compared(desired):
    body = {"mappings": {"properties": {}}}
    client = FakeClient({"kb-v1": body, "kb-v3": body}, {})
    state = read_cluster_state(client, Settings(index_name=ALIAS), desired)
    assert state.index_name == "kb-v3"
    assert state.index == {"settings": {}, "mappings": {"properties": {}}}


def test_an_index_with_the_alias_name_is_read_as_such(desired):
    client = FakeClient({ALIAS: {"mappings": {}}}, {})
    state = read_cluster_state(client, Settings(index_name=ALIAS), desired)
    assert state.alias_is_index
    with pytest.raises(ConfigError, match="is an index, not an alias"):
        plan_changes(desired, state)


def test_get_or_none_turns_a_miss_into_none():
    assert get_or_none(lambda ignore: NOT_FOUND) is None
    assert get_or_none(lambda ignore: {"found": False}) is None
    assert get_or_none(lambda ignore: {"found": True}) == {"found": True}
