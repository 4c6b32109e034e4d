"""The checks of ``loader doctor`` that read the cluster's configuration: the cluster and its
plugins, the alias, the blocks on its index, the index against the rendered files, the pipelines,
templates and ml-commons model against what ``loader apply`` would store. ``run_doctor`` runs them
all, then the probes, then the learned reranker the settings name (``learned_model_checks``: its
files checked and loaded as every reader does; no cluster needed).

Drift is what ``loader apply`` would change: the plan of ``loader.index.apply.plan_apply`` is
computed (nothing is changed) and every pending change of the index, a pipeline, a template or
the model is a failure whose fix is ``loader apply``.

Example::

    report = run_doctor(settings)
    for line in report.lines():
        print(line)
    report.check()   # the exit code: raises the first failure's error class
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from loader.cluster.client import cluster_errors, cluster_version, connect, safe_url
from loader.doctor.hybrid import hybrid_checks
from loader.doctor.models import learned_model_checks
from loader.doctor.probes import probe_index
from loader.doctor.report import Check, DoctorReport
from loader.errors import (
    ClusterError,
    ClusterUnavailableError,
    ConfigError,
    LoaderError,
    ModelError,
)
from loader.index import reindex_block
from loader.index.ml_model import model_on_cluster
from loader.index.plan import ML_MODEL_KINDS, Plan
from loader.index.render import config_names, render_config, version_of
from loader.index.state import get_or_none
from loader.settings import Settings

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

log = logging.getLogger(__name__)

REQUIRED_PLUGINS = ("opensearch-knn", "opensearch-neural-search")
ML_PLUGIN = "opensearch-ml"
# Engines each server major version refuses for new indices (nmslib: deprecated in 2.19, blocked
# in 3.0).
REFUSED_ENGINES = {3: ("nmslib",)}
# What apply would change on the index itself; "bulk-load settings": a push killed while the
# index was relaxed for bulk loading (refresh off) left them so; "write block": an apply killed
# between its reindex and its alias swap left the block it records (``reindex_block``).
INDEX_KINDS = (
    "index",
    "mapping",
    "index settings",
    "bulk-load settings",
    "write block",
    "reindex",
    "alias",
)
APPLY_FIX = "run `loader apply` (see `loader apply --dry-run` for the plan)"
# The index blocks that stop a push or a search, and what each one stops. OpenSearch sets
# read_only_allow_delete itself on every index with a shard on a node past the flood-stage disk
# watermark, and lifts it once the node is below the high watermark again.
BLOCKS = {
    "write": "every `loader push` fails",
    "read_only": "every `loader push` and `loader apply` fails",
    "read_only_allow_delete": "OpenSearch sets it when a node's disk passes the flood-stage "
    "watermark: every `loader push` fails",
    "read": "every search fails",
}
FLOOD_STAGE_BLOCK = "read_only_allow_delete"


def _cluster(client: OpenSearch, settings: Settings, report: DoctorReport) -> int | None:
    """Reachability, version and health; the server's major version, or ``None`` when it cannot
    be reached (every later check is then skipped)."""
    where = safe_url(settings.opensearch_url)
    try:
        with cluster_errors(settings, "reading the cluster's version and health"):
            info = client.info()
            health = client.cluster.health()
    except ClusterError as exc:
        report.checks.append(
            Check(
                "cluster",
                "fail",
                str(exc),
                f"start OpenSearch at {where} or fix --url",
                ClusterUnavailableError if isinstance(exc, ClusterUnavailableError) else type(exc),
            )
        )
        return None
    version = str(info.get("version", {}).get("number", "?"))
    status = health.get("status", "?")
    detail = f"OpenSearch {version} at {where}, cluster {health.get('cluster_name')!r} {status}"
    if status == "red":
        report.checks.append(
            Check(
                "cluster",
                "fail",
                detail,
                "some primary shards are unassigned: see GET _cluster/allocation/explain",
                ClusterError,
            )
        )
    else:
        report.checks.append(Check("cluster", "ok" if status == "green" else "warn", detail))
    major = version.split(".", 1)[0]
    return int(major) if major.isdigit() else 0


def _plugins(client: OpenSearch, settings: Settings, report: DoctorReport) -> None:
    with cluster_errors(settings, "listing the plugins"):
        rows = client.cat.plugins(format="json")
    versions = {row.get("component"): row.get("version") for row in rows}
    on_cluster = model_on_cluster(
        server_side_embedding=settings.server_side_embedding,
        embedding_location=settings.embedding_location,
    )
    wanted = [*REQUIRED_PLUGINS, *([ML_PLUGIN] if on_cluster else [])]
    missing = [name for name in wanted if name not in versions]
    shown = ", ".join(f"{name} {versions[name]}" for name in wanted if name in versions)
    if missing:
        report.checks.append(
            Check(
                "plugins",
                "fail",
                f"missing {', '.join(missing)} (found: {shown or 'none'})",
                "use a distribution with them (the project's image: opensearch/build-image.sh)",
                ClusterError,
            )
        )
    else:
        report.checks.append(Check("plugins", "ok", shown))


def _alias(client: OpenSearch, settings: Settings, report: DoctorReport) -> str | None:
    """The alias points at exactly one versioned index; that index's name, or ``None``."""
    alias = settings.index_name
    with cluster_errors(settings, f"reading alias {alias!r}"):
        targets = sorted(get_or_none(client.indices.get_alias, name=alias) or {})
        is_index = not targets and bool(client.indices.exists(index=alias))
    if is_index:
        detail, fix = f"{alias!r} is an index, not an alias", "reindex it into <alias>-v1"
    elif not targets:
        detail, fix = f"alias {alias!r} does not exist", APPLY_FIX
    elif len(targets) > 1:
        detail = f"alias {alias!r} points at {len(targets)} indices ({', '.join(targets)})"
        fix = "point it at one with the _aliases API"
    elif version_of(alias, targets[0]) is None:
        detail, fix = f"alias {alias!r} points at {targets[0]}, not <alias>-v<N>", APPLY_FIX
    else:
        report.checks.append(Check("alias", "ok", f"{alias} -> {targets[0]}"))
        return targets[0]
    report.checks.append(Check("alias", "fail", detail, fix))
    return None


