"""The pure half of ``loader apply``: the rendered files and the cluster's state in, a sorted
list of typed changes (create / update / delete / none) out. Nothing here talks to the cluster.

Only the keys the files set are compared (``loader.index.diff``), so defaults the server fills in
never show up as a change. A compatible difference is an in-place update; an incompatible one
(vector dimension, analyzer, field type, shards) plans a new index version ``<alias>-v<N+1>``, a
reindex when the old documents are still usable, and the alias swap.

Example::

    state = read_cluster_state(client, settings, desired)   # loader.index.state
    plan = plan_changes(desired, state)
    plan.lines()      # ['+ create ingest pipeline kb-ingest', '+ create index kb-v1', ...]
    plan.summary()    # '8 to create, 0 to update, 0 to delete, 0 unchanged'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from loader.errors import ConfigError
from loader.index import reindex_block
from loader.index.bulk_load import plan_restore, restored_view
from loader.index.diff import (
    IndexDiff,
    describe_fingerprint,
    diff_index,
    flatten_settings,
    normalize,
)
from loader.index.render import ConfigNames, DesiredConfig, version_of
from loader.models.readers import SECOND_FIELD

if TYPE_CHECKING:
    from loader.index.state import ClusterState

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
# The kinds of the ml model steps: the index's model, the second reader's beside it.
ML_MODEL = "ml model"
SECOND_ML_MODEL = "second reader's ml model"
ML_MODEL_KINDS = (ML_MODEL, SECOND_ML_MODEL)


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


# --- planning ----------------------------------------------------------------------------------


@dataclass
class _IndexStep:
    """The index the alias ends on, the changes that get it there, and what the user should know."""

    target: str
    changes: list[Change]
    notes: list[str] = field(default_factory=list)


def plan_changes(desired: DesiredConfig, state: ClusterState, delete_old: bool = False) -> Plan:
    """The sorted changes that bring the cluster to the rendered configuration. Pure.

    Args:
        desired: the rendered files (``render_config``).
        state: what the cluster holds (``read_cluster_state``).
        delete_old: plan the deletion of index versions older than the one the alias ends on.

    Returns:
        The plan; ``Plan.notes`` explains what is kept and what the user must do next.
    """
    alias = desired.names.alias
    _check_alias(desired.names, state)
    next_index = desired.names.version_index(max(state.versions, default=0) + 1)
    current_target = state.alias_targets[0] if state.alias_targets else None

    index_step = _index_changes(desired.index, state, next_index)
    changes = [*index_step.changes, _alias_change(alias, current_target, index_step.target)]
    old_changes, old_notes = _old_versions(alias, state.versions, index_step.target, delete_old)
    changes += old_changes
    changes += _body_changes(desired, state)
    return Plan(alias=alias, changes=sorted(changes), notes=[*index_step.notes, *old_notes])


def _check_alias(names: ConfigNames, state: ClusterState) -> None:
    """Refuse a cluster whose alias name is an index, or an alias on several indices."""
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


def _index_changes(
    desired_index: dict[str, Any], state: ClusterState, next_index: str
) -> _IndexStep:
    """The index version decision: create the first one, update it in place, or make a new one."""
    if state.index_name is None or state.index is None:
        create = Change(STEP_INDEX, "index", next_index, "create", payload=desired_index)
        return _IndexStep(next_index, [create])
    restore, current = _bulk_load_restore(desired_index, state.index_name, state.index)
    lift, current = _reindex_block_lift(state.index_name, current)
    diff = diff_index(desired_index, current)
    if diff.incompatible:
        step = _new_version(desired_index, state.index_name, next_index, diff)
    else:
        step = _IndexStep(state.index_name, _in_place_changes(state.index_name, diff))
    reindex = next((change for change in step.changes if change.kind == "reindex"), None)
    if lift is not None and reindex is not None:
        # The reindex blocks the same index: it takes the recorded block over. Lifted first,
        # a push could write into the version for a moment -- while the apply that recorded
        # the block, if it is still running, copies it.
        position = step.changes.index(reindex)
        step.changes[position] = _taking_over(reindex, lift.payload)
    elif lift is not None:
        step.changes.insert(0, lift)
    if restore is not None:
        step.changes.insert(0, restore)
        step.notes.extend(restore.payload.warnings)
    return step


def _reindex_block_lift(
    index: str, current: dict[str, Any]
) -> tuple[Change | None, dict[str, Any]]:
    """The lift of the write block a `loader apply` killed between its reindex and its alias swap
    left on ``index`` (recorded in ``_meta``, ``loader.index.reindex_block``), and the index as it
    will be after it. A block without the record is someone else's: no change."""
    meta = (current.get("mappings") or {}).get("_meta") or {}
    lift = reindex_block.plan_lift(index, current.get("settings") or {}, meta)
    if lift is None:
        return None, current
    change = Change(STEP_INDEX, reindex_block.PLAN_KIND, index, "update", lift.detail(), lift)
    return change, reindex_block.lifted_view(current, lift)


