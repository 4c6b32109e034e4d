"""``loader apply``: put the rendered config files on the cluster, idempotently, plan first.

The plan is a sorted list of changes between the files and the cluster (create / update / delete /
none), comparing only the keys the files set, so defaults the server fills in never show up as a
change. Applying it:

- the chunk index lives in versions ``<alias>-v<N>`` behind the alias applications search;
- a compatible change (a new field, ``number_of_replicas``, ``ef_search``) is applied in place;
- an incompatible one (vector dimension, analyzer, field type, shards) creates ``<alias>-v<N+1>``,
  copies the documents with ``_reindex`` (not when the dimension changed: old vectors are useless,
  re-push instead) and moves the alias with one atomic ``_aliases`` call, so searches keep
  answering; the old version is deleted only with ``delete_old``;
- pipelines and search templates are put only when their stored body differs.

Example::

    plan = apply_config(settings, dry_run=True)
    for line in plan.lines():
        ...
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import opensearchpy
from opensearchpy import OpenSearch

from loader.cluster.client import cluster_errors, connect, safe_url
from loader.documents import DOC_ID_SCHEME
from loader.errors import ClusterError, ConfigError, IncompatibleIndexError
from loader.index.render import DesiredConfig, render_config
from loader.settings import Settings

log = logging.getLogger(__name__)

ACTION_SYMBOLS = {"create": "+", "update": "~", "delete": "-", "none": "="}

# Order of application: pipelines before the index that names them as default_pipeline, the new
# index and its documents before the alias moves to it, an old index deleted last.
# The ml model (server_side_embedding) goes first: the text-only templates name its id.
STEP_ML_MODEL = -1
STEP_INGEST_PIPELINE = 0
STEP_INDEX = 1
STEP_MAPPING = 2
STEP_INDEX_SETTINGS = 3
STEP_REINDEX = 4
STEP_ALIAS = 5
STEP_SEARCH_PIPELINE = 6
STEP_SEARCH_TEMPLATE = 7
STEP_OLD_INDEX = 8

# Index settings OpenSearch lets us change on an open index; any other difference needs a new
# index version.
DYNAMIC_INDEX_SETTINGS = frozenset(
    {
        "index.number_of_replicas",
        "index.auto_expand_replicas",
        "index.refresh_interval",
        "index.max_result_window",
        "index.default_pipeline",
        "index.final_pipeline",
        "index.search.default_pipeline",
        "index.knn.algo_param.ef_search",
    }
)
# Mapping parameters put_mapping accepts on an existing index.
DYNAMIC_MAPPING_PARAMS = frozenset({"dynamic"})

REINDEX_POLL_SECONDS = 1.0


@dataclass(frozen=True, order=True)
class Change:
    """One step of a plan. Sorted by step, then kind and name."""

    step: int
    kind: str  # "index", "mapping", "index settings", "reindex", "alias", "search pipeline", ...
    name: str
    action: str = field(compare=False)  # create | update | delete | none
    detail: str = field(default="", compare=False)
    payload: Any = field(default=None, compare=False, repr=False)

    def line(self) -> str:
        """One line for humans, e.g. ``+ create index chunks-v1``."""
        symbol = ACTION_SYMBOLS[self.action]
        if self.action == "none":
            text = f"{symbol} {self.kind} {self.name} (no change)"
        else:
            text = f"{symbol} {self.action} {self.kind} {self.name}"
        return f"{text} {self.detail}" if self.detail else text

    def to_dict(self) -> dict[str, str]:
        return {"action": self.action, "kind": self.kind, "name": self.name, "detail": self.detail}


@dataclass
class Plan:
    """The changes ``loader apply`` makes (or made), in the order it makes them."""

    alias: str
    changes: list[Change]
    notes: list[str] = field(default_factory=list)
    applied: bool = False

    @property
    def pending(self) -> list[Change]:
        return [change for change in self.changes if change.action != "none"]

    @property
    def has_changes(self) -> bool:
        return bool(self.pending)

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(ACTION_SYMBOLS, 0)
        for change in self.changes:
            counts[change.action] += 1
        return counts

    def summary(self) -> str:
        """``no changes`` or e.g. ``2 to create, 1 to update, 0 to delete, 3 unchanged``."""
        if not self.has_changes:
            return "no changes"
        counts = self.counts()
        if self.applied:
            return (
                f"{counts['create']} created, {counts['update']} updated, "
                f"{counts['delete']} deleted, {counts['none']} unchanged"
            )
        return (
            f"{counts['create']} to create, {counts['update']} to update, "
            f"{counts['delete']} to delete, {counts['none']} unchanged"
        )

    def lines(self) -> list[str]:
        return [change.line() for change in self.changes]

    def to_dict(self) -> dict[str, Any]:
        return {
            "alias": self.alias,
            "applied": self.applied,
            "changes": [change.to_dict() for change in self.changes],
            "notes": list(self.notes),
            "summary": self.summary(),
        }


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


@dataclass
class IndexDiff:
    """How an existing index differs from the rendered index body."""

    new_fields: dict[str, Any] = field(default_factory=dict)  # properties to add in place
    mapping_params: dict[str, Any] = field(default_factory=dict)  # e.g. {"dynamic": "strict"}
    settings_updates: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # key: (old, new)
    incompatible: list[str] = field(default_factory=list)  # why a new version is needed
    dimension_change: tuple[int, int] | None = None  # (cluster, files)
    id_scheme_change: tuple[str | None, str] | None = None  # (cluster, files): doc_id_scheme

    @property
    def in_place(self) -> bool:
        return bool(self.new_fields or self.mapping_params or self.settings_updates)


# --- pure diffing ------------------------------------------------------------------------------


def normalize(value: Any) -> Any:
    """Comparable form of a JSON value: settings come back as strings ("1", "true")."""
    if isinstance(value, Mapping):
        return {str(key): normalize(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [normalize(item) for item in value]
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower()
    return value


def first_difference(desired: Any, current: Any, path: str = "") -> tuple[str, Any, Any] | None:
    """The first place where ``desired`` is not contained in ``current``, ignoring keys only
    ``current`` has (server defaults). Returns ``(path, desired, current)`` or ``None``."""
    if isinstance(desired, Mapping):
        if not isinstance(current, Mapping):
            return path, desired, current
        for key, want in desired.items():
            sub = f"{path}.{key}" if path else str(key)
            if key not in current:
                return sub, want, None
            found = first_difference(want, current[key], sub)
            if found:
                return found
        return None
    if isinstance(desired, list | tuple):
        if not isinstance(current, list | tuple) or len(desired) != len(current):
            return path, desired, current
        for position, (want, have) in enumerate(zip(desired, current, strict=True)):
            found = first_difference(want, have, f"{path}[{position}]")
            if found:
                return found
        return None
    if normalize(desired) != normalize(current):
        return path, desired, current
    return None


def flatten_settings(settings: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"index": {"knn": true}}`` -> ``{"index.knn": true}``; every key gets an ``index.``
    prefix, as in the server's ``flat_settings`` answer."""
    flat: dict[str, Any] = {}
    for key, value in settings.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten_settings(value, f"{name}."))
        else:
            flat[name] = value
    if not prefix:
        flat = {(k if k.startswith("index.") else f"index.{k}"): v for k, v in flat.items()}
    return flat