def blocks_set(flat_settings: Mapping[str, Any]) -> list[str]:
    """The ``BLOCKS`` an index's flat settings set to true, in ``BLOCKS`` order.

    Example::

        blocks_set({"index.blocks.write": "true", "index.blocks.read": "false"})   # ['write']
    """
    return [
        block
        for block in BLOCKS
        if str(flat_settings.get(f"index.blocks.{block}", "")).lower() == "true"
    ]


def block_check(index: str, blocks: list[str], meta: Mapping[str, Any] | None = None) -> Check:
    """The ``index blocks`` line for the blocks ``blocks_set`` found on ``index``; ``meta`` is its
    mapping's ``_meta``: a write block recorded there (``reindex_block``) was left by a `loader
    apply` killed before its alias swap, and `loader apply` lifts it."""
    if not blocks:
        return Check("index blocks", "ok", f"no write or read block on {index}")
    record = (meta or {}).get(reindex_block.META_KEY) if "write" in blocks else None
    by_apply = record is not None
    parts = []
    for block in blocks:
        part = f"{index} has index.blocks.{block} = true: {BLOCKS[block]}"
        if block == "write" and by_apply:
            part += f"; left by {reindex_block.describe(index, record)}"
        parts.append(part)
    others = [block for block in blocks if not (block == "write" and by_apply)]
    lift = f"PUT {index}/_settings " + json.dumps(
        {f"index.blocks.{block}": None for block in others}
    )
    if FLOOD_STAGE_BLOCK in others:
        fix = (
            "free disk on the data nodes (GET _cat/allocation?v; OpenSearch lifts the flood-stage "
            f"block once they are below the high watermark), then {lift}"
        )
    elif others:
        fix = f"{lift} once whoever set it is done"
    else:
        fix = ""
    if by_apply:
        apply_fix = "run `loader apply`: it lifts the write block (see `loader apply --dry-run`)"
        fix = f"{apply_fix}; {fix}" if fix else apply_fix
    return Check("index blocks", "fail", "; ".join(parts), fix)


