"""``loader apply``: put the rendered config files on the cluster, idempotently, plan first.

The side that talks to the cluster: render the files (``render``), read the cluster (``state``),
compare them into a plan (``plan``, pure), then make its changes in order. The plan is a sorted
list of changes between the files and the cluster (create / update / delete / none), comparing only
the keys the files set, so defaults the server fills in never show up as a change. Applying it:

- the chunk index lives in versions ``<alias>-v<N>`` behind the alias applications search;
- a compatible change (a new field, ``number_of_replicas``, ``ef_search``) is applied in place;
- an incompatible one (vector dimension, analyzer, field type, shards) creates ``<alias>-v<N+1>``,
  copies the documents with ``_reindex`` (not when the dimension changed: old vectors are useless,
  re-push instead) and moves the alias with one atomic ``_aliases`` call, so searches keep
  answering; the old version is deleted only with ``delete_old``. The copied version is
  write-blocked from before the copy on (``_write_blocked``), so a push meanwhile fails instead of
  writing where the copy has passed; the block stays after the swap and is lifted when the apply
  stops before it;
- pipelines and search templates are put only when their stored body differs;
- an index a bulk-load push left relaxed gets its recorded settings back first (``bulk_load``).

With ``server_side_embedding`` or ``embedding_location = cluster`` the plan's first step registers
and deploys the embedding model in ml-commons (``ml_model``); with the latter the ingest pipeline
also embeds chunks pushed without a vector. ``check_index_compatible`` is the guard ``loader
push`` calls.

Example::

    plan = apply_config(settings, dry_run=True)
    for line in plan.lines():
        ...
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import opensearchpy
from opensearchpy import OpenSearch

from loader.cluster.client import (
    bad_request_reason,
    cluster_errors,
    cluster_version,
    connect,
    require_cluster,
)
from loader.errors import ClusterError, ConfigError
from loader.index import copy_check, reindex_block
from loader.index.bulk_load import restore_index
from loader.index.plan import ML_MODEL_KINDS, Change, Plan, plan_changes
from loader.index.render import render_config
from loader.index.state import read_cluster_state
from loader.settings import Settings

log = logging.getLogger(__name__)

REINDEX_POLL_SECONDS = 1.0
# A pause point for tests/integration/index/test_reindex_race.py: when set, called with the
# version a reindex copies once its write block is set and before the copy starts, so the test
# can make certain that a push is writing into the block. Never set outside that test.
write_blocked_hook: Callable[[str], None] | None = None
# Changes whose body is rendered from the configuration files and the settings: OpenSearch's
# 400 on one of them means a bad setting or file.
RENDERED_KINDS = (
    "index",
    "mapping",
    "index settings",
    "ingest pipeline",
    "search pipeline",
    "search template",
)


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
    version: tuple[int, int] | None = None,
) -> Plan:
    """Render the files and compare them with the cluster; changes nothing.

    Args:
        settings: resolved settings; ``index_name`` is the alias.
        dimension: the vector dimension; ``None`` reads it from ``settings.embedding_model``.
        delete_old: plan deleting index versions older than the alias's target.
        project_dir: folder with the project's config files (default: see ``render_config``).
        client: an OpenSearch client (default: ``connect(settings)``).
        version: the cluster's (major, minor), when the caller has read it already (default:
            read from the cluster).

    Returns:
        The plan.
    """
    from loader.index import ml_model as ml

    ml.check_cluster_embedding(settings)
    if client is None:
        client = connect(settings)
        # A cluster that is down is named before the model.
        version = require_cluster(client, settings)
    if dimension is None:
        dimension = model_dimension(settings)
    model_changes: list[Change] = []
    ml_model_id = second_ml_model_id = None
    # embedding_location = cluster needs the model too (the ingest pipeline's text_embedding
    # processor names it), and with the model there the text-only templates come with it.
    if ml.model_on_cluster(
        server_side_embedding=settings.server_side_embedding,
        embedding_location=settings.embedding_location,
    ):
        model_changes, ml_model_id, second_ml_model_id = ml.plan_models(client, settings)
    desired = render_config(
        settings,
        dimension,
        project_dir,
        ml_model_id=ml_model_id,
        cluster_version=version or cluster_version(client, settings),  # 2.x has no z-score
        second_ml_model_id=second_ml_model_id,
    )
    state = read_cluster_state(client, settings, desired)
    plan = plan_changes(desired, state, delete_old=delete_old)
    if model_changes:
        plan.changes = sorted([*plan.changes, *model_changes])
    if settings.query_log != "off":  # the query log's indices (loader.index.query_log)
        from loader.index.query_log import plan_query_log

        with cluster_errors(settings, "reading the query log's indices"):
            plan.changes = sorted([*plan.changes, *plan_query_log(client, settings, project_dir)])
    return plan


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
    version = None
    if client is None:
        client = connect(settings)
        # Before plan_apply loads the model for its dimension.
        version = require_cluster(client, settings)
    plan = plan_apply(
        settings,
        dimension=dimension,
        delete_old=delete_old,
        project_dir=project_dir,
        client=client,
        version=version,
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
    the new index is complete). The version a reindex copies is write-blocked from before the copy
    until the alias has moved off it; the block is lifted if anything in between fails
    (``_write_blocked``)."""
    model_ids: dict[str, str] = {}  # placeholder -> the id its model got
    with contextlib.ExitStack() as copying:
        for change in plan.pending:
            if change.kind in ML_MODEL_KINDS:
                from loader.index import ml_model as ml

                model_id = ml.ensure_model(client, settings, change.payload).model_id
                model_ids[ml.PENDING_IDS[change.kind]] = model_id
                log.info("done: %s -> %s", change.line(), model_id)
                continue
            if change.kind.startswith("query log "):  # loader.index.query_log
                from loader.index.query_log import execute_query_log_change

                with cluster_errors(settings, change.line()):
                    execute_query_log_change(client, change)
                log.info("done: %s", change.line())
                continue
            if model_ids and change.kind in ("search template", "ingest pipeline"):
                from loader.index.ml_model import with_model_ids

                change = with_model_ids(change, model_ids)
            if change.kind == "reindex":
                source, dest = change.payload["source"], change.payload["dest"]
                takes_over = bool(change.payload.get("takes_over_block"))
                copying.enter_context(_write_blocked(client, settings, source, dest, takes_over))
            with cluster_errors(settings, f"{change.action} {change.kind} {change.name}"):
                try:
                    _execute(client, plan.alias, change)
                except opensearchpy.RequestError as exc:
                    if change.kind not in RENDERED_KINDS:
                        raise
                    # The body came from the files and the settings: a bad setting (exit 2, the
                    # cause named), not the cluster failing.
                    raise ConfigError(
                        f"OpenSearch refused the {change.kind} {change.name} rendered from the "
                        f"configuration files and settings: {bad_request_reason(exc, settings)}; "
                        "fix the setting or file (the changes before it were applied, none after)"
                    ) from exc
            log.info("done: %s", change.line())
            if change.kind == "alias":
                copying.close()  # the alias has left the copied version: its block stays


