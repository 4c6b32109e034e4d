"""`loader eval`: retrieval quality of every search mode and chunking strategy, side by side.

What is evaluated is an ``EvalTask`` (``loader.eval.tasks``: a BEIR folder, or a questions file
over a folder of your own documents); what is run, the configurations, comes from
``loader.eval.configs``. How (``evaluate``):

1. per chunking strategy (and per value of a sweep over a setting that changes the index) the
   documents are pushed into an index of their own, ``<prefix>-<dataset>-<strategy>[-<sweep>]``,
   through ``sync_documents`` (``loader.eval.indexes``): a re-run over unchanged documents
   embeds and writes nothing;
2. every configuration (mode x rerank x query-side sweep value) searches every query through
   ``loader.query.search.search`` -- exactly what applications get -- retrieving ``candidates``
   chunks (``run_configuration``);
3. the document metrics (recall@1/5/10/50/100, MRR@10, nDCG@10, ``loader.eval.metrics``) score
   a ranking of documents, so each query is searched with ``one_per_document`` (the templates
   collapse on ``doc_id``): ``candidates`` documents, each at its best chunk, and recall@100
   means 100 documents. The section metrics of a questions file need the chunks themselves (the
   expected section may be a document's second-best chunk), and so does the context recall of
   the ``top_k`` passages a prompt would get, so a question naming a heading path or an answer is
   searched a second time without the collapse, for ``candidates`` chunks. Latency p50/p95 is the
   document search's.

``run_eval`` is the whole command behind one ``EvalRequest``: read the previous results (so a bad
path fails before minutes of searching), load the task, evaluate, write the outputs
(``loader.eval.report``) and compare (``loader.eval.compare``); ``EvalRun.check()`` is the
regression gate. Nothing here prints.

Example::

    task = load_task("datasets/scifact", split="test")
    report = evaluate(task, settings, modes=["bm25", "hybrid-rrf"])
    report.configurations[0].metrics["ndcg@10"]

    run = run_eval(EvalRequest("datasets/scifact", previous="baseline.json"), settings)
    run.check()   # RegressionError when a gated metric dropped
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loader.errors import ConfigError, InputError
from loader.eval.compare import (
    DEFAULT_GATE_METRICS,
    DEFAULT_THRESHOLD,
    Comparison,
    check_comparable,
    check_gate_metrics,
    compare_reports,
    load_results,
)
from loader.eval.configs import (
    DEFAULT_MODES,
    EvalConfig,
    Sweep,
    parse_sweep,
    plan_configurations,
    rerank_caption,
    rerank_setup,
)
from loader.eval.indexes import EvalIndexes
from loader.eval.metrics import (
    context_recall,
    document_ranking,
    latency_summary,
    mean_context_recall,
    score_run,
    section_ranking,
)
from loader.eval.report import ConfigResult, EvalReport, write_outputs
from loader.eval.tasks import EvalQuery, EvalTask, load_task
from loader.models.rerank.check import choose_reranker
from loader.settings import Settings

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

    from loader.query.result import SearchHit

log = logging.getLogger(__name__)

# Documents retrieved per query: enough that recall@100 means something.
DEFAULT_CANDIDATES = 100
# Chunks each sub-query retrieves per document asked for, so that the collapse on doc_id still
# leaves ``candidates`` documents when a document's chunks crowd the top.
CHUNKS_PER_DOCUMENT = 3
DEFAULT_INDEX_PREFIX = "eval"
DEFAULT_OUT_DIR = "eval-results"


def _progress(iterable: Any, enabled: bool, description: str, total: int) -> Any:
    if not enabled:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=description, total=total, unit="query", leave=False)


def _section_ranking(hits: list[SearchHit], query: EvalQuery) -> list[str]:
    return section_ranking(
        [(hit.chunk_id, hit.source, hit.title, hit.heading_path) for hit in hits], query
    )


def run_configuration(
    task: EvalTask,
    config: EvalConfig,
    settings: Settings,
    *,
    candidates: int,
    client: OpenSearch,
    show_progress: bool = False,
) -> ConfigResult:
    """Search every query of ``task`` with one configuration and score the document ranking.

    Args:
        task: the queries and judgements.
        config: mode and rerank (settings already carry any swept value).
        settings: settings whose ``index_name`` is the alias to search.
        candidates: documents retrieved (and scored) per query; chunks for the section search.
        client: the OpenSearch client.
        show_progress: a progress bar on stderr.

    Returns:
        The result, with the run kept for the TREC file.
    """
    run: dict[str, list[tuple[str, float]]] = {}
    section_runs: dict[str, list[str]] = {}
    recalls: dict[str, float | None] = {}  # context recall of the top_k, per answered query
    latencies: list[float] = []
    queries = _progress(task.queries, show_progress, config.name, len(task.queries))
    for query in queries:
        hits, chunk_hits, total_ms = _search_query(
            query, task.tenant, config, settings, candidates, client
        )
        latencies.append(total_ms)
        run[query.id] = document_ranking([(h.chunk_id, h.source, h.final_score) for h in hits])
        if query.answer:
            top = [hit.text or hit.body for hit in chunk_hits[: settings.top_k]]
            recalls[query.id] = context_recall(query.answer, top)
        if query.heading_path:
            section_runs[query.id] = _section_ranking(chunk_hits, query)
    ranked_ids = {qid: [key for key, _score in ranked] for qid, ranked in run.items()}
    metrics = score_run(ranked_ids, task.qrels, section_runs)
    metrics.update(mean_context_recall(recalls, settings.top_k))
    result = ConfigResult(
        config=config,
        index=settings.index_name,
        metrics=metrics,
        latency_ms=latency_summary(latencies),
        queries=len(task.queries),
        run=run,
    )
    log.info("%s: ndcg@10 %.4f", config.name, metrics["ndcg@10"])
    return result


def _search_query(
    query, tenant: str, config: EvalConfig, settings: Settings, candidates: int, client
):
    """One query's document hits (collapsed on doc_id), its chunk hits when judged on sections or
    an answer (a second search, without the collapse), and the first search's latency."""
    from loader.query.request import MAX_CANDIDATES, SearchRequest
    from loader.query.search import search

    request = SearchRequest(
        question=query.text,
        tenant=tenant,
        mode=config.mode,
        rerank=config.rerank,
        history=query.history,
        k=candidates,
        candidates=min(candidates * CHUNKS_PER_DOCUMENT, MAX_CANDIDATES),
        exact_match=settings.exact_match,
        one_per_document=True,
    )
    result = search(request, settings, client=client)
    chunk_hits = []
    if query.heading_path or query.answer:
        chunks = request.replace(candidates=candidates, one_per_document=False)
        chunk_hits = search(chunks, settings, client=client).hits
    return result.hits, chunk_hits, result.timings["total_ms"]