def _blocks(client: OpenSearch, settings: Settings, index: str, report: DoctorReport) -> None:
    """Blocks on the alias's index that make every push (or search) fail, and whether a `loader
    apply` left the write block (its ``_meta`` record)."""
    with cluster_errors(settings, f"reading the blocks of {index}"):
        answer = client.indices.get_settings(index=index, name="index.blocks.*", flat_settings=True)
        flat = (answer.get(index) or {}).get("settings") or {}
        blocks = blocks_set(flat)
        meta = _mapping(client, settings, index).get("_meta") or {} if blocks else {}
    report.checks.append(block_check(index, blocks, meta))


def _plan(
    client: OpenSearch,
    settings: Settings,
    dimension: int,
    version: tuple[int, int] | None,
    report: DoctorReport,
) -> Plan | None:
    from loader.index.apply import plan_apply

    try:
        return plan_apply(settings, dimension=dimension, client=client, version=version)
    except ConfigError as exc:  # an alias apply cannot work with: reported by the alias check
        report.checks.append(Check("configuration", "fail", str(exc), "fix the alias first"))
    return None


def _drift(plan: Plan, kinds: tuple[str, ...]) -> list[str]:
    return [change.line() for change in plan.pending if change.kind in kinds]


BODY_KINDS = ("ingest pipeline", "search pipeline", "search template")


def _plan_checks(plan: Plan, report: DoctorReport) -> None:
    """The index, each pipeline and template, and the ml model: equal to what apply stores."""
    index_drift = _drift(plan, INDEX_KINDS)
    report.checks.append(
        Check("index drift", "fail", "; ".join(index_drift), APPLY_FIX)
        if index_drift
        else Check("index drift", "ok", "settings and mapping match the files")
    )
    words = {"create": "missing", "update": "differs from the files (changed by hand?)"}
    for change in plan.changes:
        if change.kind not in (
            "ingest pipeline",
            "search pipeline",
            "search template",
            *ML_MODEL_KINDS,
        ):
            continue
        name = f"{change.kind} {change.name}"
        if change.action == "none":
            report.checks.append(Check(name, "ok", "as `loader apply` stores it"))
        else:
            detail = words.get(change.action, change.action)
            report.checks.append(
                Check(name, "fail", f"{detail} {change.detail}".strip(), APPLY_FIX)
            )


def _mapping(client: OpenSearch, settings: Settings, index: str) -> Mapping[str, Any]:
    with cluster_errors(settings, f"reading the mapping of {index}"):
        answer = client.indices.get_mapping(index=index)
    return (answer.get(index) or {}).get("mappings") or {}