def _taking_over(reindex: Change, lift: reindex_block.Lift) -> Change:
    """The reindex of the index ``lift`` would unblock, keeping its block as its own."""
    source = reindex.payload["source"]
    left_by = reindex_block.describe(source, lift.record)
    return replace(
        reindex,
        detail=(
            f"(keeps the write block on {source} left by {left_by}, as its own: a push during "
            "the copy fails instead of being lost)"
        ),
        payload={**reindex.payload, "takes_over_block": True},
    )


def _bulk_load_restore(
    desired_index: dict[str, Any], index: str, current: dict[str, Any]
) -> tuple[Change | None, dict[str, Any]]:
    """The restore of what a bulk-load push that did not finish left on ``index`` (its recorded
    refresh interval and replicas, ``loader.index.bulk_load``), and the index as it will be
    after it: the files are compared with that, so their own ``number_of_replicas`` is applied
    after the restore and wins. Sorted before the index's other steps (kind "bulk-load ...")."""
    meta = (current.get("mappings") or {}).get("_meta") or {}
    replicas = flatten_settings(desired_index.get("settings") or {}).get(
        "index.number_of_replicas", 1
    )
    restore = plan_restore(index, current.get("settings") or {}, meta, int(replicas))
    if restore is None:
        return None, current
    change = Change(STEP_INDEX, "bulk-load settings", index, "update", restore.detail(), restore)
    return change, restored_view(current, restore)


def _new_version(
    desired_index: dict[str, Any], current: str, next_index: str, diff: IndexDiff
) -> _IndexStep:
    """Create ``next_index`` in place of ``current``; copy the documents when they still fit."""
    reasons = "; ".join(diff.incompatible)
    create = Change(
        STEP_INDEX,
        "index",
        next_index,
        "create",
        detail=f"(replaces {current}: {reasons})",
        payload=desired_index,
    )
    if diff.dimension_change:
        old, new = diff.dimension_change
        note = (
            f"the vector dimension changed ({old} -> {new}): the documents of "
            f"{current} are not copied, their vectors are useless. {next_index} "
            f"starts empty; run `loader push` to embed the documents again"
        )
        return _IndexStep(next_index, [create], [note])
    if diff.model_change:
        note = (
            f"re-push: vectors of another model. {current} holds vectors of "
            f"{describe_fingerprint(diff.model_change[0])}; they are not copied (two models' "
            f"vectors do not compare). {next_index} starts empty; run `loader push` to embed "
            f"the documents again ({current} is kept until `loader apply --delete-old`)"
        )
        return _IndexStep(next_index, [create], [note])
    if diff.id_scheme_change:
        note = (
            f"{current} was built with document ids that ignore the tenant: its "
            f"documents are not copied (their ids would collide across tenants). "
            f"{next_index} starts empty; run `loader push FOLDER --tenant T` once per "
            f"tenant (vectors are embedded again; {current} is kept until "
            "`loader apply --delete-old`)"
        )
        return _IndexStep(next_index, [create], [note])
    dropped = [SECOND_FIELD] if diff.second_reader_change else []  # a push embeds it again
    reindex = Change(
        STEP_REINDEX,
        "reindex",
        f"{current} -> {next_index}",
        "create",
        detail=(
            f"(write-blocks {current} first: a push during the copy fails instead of being lost"
            f"{f'; without {SECOND_FIELD}' if dropped else ''})"
        ),
        payload={"source": current, "dest": next_index}
        | ({"drop_fields": dropped} if dropped else {}),
    )
    note = (
        f"{current} is write-blocked while the reindex copies it: a `loader push` meanwhile "
        f"fails (exit 8) instead of writing what the copy would miss; push again once the alias "
        f"is on {next_index}. The block stays on {current} (kept until `loader apply "
        "--delete-old`) and is lifted if the apply stops before the swap"
    )
    if dropped:
        note += "; the second reader changed: run `loader push` then, to embed its vectors alone"
    return _IndexStep(next_index, [create, reindex], [note])