def _vector_dimensions(properties: Mapping[str, Any]) -> dict[str, int]:
    return {
        name: int(spec["dimension"])
        for name, spec in properties.items()
        if isinstance(spec, Mapping) and spec.get("type") == "knn_vector" and "dimension" in spec
    }


def _diff_properties(
    desired: Mapping[str, Any], current: Mapping[str, Any], diff: IndexDiff, path: str = ""
) -> None:
    for name, spec in desired.items():
        full = f"{path}{name}"
        have = current.get(name)
        if have is None:
            if path:
                diff.incompatible.append(f"new sub-field {full} (objects are rebuilt in a copy)")
            else:
                diff.new_fields[name] = spec
            continue
        found = first_difference(spec, have)
        if found is None:
            continue
        where, want, got = found
        if spec.get("type") == "knn_vector" and where == "dimension":
            diff.dimension_change = (int(got), int(want))
            diff.incompatible.append(f"vector field {full}: dimension {got} -> {want}")
        else:
            diff.incompatible.append(f"field {full}: {where} {got!r} -> {want!r}")


def diff_index(desired: Mapping[str, Any], current: Mapping[str, Any]) -> IndexDiff:
    """Compare the rendered index body with an existing index.

    Args:
        desired: ``{"settings": ..., "mappings": ...}`` from ``mappings/chunks.json.j2``.
        current: the cluster's ``{"settings": <flat settings>, "mappings": ...}``.

    Returns:
        What can change in place and what needs a new index version.
    """
    diff = IndexDiff()
    current_settings = current.get("settings") or {}
    for key, want in flatten_settings(desired.get("settings") or {}).items():
        have = current_settings.get(key)
        if normalize(want) == normalize(have):
            continue
        if key in DYNAMIC_INDEX_SETTINGS:
            diff.settings_updates[key] = (have, want)
        else:
            diff.incompatible.append(f"setting {key}: {have!r} -> {want!r}")

    desired_mappings = desired.get("mappings") or {}
    current_mappings = current.get("mappings") or {}
    for key, want in desired_mappings.items():
        if key == "properties":
            continue
        if key == "_meta":
            _diff_meta(want, current_mappings.get("_meta") or {}, diff)
            continue
        if first_difference(want, current_mappings.get(key)) is None:
            continue
        if key in DYNAMIC_MAPPING_PARAMS:
            diff.mapping_params[key] = want
        else:
            diff.incompatible.append(f"mapping {key}: {current_mappings.get(key)!r} -> {want!r}")
    _diff_properties(
        desired_mappings.get("properties") or {}, current_mappings.get("properties") or {}, diff
    )
    return diff