def evaluate(
    task: EvalTask,
    settings: Settings,
    *,
    strategies: Sequence[str] | None = None,
    modes: Sequence[str] = DEFAULT_MODES,
    rerank_options: Sequence[bool] = (False,),
    candidates: int = DEFAULT_CANDIDATES,
    sweep: Sweep | None = None,
    index_prefix: str = DEFAULT_INDEX_PREFIX,
    client: OpenSearch | None = None,
    show_progress: bool = False,
    on_event: Callable[[str], None] | None = None,
) -> EvalReport:
    """Push the task's documents once per index, then measure every configuration.

    Args:
        task: from ``load_task``.
        settings: resolved settings (cluster, models, chunking and query defaults).
        strategies: chunking strategies (default ``settings.chunk_strategy``).
        modes: search modes.
        rerank_options: ``[False]``, ``[True]`` or both.
        candidates: documents retrieved per query (a sweep over ``candidates`` overrides it).
        sweep: one setting over several values. Index-side settings (chunking, model, analyzer)
            get an index per value; pipeline settings (``rrf_rank_constant``, ``bm25_weight``,
            ``hnsw_ef_search``) are applied to the strategy's index before their rows run;
            query settings (``candidates``, reranker) just change the search.
        index_prefix: first part of every alias (``<prefix>-<dataset>-<strategy>``).
        client: reuse an OpenSearch client.
        show_progress: progress bars on stderr.
        on_event: called with one line per step (push summaries, configurations run).

    Returns:
        The report; nothing is printed or written.

    Raises:
        ConfigError: unknown mode or strategy, bad candidates.
        ClusterError, ModelError: as raised by apply, push and search.
    """
    from loader.cluster.client import connect, require_cluster

    started = time.perf_counter()
    notify = on_event or (lambda line: None)
    _check_inputs(task, candidates)
    configs = plan_configurations(
        list(strategies or [settings.chunk_strategy]), modes, rerank_options, sweep
    )
    if client is None:
        client = connect(settings)
        require_cluster(client, settings)  # a cluster that is down is named before any model
    indexes = EvalIndexes(task, settings, client, index_prefix, sweep, show_progress, notify)
    report = _new_report(task, settings, candidates)
    for config in configs:
        result = _measure(task, config, indexes, candidates, show_progress)
        report.configurations.append(result)
        notify(result.summary())
    indexes.restore()
    report.indexes = indexes.pushed
    report.note_single_source()  # a tenant of one document scores 1.0 whatever the order
    # Reading the documents is part of the run: a folder of PDFs takes minutes before the push.
    report.seconds = task.read_seconds + time.perf_counter() - started
    return report


