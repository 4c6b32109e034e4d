"""What the cluster holds of one alias's configuration, read for ``plan_changes`` to compare with.

Only the objects the rendered files name are read: the alias and its index versions
``<alias>-v<N>``, the index the files are compared with, and the named pipelines and search
templates. A missing object reads as ``None``, never as an error.

Example::

    state = read_cluster_state(connect(settings), settings, render_config(settings, 384))
    state.alias_targets, state.versions      # (['kb-v2'], {1: 'kb-v1', 2: 'kb-v2'})
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import opensearchpy
from opensearchpy import OpenSearch

from loader.cluster.client import cluster_errors
from loader.index.render import DesiredConfig, version_of
from loader.settings import Settings


@dataclass
class ClusterState:
    """What the cluster holds of one alias's configuration (read by ``read_cluster_state``)."""

    alias_targets: list[str] = field(default_factory=list)  # indices the alias points at
    alias_is_index: bool = False  # a concrete index already uses the alias's name
    versions: dict[int, str] = field(default_factory=dict)  # N -> "<alias>-v<N>"
    index_name: str | None = None  # the index compared with the files
    index: dict[str, Any] | None = None  # {"settings": flat settings, "mappings": ...}
    search_pipelines: dict[str, Any] = field(default_factory=dict)  # name -> body or None
    ingest_pipelines: dict[str, Any] = field(default_factory=dict)
    search_templates: dict[str, Any] = field(default_factory=dict)  # id -> {"script": ...}


def get_or_none(call: Any, *args: Any, **kwargs: Any) -> Any:
    """The answer of a GET, or ``None`` when the object does not exist. ``ignore=404`` keeps the
    client from logging an expected miss as a warning."""
    try:
        answer = call(*args, ignore=(404,), **kwargs)
    except opensearchpy.NotFoundError:
        return None
    if isinstance(answer, Mapping) and (
        answer.get("status") == 404 or answer.get("found") is False
    ):
        return None
    return answer


def read_cluster_state(
    client: OpenSearch, settings: Settings, desired: DesiredConfig
) -> ClusterState:
    """Read what the cluster holds of the objects ``desired`` names.

    Args:
        client: from ``loader.cluster.client.connect``.
        settings: for error messages.
        desired: the rendered configuration; only the objects it names are read.

    Returns:
        The cluster state ``plan_changes`` compares with.
    """
    alias = desired.names.alias
    state = ClusterState()
    with cluster_errors(settings, f"reading index alias {alias}"):
        _read_index(client, alias, state)
    with cluster_errors(settings, f"reading the search pipelines of {alias}"):
        for name in desired.search_pipelines:
            stored = get_or_none(
                client.transport.perform_request, "GET", f"/_search/pipeline/{name}"
            )
            state.search_pipelines[name] = (stored or {}).get(name)
    with cluster_errors(settings, f"reading the ingest pipelines of {alias}"):
        for name in desired.ingest_pipelines:
            stored = get_or_none(client.ingest.get_pipeline, id=name)
            state.ingest_pipelines[name] = (stored or {}).get(name)
    with cluster_errors(settings, f"reading the search templates of {alias}"):
        for name in desired.search_templates:
            state.search_templates[name] = get_or_none(client.get_script, id=name)
    return state


def _read_index(client: OpenSearch, alias: str, state: ClusterState) -> None:
    """Fill the alias's targets, its index versions, and the index the files are compared with."""
    aliases = get_or_none(client.indices.get_alias, name=alias) or {}
    state.alias_targets = sorted(aliases)
    if not aliases:
        state.alias_is_index = bool(client.indices.exists(index=alias))
    found = (
        get_or_none(
            client.indices.get_settings,
            index=f"{alias}-v*",
            expand_wildcards="all",
            allow_no_indices=True,
        )
        or {}
    )
    for index in found:
        version = version_of(alias, index)
        if version is not None:
            state.versions[version] = index
    if state.alias_targets:
        state.index_name = state.alias_targets[0]
    elif state.versions:
        # The alias is missing but versions exist (e.g. an apply that stopped half-way):
        # compare with the newest and point the alias at it if it fits.
        state.index_name = state.versions[max(state.versions)]
    if state.index_name and len(state.alias_targets) <= 1:
        answer = client.indices.get(index=state.index_name, flat_settings=True)
        body = answer[state.index_name]
        state.index = {"settings": body.get("settings", {}), "mappings": body["mappings"]}