def _diff_meta(desired: Mapping[str, Any], current: Mapping[str, Any], diff: IndexDiff) -> None:
    """``_meta.doc_id_scheme`` names how document ids are made: another scheme needs a new,
    empty index version (copied documents would keep ids of the old scheme)."""
    want = desired.get("doc_id_scheme")
    have = current.get("doc_id_scheme")
    if want != have:
        diff.id_scheme_change = (have, want)
        diff.incompatible.append(f"document id scheme: {have or 'source path only'} -> {want}")
    if any(current.get(key) != value for key, value in desired.items() if key != "doc_id_scheme"):
        diff.mapping_params["_meta"] = {**current, **desired}


def _diff_bodies(
    kind: str, step: int, desired: Mapping[str, Any], current: Mapping[str, Any]
) -> list[Change]:
    changes = []
    for name, body in sorted(desired.items()):
        stored = current.get(name)
        if stored is None:
            changes.append(Change(step, kind, name, "create", payload=body))
        elif normalize(body) == normalize(stored):
            changes.append(Change(step, kind, name, "none"))
        else:
            changes.append(Change(step, kind, name, "update", payload=body))
    return changes


def _template_body(stored: Any) -> Any:
    """The comparable part of a ``GET _scripts/<id>`` answer."""
    if not isinstance(stored, Mapping) or not stored.get("found", True):
        return None
    script = stored.get("script") or {}
    return {"script": {"lang": script.get("lang"), "source": script.get("source")}}