@contextlib.contextmanager
def _write_blocked(
    client: OpenSearch, settings: Settings, index: str, dest: str, takes_over: bool = False
) -> Iterator[None]:
    """Block writes to ``index`` (``index.blocks.write``) for the ``with`` block: the version a
    reindex into ``dest`` copies, from before the copy until the alias has moved off it.

    A push meanwhile fails loudly (its bulk items are refused, ``loader.ingest.bulk``) instead of
    writing into ``index`` after the copy's snapshot, where the moved alias would lose it. The
    block is recorded in the mapping's ``_meta`` before it is set (``reindex_block``), so one an
    apply killed before the swap left is lifted by the next apply. When the block ends normally
    the write block stays, record and all: nothing should write into a version no alias points
    at (``--delete-old`` deletes it all the same). When it ends with any exception (a failed
    reindex, Ctrl-C, an alias another apply moved) the block is lifted and the record removed,
    unless the block was there before: a block someone else set is theirs to lift. With
    ``takes_over`` the block there is one an apply recorded, which the plan would otherwise lift
    first (``plan._taking_over``): it is recorded again, as this apply's own.
    """
    with cluster_errors(settings, f"reading the write block of {index}"):
        answer = client.indices.get_settings(
            index=index, name=reindex_block.WRITE_BLOCK, flat_settings=True
        )
    flat = (answer.get(index) or {}).get("settings") or {}
    ours = takes_over or not reindex_block.is_write_blocked(flat)
    try:
        if ours:
            with cluster_errors(settings, f"blocking writes to {index} for the reindex"):
                reindex_block.block_for_reindex(client, index, dest)
            log.info("write-blocked %s for the reindex", index)
            if write_blocked_hook is not None:
                write_blocked_hook(index)
        yield
    except BaseException:
        if ours:
            try:
                reindex_block.unblock_after_failed_reindex(client, index)
                log.info("lifted the write block on %s: the alias did not move", index)
            except opensearchpy.TransportError as exc:  # the apply's own error says more
                log.warning(
                    "could not lift the write block on %s (%s): every push into it fails until "
                    "`loader apply` lifts it",
                    index,
                    exc,
                )
        raise