def _in_place_changes(index: str, diff: IndexDiff) -> list[Change]:
    """The mapping and settings updates of a compatible index, or its "no change" line."""
    if not diff.in_place:
        return [Change(STEP_INDEX, "index", index, "none")]
    changes = []
    if diff.new_fields or diff.mapping_params:
        changes.append(_mapping_change(index, diff))
    if diff.settings_updates:
        changes.append(_settings_change(index, diff))
    return changes


def _mapping_change(index: str, diff: IndexDiff) -> Change:
    added = ", ".join(sorted(diff.new_fields))
    detail = f"(add fields: {added})" if added else ""
    if diff.mapping_params:
        params = ", ".join(
            f"_meta: {', '.join(diff.meta_keys)}"
            if k == "_meta" and diff.meta_keys
            else f"{k}: {v}"
            for k, v in sorted(diff.mapping_params.items())
        )
        detail = f"{detail} ({params})".strip()
    payload = {**diff.mapping_params}
    if diff.new_fields:
        payload["properties"] = diff.new_fields
    return Change(STEP_MAPPING, "mapping", index, "update", detail, payload)


def _settings_change(index: str, diff: IndexDiff) -> Change:
    detail = ", ".join(
        f"{key.removeprefix('index.')}: {old} -> {new}"
        for key, (old, new) in sorted(diff.settings_updates.items())
    )
    payload = {key: new for key, (_old, new) in diff.settings_updates.items()}
    return Change(STEP_INDEX_SETTINGS, "index settings", index, "update", f"({detail})", payload)


def _alias_change(alias: str, current_target: str | None, final_target: str) -> Change:
    """Point the alias at ``final_target``: create it, leave it, or move it atomically."""
    alias_line = f"{alias} -> {final_target}"
    if current_target == final_target:
        return Change(STEP_ALIAS, "alias", alias_line, "none")
    if current_target is None:
        return Change(STEP_ALIAS, "alias", alias_line, "create", payload={"add": final_target})
    return Change(
        STEP_ALIAS,
        "alias",
        alias_line,
        "update",
        detail=f"(was {current_target}; one atomic _aliases call)",
        payload={"remove": current_target, "add": final_target},
    )


def _old_versions(
    alias: str, versions: Mapping[int, str], final_target: str, delete_old: bool
) -> tuple[list[Change], list[str]]:
    """Versions the alias does not point at: deleted only when asked, else reported. Older
    ones are what a swap left; a newer one is what an apply that did not finish left (killed
    during its reindex, or beaten by another apply): nothing will ever point at it."""
    changes: list[Change] = []
    notes: list[str] = []
    final_version = version_of(alias, final_target)
    for version, index in sorted(versions.items()):
        if index == final_target:
            continue
        newer = final_version is not None and version > final_version
        if delete_old and final_version is not None:
            detail = "(left by an apply that did not finish)" if newer else "(old version)"
            changes.append(Change(STEP_OLD_INDEX, "index", index, "delete", detail))
        elif newer:
            notes.append(
                f"kept {index}, newer than {final_target} but not behind the alias (left by an "
                "apply that did not finish); `loader apply --delete-old` deletes it"
            )
        else:
            notes.append(f"kept {index}; `loader apply --delete-old` deletes older versions")
    return changes, notes


def _body_changes(desired: DesiredConfig, state: ClusterState) -> list[Change]:
    """The pipelines and search templates, each put only when its stored body differs."""
    return [
        *_diff_bodies(
            "ingest pipeline",
            STEP_INGEST_PIPELINE,
            desired.ingest_pipelines,
            state.ingest_pipelines,
        ),
        *_diff_bodies(
            "search pipeline",
            STEP_SEARCH_PIPELINE,
            desired.search_pipelines,
            state.search_pipelines,
        ),
        *_diff_bodies(
            "search template",
            STEP_SEARCH_TEMPLATE,
            desired.search_templates,
            {name: _template_body(body) for name, body in state.search_templates.items()},
        ),
    ]


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