def plan_changes(desired: DesiredConfig, state: ClusterState, delete_old: bool = False) -> Plan:
    """The sorted changes that bring the cluster to the rendered configuration. Pure.

    Args:
        desired: the rendered files (``render_config``).
        state: what the cluster holds (``read_cluster_state``).
        delete_old: plan the deletion of index versions older than the one the alias ends on.

    Returns:
        The plan; ``Plan.notes`` explains what is kept and what the user must do next.
    """
    names = desired.names
    alias = names.alias
    if state.alias_is_index:
        raise ConfigError(
            f"{alias!r} is an index, not an alias: loader keeps index versions behind an alias. "
            f"Choose another index_name, or reindex {alias!r} into {names.version_index(1)!r}, "
            f"delete it and run `loader apply` again"
        )
    if len(state.alias_targets) > 1:
        raise ConfigError(
            f"alias {alias!r} points at several indices ({', '.join(sorted(state.alias_targets))});"
            " point it at one with the _aliases API, then run `loader apply` again"
        )
    changes: list[Change] = []
    notes: list[str] = []
    next_index = names.version_index(max(state.versions, default=0) + 1)
    current_target = state.alias_targets[0] if state.alias_targets else None

    if state.index_name is None or state.index is None:
        final_target = next_index
        changes.append(Change(STEP_INDEX, "index", next_index, "create", payload=desired.index))
    else:
        diff = diff_index(desired.index, state.index)
        if diff.incompatible:
            final_target = next_index
            reasons = "; ".join(diff.incompatible)
            changes.append(
                Change(
                    STEP_INDEX,
                    "index",
                    next_index,
                    "create",
                    detail=f"(replaces {state.index_name}: {reasons})",
                    payload=desired.index,
                )
            )
            if diff.dimension_change:
                old, new = diff.dimension_change
                notes.append(
                    f"the vector dimension changed ({old} -> {new}): the documents of "
                    f"{state.index_name} are not copied, their vectors are useless. {next_index} "
                    f"starts empty; run `loader push` to embed the documents again"
                )
            elif diff.id_scheme_change:
                notes.append(
                    f"{state.index_name} was built with document ids that ignore the tenant: its "
                    f"documents are not copied (their ids would collide across tenants). "
                    f"{next_index} starts empty; run `loader push FOLDER --tenant T` once per "
                    f"tenant (vectors are embedded again; {state.index_name} is kept until "
                    "`loader apply --delete-old`)"
                )
            else:
                changes.append(
                    Change(
                        STEP_REINDEX,
                        "reindex",
                        f"{state.index_name} -> {next_index}",
                        "create",
                        payload={"source": state.index_name, "dest": next_index},
                    )
                )
                notes.append(
                    f"documents written to {state.index_name} while the reindex runs are not "
                    f"copied: pause `loader push` during apply"
                )
        else:
            final_target = state.index_name
            if diff.new_fields or diff.mapping_params:
                added = ", ".join(sorted(diff.new_fields))
                detail = f"(add fields: {added})" if added else ""
                if diff.mapping_params:
                    params = ", ".join(f"{k}: {v}" for k, v in sorted(diff.mapping_params.items()))
                    detail = f"{detail} ({params})".strip()
                payload = {**diff.mapping_params}
                if diff.new_fields:
                    payload["properties"] = diff.new_fields
                changes.append(
                    Change(STEP_MAPPING, "mapping", state.index_name, "update", detail, payload)
                )
            if diff.settings_updates:
                detail = ", ".join(
                    f"{key.removeprefix('index.')}: {old} -> {new}"
                    for key, (old, new) in sorted(diff.settings_updates.items())
                )
                payload = {key: new for key, (_old, new) in diff.settings_updates.items()}
                changes.append(
                    Change(
                        STEP_INDEX_SETTINGS,
                        "index settings",
                        state.index_name,
                        "update",
                        f"({detail})",
                        payload,
                    )
                )
            if not diff.in_place:
                changes.append(Change(STEP_INDEX, "index", state.index_name, "none"))

    alias_line = f"{alias} -> {final_target}"
    if current_target == final_target:
        changes.append(Change(STEP_ALIAS, "alias", alias_line, "none"))
    elif current_target is None:
        changes.append(
            Change(STEP_ALIAS, "alias", alias_line, "create", payload={"add": final_target})
        )
    else:
        changes.append(
            Change(
                STEP_ALIAS,
                "alias",
                alias_line,
                "update",
                detail=f"(was {current_target}; one atomic _aliases call)",
                payload={"remove": current_target, "add": final_target},
            )
        )

    # Older versions: deleted only when asked, else reported.
    final_version = _version_of(alias, final_target)
    for version, index in sorted(state.versions.items()):
        if index == final_target:
            continue
        if delete_old and final_version is not None and version < final_version:
            changes.append(Change(STEP_OLD_INDEX, "index", index, "delete", "(old version)"))
        else:
            notes.append(f"kept {index}; `loader apply --delete-old` deletes older versions")

    changes += _diff_bodies(
        "ingest pipeline", STEP_INGEST_PIPELINE, desired.ingest_pipelines, state.ingest_pipelines
    )
    changes += _diff_bodies(
        "search pipeline", STEP_SEARCH_PIPELINE, desired.search_pipelines, state.search_pipelines
    )
    changes += _diff_bodies(
        "search template",
        STEP_SEARCH_TEMPLATE,
        desired.search_templates,
        {name: _template_body(body) for name, body in state.search_templates.items()},
    )
    return Plan(alias=alias, changes=sorted(changes), notes=notes)