def _measure(
    task: EvalTask, config: EvalConfig, indexes: EvalIndexes, candidates: int, show_progress: bool
) -> ConfigResult:
    """One row: make the configuration's index ready, then search every query with it."""
    run_settings = indexes.prepare(config)
    depth = config.sweep_value if config.sweep_setting == "candidates" else candidates
    return run_configuration(
        task,
        config,
        run_settings,
        candidates=int(depth),
        client=indexes.client,
        show_progress=show_progress,
    )


def _check_inputs(task: EvalTask, candidates: int) -> None:
    if isinstance(candidates, bool) or not isinstance(candidates, int) or candidates < 1:
        raise ConfigError(f"candidates must be a positive whole number, got {candidates!r}")
    if not task.queries:
        raise InputError(f"{task.name} has no queries to evaluate")


def _new_report(task: EvalTask, settings: Settings, candidates: int) -> EvalReport:
    return EvalReport(
        dataset=task.name,
        kind=task.kind,
        split=task.split,
        queries=len(task.queries),
        documents=task.document_count,
        candidates=candidates,
        settings=settings.public_items(),
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        tenant=task.tenant,
        read_seconds=task.read_seconds,
        warnings=list(task.warnings),
    )


@dataclass(frozen=True)
class EvalRequest:
    """Everything one `loader eval` is asked to do (the CLI's options, for scripts too).

    Attributes:
        dataset: a BEIR folder, or a questions JSONL file (then ``docs`` is required).
        docs: the documents folder a questions file is about.
        tenant: whose documents a questions file is judged on; ``None``: the tenant its lines
            name (``loader judgments export``), else the ``tenant`` setting. Not for BEIR.
        split: the BEIR qrels split.
        limit: only the first ``limit`` queries.
        strategies: chunking strategies (empty: the ``chunk_strategy`` setting).
        modes: search modes (empty: all four).
        rerank: ``on``, ``off`` or ``both`` (each mode with and without the rerank); ``None``:
            the rerank setting, as a search (``auto``: on when reranker_model is available).
        candidates: documents retrieved per query (chunks for the section metrics).
        sweep: ``SETTING=V1,V2`` (see ``loader.eval.configs.parse_sweep``).
        index_prefix: first part of the eval indices' aliases.
        out_dir: folder of the JSON, Markdown table, PNG chart and TREC runs.
        output: the results JSON file (default ``<out_dir>/results.json``).
        chart: draw the PNG chart.
        previous: an earlier results JSON file to compare with (the regression gate).
        gate_metrics: metrics the gate checks (empty: ``DEFAULT_GATE_METRICS``).
        threshold: the largest allowed drop of a gated metric (absolute).
    """

    dataset: str | Path
    docs: str | Path | None = None
    tenant: str | None = None
    split: str = "test"
    limit: int | None = None
    strategies: tuple[str, ...] = ()
    modes: tuple[str, ...] = ()
    rerank: str | None = None
    candidates: int = DEFAULT_CANDIDATES
    sweep: str | None = None
    index_prefix: str = DEFAULT_INDEX_PREFIX
    out_dir: str | Path = DEFAULT_OUT_DIR
    output: str | Path | None = None
    chart: bool = True
    previous: str | Path | None = None
    gate_metrics: tuple[str, ...] = ()
    threshold: float = DEFAULT_THRESHOLD