def _vector_checks(
    mapping: Mapping[str, Any], settings: Settings, dimension: int, major: int, report: DoctorReport
) -> None:
    """The stored vector field's dimension against the model's; its engine against the server."""
    field = (mapping.get("properties") or {}).get("embedding") or {}
    stored = field.get("dimension")
    if stored is None:
        report.checks.append(Check("vector dimension", "fail", "no knn_vector field", APPLY_FIX))
    elif int(stored) != dimension:
        report.checks.append(
            Check(
                "vector dimension",
                "fail",
                f"the index stores {stored}-dimensional vectors, {settings.embedding_model} "
                f"makes {dimension}",
                f"{APPLY_FIX}: it plans a new index version; then push",
            )
        )
    else:
        report.checks.append(
            Check("vector dimension", "ok", f"{dimension} ({settings.embedding_model})")
        )
    engines = {
        settings.vector_engine,
        (field.get("method") or {}).get("engine", settings.vector_engine),
    }
    refused = sorted(engine for engine in engines if engine in REFUSED_ENGINES.get(major, ()))
    if refused:
        report.checks.append(
            Check(
                "vector engine",
                "fail",
                f"{', '.join(refused)} is refused by OpenSearch {major}.x",
                'set vector_engine = "lucene" (or faiss) and run `loader apply`',
                ConfigError,
            )
        )
    else:
        report.checks.append(Check("vector engine", "ok", ", ".join(sorted(engines))))


def _dimension(settings: Settings, dimension: int | None, report: DoctorReport) -> int | None:
    if dimension is not None:
        return dimension
    from loader.index.apply import model_dimension

    try:
        return model_dimension(settings)
    except ModelError as exc:
        report.checks.append(
            Check("embedding model", "fail", str(exc), "fix embedding_model", ModelError)
        )
        return None


def _int8_check(settings: Settings) -> Check:
    """Whether this CPU's int8 vectors agree with fp32 as on the CPUs the recipe was made on."""
    from loader.models.embedding import cpu_features, int8_agreement, int8_cpu_warning

    try:
        lowest = int8_agreement(settings.embedding_model)
    except ModelError as exc:
        return Check("int8 vectors", "fail", str(exc), "fix embedding_model", ModelError)
    warning = int8_cpu_warning(settings.embedding_model, lowest)
    if warning:
        return Check("int8 vectors", "warn", warning, "set embedding_backend=onnx")
    return Check(
        "int8 vectors", "ok", f"agree with fp32 to a cosine of {lowest:.4f} on {cpu_features()}"
    )


def run_doctor(
    settings: Settings, *, client: OpenSearch | None = None, dimension: int | None = None
) -> DoctorReport:
    """Run every check against the cluster and alias of ``settings``, then of the learned
    reranker it names (``learned_model_checks``); changes nothing.

    Args:
        settings: resolved settings (the alias is ``index_name``).
        client: reuse a client (default ``connect(settings)``).
        dimension: the embedding model's dimension (default: read from the model).

    Returns:
        The report; ``report.check()`` raises the first failure's error class.
    """
    report = DoctorReport()
    _cluster_checks(client or connect(settings), settings, dimension, report)
    report.checks.extend(learned_model_checks(settings.learned_reranker, settings.reranker_model))
    log.debug("doctor of %s: %s", config_names(settings.index_name).alias, report.summary())
    return report


def _cluster_checks(
    client: OpenSearch, settings: Settings, dimension: int | None, report: DoctorReport
) -> None:
    major = _cluster(client, settings, report)
    if major is None:
        report.checks.append(Check("the other checks", "skip", "the cluster cannot be reached"))
        return
    try:
        _plugins(client, settings, report)
        index = _alias(client, settings, report)
        if index is not None:
            _blocks(client, settings, index, report)
        dimension = _dimension(settings, dimension, report)
        if dimension is None:
            return
        if settings.embedding_backend == "onnx-int8":
            report.checks.append(_int8_check(settings))
        version = cluster_version(client, settings)
        plan = _plan(client, settings, dimension, version, report)
        if plan is not None:
            _plan_checks(plan, report)
        mapping = _mapping(client, settings, index) if index is not None else {}
        if index is not None:
            _vector_checks(mapping, settings, dimension, major, report)
        desired = render_config(settings, dimension, cluster_version=version)
        hybrid_checks(client, settings, index, version, desired, mapping, report)
        probe_index(client, settings, desired, index, report)
    except LoaderError as exc:  # a check that could not run: the rest cannot either
        report.checks.append(Check("doctor", "fail", str(exc), "see the message", type(exc)))