def _version_of(alias: str, index: str | None) -> int | None:
    match = re.fullmatch(rf"{re.escape(alias)}-v(\d+)", index or "")
    return int(match.group(1)) if match else None


# --- reading the cluster -----------------------------------------------------------------------


def _get_or_none(call: Any, *args: Any, **kwargs: Any) -> Any:
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
        aliases = _get_or_none(client.indices.get_alias, name=alias) or {}
        state.alias_targets = sorted(aliases)
        if not aliases:
            state.alias_is_index = bool(client.indices.exists(index=alias))
        found = (
            _get_or_none(
                client.indices.get_settings,
                index=f"{alias}-v*",
                expand_wildcards="all",
                allow_no_indices=True,
            )
            or {}
        )
        for index in found:
            version = _version_of(alias, index)
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

    with cluster_errors(settings, f"reading the search pipelines of {alias}"):
        for name in desired.search_pipelines:
            stored = _get_or_none(
                client.transport.perform_request, "GET", f"/_search/pipeline/{name}"
            )
            state.search_pipelines[name] = (stored or {}).get(name)
    with cluster_errors(settings, f"reading the ingest pipelines of {alias}"):
        for name in desired.ingest_pipelines:
            stored = _get_or_none(client.ingest.get_pipeline, id=name)
            state.ingest_pipelines[name] = (stored or {}).get(name)
    with cluster_errors(settings, f"reading the search templates of {alias}"):
        for name in desired.search_templates:
            state.search_templates[name] = _get_or_none(client.get_script, id=name)
    return state


# --- applying ----------------------------------------------------------------------------------


def model_dimension(settings: Settings) -> int:
    """The vector dimension of the configured embedding model (loads the model once)."""
    from loader.models.embedding import embedder_for

    return embedder_for(settings).dimension


def plan_apply(
    settings: Settings,
    *,
    dimension: int | None = None,
    delete_old: bool = False,
    project_dir: str | Path | None = None,
    client: OpenSearch | None = None,
) -> Plan:
    """Render the files and compare them with the cluster; changes nothing.

    Args:
        settings: resolved settings; ``index_name`` is the alias.
        dimension: the vector dimension; ``None`` reads it from ``settings.embedding_model``.
        delete_old: plan deleting index versions older than the alias's target.
        project_dir: folder with the project's config files (default: see ``render_config``).
        client: an OpenSearch client (default: ``connect(settings)``).

    Returns:
        The plan.
    """
    if dimension is None:
        dimension = model_dimension(settings)
    client = client or connect(settings)
    model_change = None
    ml_model_id = None
    if settings.server_side_embedding:
        model_change = _ml_model_change(client, settings)
        ml_model_id = model_change.detail_id or PENDING_ML_MODEL_ID
    desired = render_config(settings, dimension, project_dir, ml_model_id=ml_model_id)
    state = read_cluster_state(client, settings, desired)
    plan = plan_changes(desired, state, delete_old=delete_old)
    if model_change is not None:
        plan.changes = sorted([*plan.changes, model_change.change])
    return plan