def _execute(client: OpenSearch, alias: str, change: Change) -> None:
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
    elif kind == "bulk-load settings":
        restore_index(client, payload)
    elif kind == reindex_block.PLAN_KIND:
        reindex_block.lift_index(client, payload)
    elif kind == "reindex":
        _reindex(client, payload["source"], payload["dest"], payload.get("drop_fields", ()))

    elif kind == "alias":
        _move_alias(client, alias, payload)
    else:  # pragma: no cover - plan_changes makes only the kinds above
        raise ConfigError(f"unknown change {change.line()}")


def _move_alias(client: OpenSearch, alias: str, payload: Mapping[str, str]) -> None:
    """Point ``alias`` at ``payload["add"]``, off ``payload["remove"]`` when given, in one call:
    OpenSearch applies all actions atomically, so searches never see no alias.

    Raises:
        ClusterError: the alias no longer points at the index to remove: another apply moved it
            meanwhile (``must_exist`` fails the whole call rather than leave the alias on two
            indices).
    """
    actions: list[dict[str, Any]] = []
    if payload.get("remove"):
        actions.append({"remove": {"index": payload["remove"], "alias": alias, "must_exist": True}})
    actions.append({"add": {"index": payload["add"], "alias": alias}})
    try:
        client.indices.update_aliases(body={"actions": actions})
    except opensearchpy.NotFoundError as exc:
        if not payload.get("remove"):
            raise
        raise ClusterError(
            f"alias {alias!r} no longer points at {payload['remove']!r}, so it was not moved "
            f"to {payload['add']!r}: another `loader apply` ran at the same time; run "
            "`loader apply` again (then `--delete-old` removes the unused version)"
        ) from exc


def _reindex(client: OpenSearch, source: str, dest: str, drop_fields: Sequence[str] = ()) -> None:
    """Copy every document as a server-side task (without ``drop_fields``: another second
    reader's vectors), wait for it, make the copy searchable, and check it holds every chunk of
    ``source`` (``_check_copy``) before the alias may move.
    Interrupted (Ctrl-C), the task is cancelled: left running, it would go on filling an index
    nothing points at, beside the next apply's own copy."""
    # _reindex reads a point-in-time of what is refreshed: writes acknowledged before the write
    # block but not yet refreshed (the refresh interval, or a shard gone search-idle) would not
    # be copied, and the moved alias would lose them.
    client.indices.refresh(index=source)
    body: dict[str, Any] = {"source": {"index": source}, "dest": {"index": dest}}
    if drop_fields:
        removals = " ".join(f"ctx._source.remove('{name}');" for name in drop_fields)
        body["script"] = {"lang": "painless", "source": removals}
    started = client.reindex(
        body=body,
        wait_for_completion=False,
        refresh=True,
    )
    task_id = started["task"]
    try:
        while True:
            task = client.tasks.get(task_id=task_id)
            if task.get("completed"):
                break
            time.sleep(REINDEX_POLL_SECONDS)
    except KeyboardInterrupt:
        with contextlib.suppress(opensearchpy.TransportError):
            client.tasks.cancel(task_id=task_id)
        raise
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
    _check_copy(client, source, dest)


def _check_copy(client: OpenSearch, source: str, dest: str) -> None:
    """Refuse the swap unless ``dest`` holds the chunks of ``source``, counted per document and
    doc_hash (``copy_check``); record the check in ``dest``'s ``_meta`` when it does.

    Raises:
        ClusterError: the copy differs, naming the documents (the apply stops before the swap:
            the block on ``source`` is lifted).
    """
    client.indices.refresh(index=source)  # what a write the block did not stop would add
    found = copy_check.compare_versions(client, source, dest)
    if not found.equal:
        paths = copy_check.source_paths(client, f"{source},{dest}", found.shown_ids())
        raise ClusterError(
            f"the copy {dest} does not hold the chunks of {source}, so the alias was not moved: "
            f"{found.describe(paths)} (written during the copy: is another `loader apply` "
            f"running?). The alias stays on {source}; run `loader apply` again (`loader apply "
            f"--delete-old` deletes {dest})"
        )
    answer = client.indices.get_mapping(index=dest)
    meta = ((answer.get(dest) or {}).get("mappings") or {}).get("_meta") or {}
    record = copy_check.copy_record(found)
    client.indices.put_mapping(index=dest, body={"_meta": {**meta, copy_check.META_KEY: record}})
    log.info("checked %s: it holds the %s chunks of %s", dest, found.chunks, source)