@dataclass
class EvalRun:
    """What one `loader eval` did: the report, the files written, the comparison (if asked)."""

    report: EvalReport
    outputs: dict[str, str]
    comparison: Comparison | None = None

    def to_dict(self) -> dict[str, Any]:
        """The report's JSON form, plus ``outputs`` and, when compared, ``comparison``."""
        payload = {**self.report.to_dict(), "outputs": self.outputs}
        if self.comparison is not None:
            payload["comparison"] = self.comparison.to_dict()
        return payload

    def check(self) -> None:
        """The regression gate (a no-op without a comparison).

        Raises:
            RegressionError: a gated metric dropped by more than the threshold.
            InputError: the comparison compared no gated metric at all.
        """
        if self.comparison is not None:
            self.comparison.check()


def _check_writable(request: EvalRequest) -> None:
    """Create the outputs' folders now: a folder that cannot be made fails before minutes of
    pushing and searching, not after them."""
    folders = {("--out-dir", Path(request.out_dir)), ("--out-dir", Path(request.out_dir) / "runs")}
    if request.output:
        folders.add(("--output", Path(request.output).parent))
    for option, folder in sorted(folders, key=lambda pair: str(pair[1])):
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise ConfigError(f"{option} {folder}: cannot create the folder ({reason})") from None


def run_eval(
    request: EvalRequest,
    settings: Settings,
    *,
    show_progress: bool = False,
    on_event: Callable[[str], None] | None = None,
) -> EvalRun:
    """Run one `loader eval`: evaluate, write the outputs, compare with the previous results.

    The previous results are read first: a bad path fails before minutes of searching. The
    gate is not applied here: call ``check()`` on the result once its outputs are shown.

    Raises:
        ConfigError, InputError: bad options (an unknown gate metric, one without
            ``previous``), dataset, previous results or an output folder that cannot be created
            (before any search).
        ClusterError, ModelError: as raised by ``evaluate``.
    """
    if request.gate_metrics and not request.previous:
        raise ConfigError(
            "--gate-metric is what the --compare gate checks (or --tune's objective): give the "
            "previous results with --compare FILE, or drop --gate-metric"
        )
    check_gate_metrics(request.gate_metrics, settings.top_k)
    gate = request.gate_metrics or DEFAULT_GATE_METRICS
    previous = load_results(request.previous) if request.previous else None
    if previous is not None:
        check_comparable(previous, gate, str(request.previous))
    # Every swept value is checked now: not after the rows before it ran.
    sweep = parse_sweep(request.sweep, settings) if request.sweep else None
    _check_writable(request)
    task = load_task(
        request.dataset,
        split=request.split,
        docs=request.docs,
        limit=request.limit,
        max_file_bytes=settings.max_file_bytes,
        tenant=request.tenant,
        default_tenant=settings.tenant,
    )
    # After the task (its tenant's learned model), before any document is pushed.
    modes = request.modes or DEFAULT_MODES
    reranks, rerank_warnings, learned = rerank_setup(request.rerank, settings, task.tenant, modes)
    report = evaluate(
        task,
        settings,
        strategies=request.strategies or None,
        modes=modes,
        rerank_options=reranks,
        candidates=request.candidates,
        sweep=sweep,
        index_prefix=request.index_prefix,
        show_progress=show_progress,
        on_event=on_event,
    )
    report.warnings.extend(rerank_warnings)  # in the results file too
    chosen = choose_reranker(settings, task.tenant)  # what the rows ran: the tenant's model too
    swept = sweep.setting if sweep else None
    report.rerank = rerank_caption(
        request.rerank, reranks, chosen, rerank=settings.rerank, backend=settings.rerank_backend,
        swept=swept, learned=learned,
    )  # fmt: skip
    outputs = write_outputs(report, request.out_dir, request.output, chart=request.chart)
    comparison = None
    if previous is not None:
        comparison = compare_reports(
            report.to_dict(), previous, gate, request.threshold, previous_name=str(request.previous)
        )
    return EvalRun(report, outputs, comparison)