# The text-only templates are planned with this in place of the id of a model not yet registered;
# execute_plan puts the real id in once the "ml model" change has run.
PENDING_ML_MODEL_ID = "ML-MODEL-ID-ASSIGNED-ON-APPLY"


@dataclass(frozen=True)
class _ModelChange:
    change: Change
    detail_id: str | None  # the registered model's id, if any


def _ml_model_change(client: OpenSearch, settings: Settings) -> _ModelChange:
    """The plan step for the index's embedding model in ml-commons (see ``loader.index.ml_model``)."""
    from loader.index import ml_model as ml

    package = ml.export_model(settings)
    status = ml.find_model(client, settings, package)
    if status.model_id is None:
        action, detail = "create", f"(register and deploy, sha256 {package.content_hash[:12]})"
    elif not status.deployed:
        action, detail = "update", f"(deploy {status.model_id}, now {status.state})"
    else:
        action, detail = "none", ""
    name = f"{package.name} ({status.model_id})" if status.model_id else package.name
    change = Change(STEP_ML_MODEL, "ml model", name, action, detail, payload=package)
    return _ModelChange(change, status.model_id)


def apply_config(
    settings: Settings,
    *,
    dimension: int | None = None,
    dry_run: bool = False,
    delete_old: bool = False,
    project_dir: str | Path | None = None,
    client: OpenSearch | None = None,
) -> Plan:
    """Plan, then (unless ``dry_run``) make the changes. Arguments as for ``plan_apply``.

    Returns:
        The plan, with ``applied`` set when its changes were made.
    """
    client = client or connect(settings)
    plan = plan_apply(
        settings,
        dimension=dimension,
        delete_old=delete_old,
        project_dir=project_dir,
        client=client,
    )
    for line in plan.lines():
        log.info("plan: %s", line)
    if dry_run or not plan.has_changes:
        return plan
    execute_plan(client, settings, plan)
    plan.applied = True
    return plan


def execute_plan(client: OpenSearch, settings: Settings, plan: Plan) -> None:
    """Make the plan's changes in order; stops at the first failure (the alias only moves after
    the new index is complete)."""
    ml_model_id = None
    for change in plan.pending:
        if change.kind == "ml model":
            from loader.index import ml_model as ml

            ml_model_id = ml.ensure_model(client, settings, change.payload).model_id
            log.info("done: %s -> %s", change.line(), ml_model_id)
            continue
        if ml_model_id and change.kind == "search template":
            change = _with_model_id(change, ml_model_id)
        with cluster_errors(settings, f"{change.action} {change.kind} {change.name}"):
            _execute(client, settings, plan.alias, change)
        log.info("done: %s", change.line())


def _with_model_id(change: Change, model_id: str) -> Change:
    """The template change with the just-registered model's id in place of the placeholder."""
    script = dict(change.payload["script"])
    script["source"] = script["source"].replace(PENDING_ML_MODEL_ID, model_id)
    return dataclasses.replace(change, payload={**change.payload, "script": script})


def _execute(client: OpenSearch, settings: Settings, alias: str, change: Change) -> None:
    kind, name, payload = change.kind, change.name, change.payload
    if kind == "ingest pipeline":
        client.ingest.put_pipeline(id=name, body=payload)
    elif kind == "search pipeline":
        client.transport.perform_request("PUT", f"/_search/pipeline/{name}", body=payload)
    elif kind == "search template":
        client.put_script(id=name, body=payload)
    elif kind == "index" and change.action == "create":
        client.indices.create(index=name, body=payload)
    elif kind == "index" and change.action == "delete":
        client.indices.delete(index=name)
    elif kind == "mapping":
        client.indices.put_mapping(index=name, body=payload)
    elif kind == "index settings":
        client.indices.put_settings(index=name, body=payload)
    elif kind == "reindex":
        _reindex(client, settings, payload["source"], payload["dest"])
    elif kind == "alias":
        actions = []
        if payload.get("remove"):
            actions.append({"remove": {"index": payload["remove"], "alias": alias}})
        actions.append({"add": {"index": payload["add"], "alias": alias}})
        # One call: OpenSearch applies all actions atomically, so searches never see no alias.
        client.indices.update_aliases(body={"actions": actions})
    else:  # pragma: no cover - plan_changes makes only the kinds above
        raise ConfigError(f"unknown change {change.line()}")


