"""The checks of ``loader doctor`` that only running a query can make, against the alias's index:

- **filters inside the k-NN search**: each stored template with a ``knn`` or ``neural`` clause is
  rendered by OpenSearch (``_render/template``) and every such clause must carry the tenant filter
  itself -- a filter around the k-NN query would cut its ``k`` hits after the search, leaving a
  tenant with fewer, or none;
- **fused, not raw, scores**: a hybrid call through each hybrid template with each fusion
  pipeline, with a probe taken from the index (a chunk's title and its stored vector). The
  pipeline is read by its technique (``loader.modes.read_fusion``): RRF scores are at most
  ``sum(weights) / (rank_constant + 1)``, ``min_max`` and ``l2`` scores at most 1, while raw BM25
  scores of a title are not; ``z_score`` has no bound, so there, as everywhere, the hits must not
  be the sub-queries' raw lists (one document once per list, OpenSearch's negative separator
  scores), which is what a hybrid query without its pipeline returns;
- **chunks per tenant**, and **chunks cut with other chunking settings**: the ``chunking``
  fingerprint each chunk was pushed with (``loader.ingest.fingerprint``) against the settings';
- **half-written documents**: chunks of one document from two pushes, or fewer than it records
  (``loader.doctor.documents``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from loader.cluster.client import cluster_errors
from loader.doctor.documents import check_copy, check_documents, second_reader_check
from loader.doctor.report import Check, DoctorReport
from loader.errors import ClusterError, ConfigError
from loader.index.render import DesiredConfig
from loader.index.search_params import search_template_params, template_url_params
from loader.ingest.fingerprint import FINGERPRINT_FIELD, chunking_fingerprint
from loader.modes import read_fusion, template_stems
from loader.settings import Settings

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

PROBE_SIZE = 10
TENANT_BUCKETS = 100
# A float score above its bound by less than this is rounding.
_TOLERANCE = 1e-6


def _counts(client: OpenSearch, settings: Settings, report: DoctorReport) -> dict[str, Any]:
    """Chunks per tenant, and chunks and documents per chunking fingerprint, in one request."""
    body = {
        "size": 0,
        "track_total_hits": True,
        "aggs": {
            "tenants": {"terms": {"field": "tenant", "size": TENANT_BUCKETS}},
            "chunking": {
                "terms": {"field": FINGERPRINT_FIELD, "size": 20},
                "aggs": {"documents": {"cardinality": {"field": "doc_id"}}},
            },
            "unrecorded": {
                "missing": {"field": FINGERPRINT_FIELD},
                "aggs": {"documents": {"cardinality": {"field": "doc_id"}}},
            },
        },
    }
    with cluster_errors(settings, f"counting the chunks of {settings.index_name!r}"):
        answer = client.search(index=settings.index_name, body=body)
    total = answer["hits"]["total"]["value"]
    tenants = answer["aggregations"]["tenants"]["buckets"]
    shown = ", ".join(f"{bucket['key']} {bucket['doc_count']}" for bucket in tenants)
    if total:
        report.checks.append(Check("chunks per tenant", "ok", f"{total} chunks: {shown}"))
    else:
        report.checks.append(
            Check("chunks per tenant", "warn", "the index holds no chunks", "run `loader push`")
        )
    return answer["aggregations"]


def _chunking_check(
    aggregations: Mapping[str, Any], settings: Settings, report: DoctorReport
) -> None:
    current = chunking_fingerprint(settings)
    stale = [b for b in aggregations["chunking"]["buckets"] if b["key"] != current]
    chunks = sum(bucket["doc_count"] for bucket in stale)
    documents = sum(bucket["documents"]["value"] for bucket in stale)
    unrecorded = aggregations["unrecorded"]
    if chunks:
        report.checks.append(
            Check(
                "chunking",
                "fail",
                f"{documents} documents ({chunks} chunks) were cut with other chunking or "
                f"model settings than today's ({current}); the next push re-chunks them",
                "run `loader push` for their folders",
            )
        )
    elif unrecorded["doc_count"]:
        report.checks.append(
            Check(
                "chunking",
                "warn",
                f"{unrecorded['documents']['value']} documents ({unrecorded['doc_count']} "
                "chunks) were pushed before chunks recorded their chunking settings: they "
                "cannot be checked",
                "they are recorded when next re-chunked",
            )
        )
    else:
        report.checks.append(Check("chunking", "ok", f"every chunk was cut with {current}"))


def _vector_clauses(node: Any) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every ``knn`` / ``neural`` clause of a rendered query: ``(kind, field body)``."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key in ("knn", "neural") and isinstance(value, Mapping):
                for field_body in value.values():
                    yield key, field_body
            else:
                yield from _vector_clauses(value)
    elif isinstance(node, list):
        for item in node:
            yield from _vector_clauses(item)


def _has_tenant_filter(clause: Mapping[str, Any], tenant: str) -> bool:
    return f'"tenant": "{tenant}"' in str(clause.get("filter", "")).replace("'", '"')


def _filter_check(
    client: OpenSearch,
    settings: Settings,
    desired: DesiredConfig,
    dimension: int,
    report: DoctorReport,
) -> None:
    tenant = "doctor-probe"
    params = search_template_params(tenant, query_text="probe", query_vector=[0.5] * dimension)
    for template in sorted(desired.search_templates):
        try:
            with cluster_errors(settings, f"rendering search template {template!r}"):
                rendered = client.render_search_template(body={"id": template, "params": params})
        except ClusterError:
            continue  # a missing template is the template check's failure
        clauses = list(_vector_clauses(rendered.get("template_output", {})))
        if not clauses:
            continue
        outside = [kind for kind, clause in clauses if not _has_tenant_filter(clause, tenant)]
        name = f"k-NN filter {template}"
        if outside:
            report.checks.append(
                Check(
                    name,
                    "fail",
                    f"a {outside[0]} clause has no tenant filter inside it: its "
                    "hits are cut after the search",
                    "restore the template: `loader apply`",
                )
            )
        else:
            report.checks.append(Check(name, "ok", "the tenant filter runs inside the k-NN search"))


def _fusion_bound(pipeline: Mapping[str, Any]) -> tuple[str, float | None]:
    """``(technique, the largest fused score it can give)`` of a rendered fusion pipeline, read
    by its technique (``loader.modes.read_fusion``); ``None`` for a technique with no bound
    (``z_score``), ``("none", 0.0)`` for a pipeline with no fusion processor."""
    try:
        fusion = read_fusion(pipeline)
    except ConfigError:
        return "none", 0.0
    return fusion.technique, fusion.score_bound()


def _unfused(hits: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a hybrid query's hits are its sub-queries' raw lists: without a fusion processor
    OpenSearch returns them with negative separator scores, and one document once per list."""
    ids = [hit.get("_id") for hit in hits]
    return len(set(ids)) < len(ids) or any(float(hit["_score"] or 0) < 0 for hit in hits)


