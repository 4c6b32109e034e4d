"""The hazards OpenSearch's hybrid query has on the server versions before their fixes, as two
``loader doctor`` checks (issue #44):

- ``hybrid search type``: ``search_type=dfs_query_then_fetch`` with a hybrid query returns each
  sub-query's raw results, unfused, on an index of more than one shard (the search pipeline
  normalizes after the QUERY phase, and DFS runs a DFS_QUERY phase instead: neural-search issue
  1490; the server refuses the pair from 3.8, neural-search PR 1873). loader never sends it
  (``loader.index.search_params.template_url_params`` refuses it); a saved configuration that
  names it -- a search pipeline, a search template or the index's settings, as rendered from the
  files or as stored on the cluster -- is a warning until the cluster is 3.8.
- ``hybrid sub-query scores``: the scores of each sub-query come out wrong when the hybrid query
  reaches the shard wrapped in another query -- by document-level security, by the filter on
  the parent documents an index with ``nested`` fields adds, or by an aggregation's filter
  (fixed in 3.9, neural-search PR 1950). A warning when a role of the security plugin puts a DLS
  query on the alias or its index, or the mapping has a nested field, until the cluster is 3.9.

The readings are pure (``search_type_mentions``, ``nested_fields``, ``dls_roles``) beside the
one function that reads the cluster (``hybrid_checks``).

Example::

    search_type_mentions({"chunks-rrf": {"request_processors": [
        {"script": {"source": "ctx.search_type = 'dfs_query_then_fetch'"}}]}})   # ['chunks-rrf']
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import opensearchpy

from loader.cluster.client import cluster_errors
from loader.doctor.report import Check
from loader.index.render import DesiredConfig
from loader.index.search_params import REFUSED_SEARCH_TYPES
from loader.index.state import get_or_none
from loader.settings import Settings

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

    from loader.doctor.report import DoctorReport

# The first server versions that no longer have each hazard.
SEARCH_TYPE_FIXED = (3, 8)  # neural-search PR 1873: the pair refused
WRAPPED_SCORES_FIXED = (3, 9)  # neural-search PR 1950
SECURITY_PLUGIN = "opensearch-security"
ROLES_PATH = "/_plugins/_security/api/roles"


def _strings(value: Any, key: str = "") -> Iterator[tuple[str, str]]:
    """Every (key, string) pair of a JSON value, the key being the nearest enclosing one."""
    if isinstance(value, Mapping):
        for name, item in value.items():
            yield from _strings(item, str(name))
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item, key)
    elif isinstance(value, str):
        yield key, value


def search_type_mentions(bodies: Mapping[str, Any]) -> list[str]:
    """The names of ``bodies`` (name -> JSON body) that set a refused search type anywhere: a
    ``search_type`` key, or a string (a template's mustache source, a script) naming it. Pure."""
    refused = tuple(REFUSED_SEARCH_TYPES)
    return sorted(
        name
        for name, body in bodies.items()
        if any(
            any(kind in text for kind in refused) or (key.endswith("search_type") and text)
            for key, text in _strings(body)
        )
    )


def nested_fields(mapping: Mapping[str, Any], prefix: str = "") -> list[str]:
    """The dotted paths of the ``nested`` fields of an index mapping. Pure."""
    found = []
    for name, field in (mapping.get("properties") or {}).items():
        path = f"{prefix}{name}"
        if field.get("type") == "nested":
            found.append(path)
        found.extend(nested_fields(field, f"{path}."))
    return found


def _pattern_matches(pattern: str, names: list[str]) -> bool:
    if pattern.startswith("/") and pattern.endswith("/") and len(pattern) > 1:  # a regex role
        return any(re.fullmatch(pattern[1:-1], name) for name in names)
    return any(fnmatch.fnmatchcase(name, pattern) for name in names)


def dls_roles(roles: Mapping[str, Any], names: list[str]) -> list[str]:
    """The roles of a ``GET _plugins/_security/api/roles`` answer that put a DLS query on any of
    ``names`` (the alias and its index) through an index pattern. Pure."""
    return sorted(
        role
        for role, body in roles.items()
        if isinstance(body, Mapping)
        for permission in body.get("index_permissions") or []
        if str(permission.get("dls") or "").strip()
        and any(_pattern_matches(p, names) for p in permission.get("index_patterns") or [])
    )


def _saved_bodies(
    client: OpenSearch, settings: Settings, index: str | None, desired: DesiredConfig
) -> dict[str, Any]:
    """The configuration a search goes through, rendered from the files and stored on the
    cluster: name -> body."""
    bodies: dict[str, Any] = {
        f"{name} (files)": body
        for name, body in (*desired.search_pipelines.items(), *desired.search_templates.items())
    }
    bodies["index settings (files)"] = desired.index.get("settings") or {}
    with cluster_errors(settings, "reading the stored search pipelines and templates"):
        for name in desired.search_pipelines:
            path = f"/_search/pipeline/{name}"
            stored = get_or_none(client.transport.perform_request, "GET", path)
            bodies[f"{name} (stored)"] = stored or {}
        for name in desired.search_templates:
            bodies[f"{name} (stored)"] = get_or_none(client.get_script, id=name) or {}
        if index is not None:
            answer = client.indices.get_settings(index=index, flat_settings=True)
            bodies[f"{index} settings (stored)"] = (answer.get(index) or {}).get("settings") or {}
    return bodies


def _search_type_check(bodies: Mapping[str, Any], version: tuple[int, int] | None) -> Check:
    mentions = search_type_mentions(bodies)
    kinds = ", ".join(REFUSED_SEARCH_TYPES)
    if not mentions:
        return Check("hybrid search type", "ok", f"no saved configuration sets {kinds}")
    if version is not None and version >= SEARCH_TYPE_FIXED:
        return Check(
            "hybrid search type",
            "ok",
            f"{', '.join(mentions)} set {kinds}, which "
            f"OpenSearch {version[0]}.{version[1]} refuses with a hybrid query",
        )
    return Check(
        "hybrid search type",
        "warn",
        f"{', '.join(mentions)} set {kinds}: a hybrid query sent with it on more than one shard "
        "returns each sub-query's raw results, unfused (OpenSearch before 3.8)",
        "take search_type out of them, then `loader apply`",
    )


def _roles(client: OpenSearch, settings: Settings) -> Mapping[str, Any] | None:
    """The security plugin's roles, ``None`` when this user may not read them (only an admin
    may; the REST API can also be turned off: 403 or 404)."""
    with cluster_errors(settings, "reading the security plugin's roles"):
        try:
            return client.transport.perform_request("GET", ROLES_PATH)
        except (opensearchpy.AuthorizationException, opensearchpy.NotFoundError):
            return None


def wrapped_scores_check(
    nested: list[str],
    roles: Mapping[str, Any] | None,
    names: list[str],
    security: bool,
    version: tuple[int, int] | None,
) -> Check:
    """The ``hybrid sub-query scores`` line: ``roles`` is the roles answer (``None``: not
    readable), ``security`` whether the plugin is installed. Pure."""
    name = "hybrid sub-query scores"
    if version is not None and version >= WRAPPED_SCORES_FIXED:
        return Check(name, "ok", f"OpenSearch {version[0]}.{version[1]} scores them when wrapped")
    causes = [f"the mapping has nested fields ({', '.join(nested)})"] if nested else []
    if security and roles is None:
        causes.append("the security plugin's roles cannot be read to rule out DLS on the alias")
    dls = dls_roles(roles or {}, names)
    if dls:
        causes.append(f"roles {', '.join(dls)} put a DLS query on {names[0]}")
    if not causes:
        return Check(name, "ok", "no DLS role on the alias and no nested field")
    return Check(
        name,
        "warn",
        "; ".join(causes) + ": each sub-query's scores come out wrong when the hybrid query is "
        "wrapped (OpenSearch before 3.9), so the fusion ranks on wrong scores",
        "upgrade to OpenSearch 3.9, or search without DLS roles and nested fields",
    )


def hybrid_checks(
    client: OpenSearch,
    settings: Settings,
    index: str | None,
    version: tuple[int, int] | None,
    desired: DesiredConfig,
    mapping: Mapping[str, Any],
    report: DoctorReport,
) -> None:
    """Both checks, for the alias of ``settings`` and its ``index`` (``None``: no index yet)."""
    bodies = _saved_bodies(client, settings, index, desired)
    report.checks.append(_search_type_check(bodies, version))
    with cluster_errors(settings, "listing the plugins"):
        rows = client.cat.plugins(format="json")
    security = any(row.get("component") == SECURITY_PLUGIN for row in rows)
    roles = _roles(client, settings) if security else {}
    names = [settings.index_name, *([index] if index else [])]
    nested = nested_fields(mapping)
    report.checks.append(wrapped_scores_check(nested, roles, names, security, version))