def _reindex(client: OpenSearch, settings: Settings, source: str, dest: str) -> None:
    """Copy every document as a server-side task, wait for it, and make the copy searchable."""
    started = client.reindex(
        body={"source": {"index": source}, "dest": {"index": dest}},
        wait_for_completion=False,
        refresh=True,
    )
    task_id = started["task"]
    while True:
        task = client.tasks.get(task_id=task_id)
        if task.get("completed"):
            break
        time.sleep(REINDEX_POLL_SECONDS)
    if task.get("error"):
        raise ClusterError(f"reindex {source} -> {dest} failed: {task['error']}")
    response = task.get("response") or {}
    failures = response.get("failures") or []
    if failures:
        first = failures[0]
        cause = first.get("cause", first)
        raise ClusterError(
            f"reindex {source} -> {dest} failed for {len(failures)} document(s), first: "
            f"{cause.get('type', '')}: {cause.get('reason', cause)}; the alias still points at "
            f"{source}; fix the files and run `loader apply` again"
        )
    client.indices.refresh(index=dest)
    log.info("reindexed %s documents %s -> %s", response.get("created", "?"), source, dest)


# --- the guard push calls --------------------------------------------------------------------


def check_index_compatible(client: OpenSearch, settings: Settings, dimension: int) -> str:
    """Refuse to push into an index built for another dimension or another document id scheme.

    Args:
        client: from ``connect``.
        settings: ``index_name`` is the alias written to; ``embedding_model`` names the model.
        dimension: the dimension of the configured model's vectors.

    Returns:
        The concrete index the alias points at.

    Raises:
        IncompatibleIndexError: the index is missing, holds vectors of another dimension, or
            was built with another document id scheme (``DOC_ID_SCHEME``).
    """
    alias = settings.index_name
    where = safe_url(settings.opensearch_url)
    with cluster_errors(settings, f"reading the mapping of {alias}"):
        mappings = _get_or_none(client.indices.get_mapping, index=alias)
    if not mappings:
        raise IncompatibleIndexError(
            f"index {alias!r} does not exist on {where}; run `loader apply` to create it, then push"
        )
    for index, body in sorted(mappings.items()):
        scheme = ((body.get("mappings") or {}).get("_meta") or {}).get("doc_id_scheme")
        if scheme != DOC_ID_SCHEME:
            raise IncompatibleIndexError(
                f"index {index} (alias {alias!r}) was built with document ids "
                f"{'that ignore the tenant' if scheme is None else f'of scheme {scheme!r}'}; "
                "pushing into it could overwrite another tenant's documents. Run `loader apply` "
                "(it plans a new, empty index version), then push each tenant's folder again"
            )
        properties = (body.get("mappings") or {}).get("properties") or {}
        dimensions = _vector_dimensions(properties)
        if not dimensions:
            raise IncompatibleIndexError(
                f"index {index} (alias {alias!r}) has no knn_vector field; run `loader apply` "
                "to create a new index version from the mapping files, then push"
            )
        for field_name, stored in dimensions.items():
            if stored != dimension:
                raise IncompatibleIndexError(
                    f"index {index} (alias {alias!r}) stores {stored}-dimensional vectors in "
                    f"{field_name!r}, but embedding model {settings.embedding_model!r} makes "
                    f"{dimension}-dimensional ones; run `loader apply` to create a new index "
                    "version for this model, then push again"
                )
    return sorted(mappings)[0]