def _fused_problem(hits: Sequence[Mapping[str, Any]], technique: str, bound: float | None) -> str:
    """What says these hits were not fused by ``technique``, or ``""``."""
    scores = [float(hit["_score"] or 0) for hit in hits]
    top = max(scores, default=0.0)
    if not scores or _unfused(hits):
        return f"the hybrid query ran unfused (top score {top:.4f}, raw sub-query lists)"
    if not 0 < top <= (bound if bound is not None else math.inf) + _TOLERANCE:
        return (
            f"top score {top:.4f} is not a {technique} score (at most {bound:.4f}): the hybrid "
            "query ran unfused"
        )
    return ""


def _probe(client: OpenSearch, settings: Settings) -> dict[str, Any] | None:
    with cluster_errors(settings, f"reading a probe chunk of {settings.index_name!r}"):
        answer = client.search(
            index=settings.index_name,
            body={"size": 1, "_source": ["tenant", "title", "content", "embedding"]},
        )
    hits = answer["hits"]["hits"]
    return hits[0]["_source"] if hits else None


def _fused_check(
    client: OpenSearch, settings: Settings, desired: DesiredConfig, report: DoctorReport
) -> None:
    probe = _probe(client, settings)
    prefix = f"{desired.names.alias}-"
    stems = tuple(template_stems(hybrid=True))  # with their text-only twins (hybrid_text)
    hybrid = [
        name
        for name in sorted(desired.search_templates)
        if name.removeprefix(prefix).startswith(stems)
    ]
    if probe is None:
        report.checks.append(Check("fused scores", "skip", "no chunk to probe with"))
        return
    words = " ".join(str(probe.get("title") or probe.get("content") or "probe").split()[:8])
    params = search_template_params(
        str(probe.get("tenant") or ""),
        query_text=words,
        query_vector=probe.get("embedding"),
        depth=PROBE_SIZE,
    )
    for template in hybrid:
        for pipeline, body in sorted(desired.search_pipelines.items()):
            technique, bound = _fusion_bound(body)
            name = f"fused scores {template} | {pipeline}"
            try:
                with cluster_errors(settings, f"searching with {template} through {pipeline}"):
                    answer = client.search_template(
                        index=settings.index_name,
                        body={"id": template, "params": params},
                        params=template_url_params(pipeline),
                    )
            except ClusterError as exc:
                report.checks.append(Check(name, "fail", str(exc), "run `loader apply`"))
                continue
            hits = answer["hits"]["hits"]
            problem = _fused_problem(hits, technique, bound)
            if problem:
                report.checks.append(
                    Check(name, "fail", problem, "restore the pipeline: `loader apply`")
                )
                continue
            top = max(float(hit["_score"] or 0) for hit in hits)
            limit = f" <= {bound:.4f}" if bound is not None else ", one hit per document"
            report.checks.append(Check(name, "ok", f"{technique}, top score {top:.4f}{limit}"))


def probe_index(
    client: OpenSearch,
    settings: Settings,
    desired: DesiredConfig,
    index: str | None,
    report: DoctorReport,
) -> None:
    """The probes, when the alias points at an index (else they are skipped)."""
    if index is None:
        report.checks.append(Check("probes", "skip", "no index behind the alias"))
        return
    aggregations = _counts(client, settings, report)
    _chunking_check(aggregations, settings, report)
    report.checks.append(check_documents(client, settings))
    report.checks.append(check_copy(client, settings, index))
    report.checks.append(second_reader_check(client, settings))
    _filter_check(client, settings, desired, desired.dimension, report)
    _fused_check(client, settings, desired, report)
