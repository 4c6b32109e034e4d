"""`loader eval`: retrieval quality of every search mode and chunking strategy, side by side.

What is evaluated (an ``EvalTask``):

- a BEIR folder: its corpus is pushed as one document per BEIR document (the BEIR id becomes the
  chunk's ``source``), and its ``qrels/<split>.tsv`` judges the hits;
- a questions file over a folder of your own documents: a hit is relevant when its chunk's
  ``source`` is the question's ``source`` file; questions that name a ``heading_path`` are also
  scored at section level (``section_*`` metrics: the chunk must also sit under that heading).

How (``evaluate``):

1. per chunking strategy (and per value of a sweep over a setting that changes the index) the
   documents are pushed into an index of their own, ``<prefix>-<dataset>-<strategy>[-<sweep>]``,
   through ``sync_documents``: a re-run over unchanged documents embeds and writes nothing;
2. every configuration (mode x rerank x query-side sweep value) searches every query through
   ``loader.query.search.search`` -- exactly what applications get -- retrieving ``candidates`` chunks;
3. chunk hits become a document ranking (a document ranks at its best chunk), scored by
   ``loader.eval.metrics.evaluate_run``: recall@1/5/10/50/100, MRR@10, nDCG@10, plus latency p50/p95.

Rendering (Markdown table, JSON, TREC runs, PNG chart) and the regression gate live in
``loader.eval.report``.

Example::

    task = load_task("datasets/scifact", split="test")
    report = evaluate(task, settings, modes=["bm25", "hybrid-rrf"])
    report.configurations[0].metrics["ndcg@10"]
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_type_hints

from loader.documents import PATH_SEPARATOR
from loader.errors import ConfigError, InputError
from loader.eval.datasets import corpus_to_documents, load_beir, load_questions
from loader.eval.metrics import DEFAULT_KS, evaluate_run, percentile
from loader.query.fusion import best_rank_per_document
from loader.settings import Settings

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

    from loader.documents import Document
    from loader.ingest.readers import Skipped
    from loader.query.search import SearchHit

log = logging.getLogger(__name__)

SEARCH_MODES = ("bm25", "vector", "hybrid-rrf", "hybrid-minmax")
DEFAULT_MODES = SEARCH_MODES
# Chunks retrieved per query: enough that recall@100 means something.
DEFAULT_CANDIDATES = 100
DEFAULT_INDEX_PREFIX = "eval"
# Tenant of every pushed evaluation document: the eval index holds nothing else.
EVAL_TENANT = "eval"
# Metrics shown in tables and compared by --compare, in display order.
REPORT_METRICS = (
    "recall@1",
    "recall@5",
    "recall@10",
    "recall@50",
    "recall@100",
    "mrr@10",
    "ndcg@10",
)
# What --compare gates on by default: ranking quality at the top (nDCG@10, recall@10) and the
# candidate set a reranker or an LLM gets to see (recall@100).
DEFAULT_GATE_METRICS = ("ndcg@10", "recall@10", "recall@100")
DEFAULT_THRESHOLD = 0.01
SECTION_PREFIX = "section_"
# The id a chunk under the question's expected heading gets in the section-level run.
_SECTION_MATCH = "\x00match"

# Settings whose change means other chunks or other vectors: a sweep builds one index per value.
INDEX_SETTINGS = frozenset(
    {
        "chunk_target_tokens",
        "chunk_max_tokens",
        "chunk_overlap_tokens",
        "chunk_max_chars",
        "semantic_threshold",
        "sentence_window",
        "max_file_bytes",
        "embedding_model",
        "text_analyzer",
        "vector_engine",
        "space_type",
        "hnsw_m",
        "hnsw_ef_construction",
        "number_of_shards",
    }
)
# Settings a sweep cannot vary: the connection, the names, or what has its own option.
UNSWEEPABLE_SETTINGS = frozenset(
    {
        "opensearch_url",
        "opensearch_user",
        "opensearch_password",
        "ca_certs",
        "insecure_skip_tls_verify",
        "request_timeout",
        "opensearch_image",
        "local_port",
        "api_keys_file",
        "follow_symlinks",
        "index_name",
        "number_of_replicas",
        "tenant",
        "device",
        "embedding_batch_size",
        "chunk_strategy",  # --strategy
        "search_mode",  # --mode
        "top_k",  # eval keeps every candidate
        "rerank",  # --rerank
    }
)


@dataclass
class EvalQuery:
    """One query to search, with the expected section when the questions file names one."""

    id: str
    text: str
    source: str = ""
    heading_path: tuple[str, ...] = ()


@dataclass
class EvalTask:
    """What to evaluate: the documents to push, the queries, and their judgements.

    Attributes:
        name: the dataset's name (used in index aliases and the report).
        kind: ``beir`` or ``questions``.
        split: the BEIR split (``""`` for a questions file).
        documents: returns the documents (and unreadable files) to push, afresh on every call.
        queries: the queries, in file order.
        qrels: graded relevance per query id and document key (BEIR id or source file).
        document_count: number of documents (for the report).
    """

    name: str
    kind: str
    split: str
    documents: Callable[[], Iterable[Document | Skipped]]
    queries: list[EvalQuery]
    qrels: dict[str, dict[str, int]]
    document_count: int = 0


@dataclass(frozen=True)
class Sweep:
    """One setting evaluated over a list of values (``--sweep name=v1,v2``)."""

    setting: str
    values: tuple[Any, ...]

    @property
    def changes_index(self) -> bool:
        return self.setting in INDEX_SETTINGS


@dataclass(frozen=True)
class EvalConfig:
    """One row of the results: a strategy, a mode, rerank or not, and maybe a swept value."""

    strategy: str
    mode: str
    rerank: bool = False
    sweep_setting: str | None = None
    sweep_value: Any = None

    @property
    def name(self) -> str:
        """``strategy:mode[+rerank][:setting=value]``, e.g. ``structure:hybrid-rrf+rerank``.

        Contains no whitespace, so it doubles as the TREC run tag.
        """
        name = f"{self.strategy}:{self.mode}{'+rerank' if self.rerank else ''}"
        if self.sweep_setting is not None:
            name += f":{self.sweep_setting}={self.sweep_value}"
        return name

    @property
    def sweep(self) -> dict[str, Any] | None:
        return None if self.sweep_setting is None else {self.sweep_setting: self.sweep_value}


@dataclass
class ConfigResult:
    """The measurement of one configuration.

    Attributes:
        config: what was run.
        index: the alias searched.
        metrics: averaged metrics (``recall@k``, ``ndcg@k``, ``mrr@k``; ``section_*`` too when
            questions name a heading).
        latency_ms: ``p50``, ``p95`` and ``mean`` of the end-to-end search time per query.
        queries: number of queries searched.
        run: ``(document key, score)`` per query id, best first (written as a TREC run).
        run_file: where the run was written (set by ``loader.eval.report.write_outputs``).
    """

    config: EvalConfig
    index: str
    metrics: dict[str, float]
    latency_ms: dict[str, float]
    queries: int
    run: dict[str, list[tuple[str, float]]] = field(default_factory=dict, repr=False)
    run_file: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.config.name,
            "strategy": self.config.strategy,
            "mode": self.config.mode,
            "rerank": self.config.rerank,
            "sweep": self.config.sweep,
            "index": self.index,
            "queries": self.queries,
            "metrics": dict(self.metrics),
            "latency_ms": dict(self.latency_ms),
            "run_file": self.run_file,
        }


@dataclass
class IndexResult:
    """One index the evaluation pushed into, and what the push did."""

    index: str
    strategy: str
    sweep: dict[str, Any] | None
    push: dict[str, Any]


@dataclass
class EvalReport:
    """Everything one evaluation measured; ``to_dict`` is the JSON file's content."""

    dataset: str
    kind: str
    split: str
    queries: int
    documents: int
    candidates: int
    settings: dict[str, Any]
    configurations: list[ConfigResult] = field(default_factory=list)
    indexes: list[IndexResult] = field(default_factory=list)
    created: str = ""
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "kind": self.kind,
            "split": self.split,
            "queries": self.queries,
            "documents": self.documents,
            "candidates": self.candidates,
            "created": self.created,
            "seconds": round(self.seconds, 3),
            "settings": dict(self.settings),
            "indexes": [dataclasses.asdict(index) for index in self.indexes],
            "configurations": [result.to_dict() for result in self.configurations],
        }


# --- loading what to evaluate ------------------------------------------------------------------


def load_task(
    dataset: str | Path,
    *,
    split: str = "test",
    docs: str | Path | None = None,
    limit: int | None = None,
    max_file_bytes: int = 10_000_000,
) -> EvalTask:
    """Read a BEIR folder, or a questions file with the folder of documents it asks about.

    Args:
        dataset: a BEIR folder, or a questions JSONL file (then ``docs`` is required).
        split: the BEIR qrels split.
        docs: the documents folder a questions file is about.
        limit: evaluate only the first ``limit`` queries (quick checks).
        max_file_bytes: files larger than this are skipped when reading ``docs``.

    Returns:
        The task.

    Raises:
        InputError: the dataset, the documents folder or a file in it is missing or malformed.
    """
    dataset = Path(dataset)
    if limit is not None and limit < 1:
        raise ConfigError(f"limit must be a positive whole number, got {limit}")
    if dataset.is_dir():
        if docs is not None:
            raise ConfigError(
                f"{dataset} is a BEIR folder; --docs is only for a questions file over your "
                "own documents"
            )
        data = load_beir(dataset, split)
        corpus = data.corpus
        queries = [EvalQuery(qid, text) for qid, text in data.queries.items()][:limit]
        qrels = {query.id: data.qrels[query.id] for query in queries}
        return EvalTask(
            name=data.name or dataset.name,
            kind="beir",
            split=split,
            documents=lambda: corpus_to_documents(corpus),
            queries=queries,
            qrels=qrels,
            document_count=len(corpus),
        )
    if not dataset.is_file():
        raise InputError(f"{dataset} is neither a BEIR folder nor a questions file")
    if docs is None:
        raise ConfigError(
            f"{dataset} is a questions file: give the folder of documents it asks about with "
            "--docs FOLDER"
        )
    root = Path(docs)
    if not root.is_dir():
        raise InputError(f"documents folder {root} does not exist")
    questions = load_questions(dataset)[:limit]
    from loader.ingest.readers import Skipped, iter_documents

    document_count = sum(
        1 for item in iter_documents(root, max_file_bytes) if not isinstance(item, Skipped)
    )
    return EvalTask(
        name=root.resolve().name,
        kind="questions",
        split="",
        documents=lambda: iter_documents(root, max_file_bytes),
        queries=[
            EvalQuery(q.id, q.question, _source_key(q.source), split_heading_path(q.heading_path))
            for q in questions
        ],
        qrels={q.id: {_source_key(q.source): 1} for q in questions},
        document_count=document_count,
    )


def _source_key(source: str) -> str:
    # Pushed sources are relative paths with forward slashes: "./a/b.md" means "a/b.md".
    return source.replace("\\", "/").removeprefix("./")


def split_heading_path(text: str) -> tuple[str, ...]:
    """``"Refunds > UPI"`` -> ``("Refunds", "UPI")`` (blank parts dropped)."""
    return tuple(part.strip() for part in text.split(PATH_SEPARATOR.strip()) if part.strip())


# --- pure helpers -------------------------------------------------------------------------------


def parse_sweep(text: str, base: Settings | None = None) -> Sweep:
    """Parse ``--sweep name=v1,v2,...`` into typed values.

    Args:
        text: e.g. ``chunk_target_tokens=120,180,240`` or ``bm25_weight=0.2,0.3``.
        base: settings whose field types the values take (default ``Settings()``).

    Returns:
        The sweep.

    Raises:
        ConfigError: unknown or unsweepable setting, no values, or a value of the wrong type.

    Example::

        parse_sweep("rrf_rank_constant=20,60")   # Sweep('rrf_rank_constant', (20, 60))
    """
    name, sep, raw_values = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise ConfigError(f"--sweep {text!r}: expected SETTING=VALUE1,VALUE2,...")
    types = get_type_hints(Settings)
    if name not in types:
        raise ConfigError(f"--sweep {text!r}: unknown setting {name!r}; see `loader settings`")
    if name in UNSWEEPABLE_SETTINGS:
        hint = {"chunk_strategy": " (use --strategy)", "search_mode": " (use --mode)"}
        raise ConfigError(f"--sweep: {name} cannot be swept{hint.get(name, '')}")
    parts = [part.strip() for part in raw_values.split(",") if part.strip()]
    if not parts:
        raise ConfigError(f"--sweep {text!r}: give at least one value after '='")
    kind = types[name]
    values = []
    for part in parts:
        try:
            if kind is bool:
                if part.lower() not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
                    raise ValueError(part)
                value: Any = part.lower() in ("true", "1", "yes", "on")
            else:
                value = kind(part)
        except ValueError:
            raise ConfigError(f"--sweep {name}: {part!r} is not a valid {kind.__name__}") from None
        if value not in values:
            values.append(value)
    return Sweep(name, tuple(values))


def plan_configurations(
    strategies: Sequence[str],
    modes: Sequence[str],
    rerank_options: Sequence[bool],
    sweep: Sweep | None = None,
) -> list[EvalConfig]:
    """Every configuration to run, grouped by index (strategy, then index-side sweep value).

    Args:
        strategies: chunking strategies.
        modes: search modes.
        rerank_options: ``[False]``, ``[True]`` or ``[False, True]``.
        sweep: an optional setting swept over values.

    Returns:
        The configurations in run order.

    Example::

        [c.name for c in plan_configurations(["structure"], ["bm25"], [False, True])]
        # ['structure:bm25', 'structure:bm25+rerank']
    """
    for mode in modes:
        if mode not in SEARCH_MODES:
            raise ConfigError(f"mode {mode!r} is not one of {', '.join(SEARCH_MODES)}")
    values: Sequence[Any] = sweep.values if sweep else [None]
    configs: list[EvalConfig] = []
    for strategy in dict.fromkeys(strategies):
        for value in values:
            for mode in dict.fromkeys(modes):
                for rerank in dict.fromkeys(rerank_options):
                    configs.append(
                        EvalConfig(
                            strategy,
                            mode,
                            rerank,
                            sweep.setting if sweep else None,
                            value,
                        )
                    )
    return configs


def _name_part(text: Any) -> str:
    # Index names: lowercase, and none of \ / * ? " < > | , # : or spaces.
    return re.sub(r"[^a-z0-9_-]+", "-", str(text).lower()).strip("-_") or "x"


def index_alias(prefix: str, dataset: str, strategy: str, config: EvalConfig | None = None) -> str:
    """The alias a strategy's (and an index-side sweep value's) documents are pushed into.

    Example::

        index_alias("eval", "scifact", "structure")   # 'eval-scifact-structure'
    """
    alias = f"{prefix}-{_name_part(dataset)}-{_name_part(strategy)}"
    if config is not None and config.sweep_setting in INDEX_SETTINGS:
        alias += f"-{_name_part(config.sweep_setting)}-{_name_part(config.sweep_value)}"
    return alias


def document_ranking(hits: Sequence[tuple[str, str, float]]) -> list[tuple[str, float]]:
    """Chunk hits -> documents ranked by their best chunk, with that chunk's score.

    Args:
        hits: ``(chunk_id, document key, score)``, best first.

    Returns:
        ``(document key, score)``, each document once, best first.

    Example::

        document_ranking([("a#1", "a", 3.0), ("b#0", "b", 2.0), ("a#0", "a", 1.0)])
        # [("a", 3.0), ("b", 2.0)]
    """
    best_score: dict[str, float] = {}
    for _chunk_id, key, score in hits:
        best_score.setdefault(key, score)  # the first (best) chunk of each document
    ranked = best_rank_per_document([(chunk_id, key) for chunk_id, key, _score in hits])
    return [(key, best_score[key]) for key in ranked]


def heading_matches(expected: Sequence[str], title: str, heading_path: Sequence[str]) -> bool:
    """Whether a chunk sits under the expected heading path (case-insensitive prefix match).

    The expected path may start with the document title or leave it out.

    Example::

        heading_matches(("Refunds", "UPI"), "Payments", ("Refunds", "UPI", "Limits"))  # True
    """
    want = [part.strip().lower() for part in expected]
    if not want:
        return True
    for have in ((title, *heading_path), tuple(heading_path)):
        parts = [part.strip().lower() for part in have]
        if parts[: len(want)] == want:
            return True
    return False


def section_ranking(
    hits: Sequence[tuple[str, str, str, tuple[str, ...]]], query: EvalQuery
) -> list[str]:
    """Chunk hits -> a ranking where chunks under the expected section share one id.

    Args:
        hits: ``(chunk_id, source, title, heading_path)``, best first.
        query: the question, with the expected ``source`` and ``heading_path``.

    Returns:
        Ids best first; scored against ``{_SECTION_MATCH: 1}`` it gives section-level metrics.
    """
    keys = []
    for _chunk_id, source, title, heading_path in hits:
        if source == query.source and heading_matches(query.heading_path, title, heading_path):
            keys.append(_SECTION_MATCH)
        else:
            keys.append(f"{source}\x00{PATH_SEPARATOR.join(heading_path)}")
    return list(dict.fromkeys(keys))


def latency_summary(milliseconds: Sequence[float]) -> dict[str, float]:
    """``{"p50", "p95", "mean"}`` of per-query latencies, rounded to 0.1 ms."""
    if not milliseconds:
        return {"p50": 0.0, "p95": 0.0, "mean": 0.0}
    return {
        "p50": round(percentile(milliseconds, 50), 1),
        "p95": round(percentile(milliseconds, 95), 1),
        "mean": round(sum(milliseconds) / len(milliseconds), 1),
    }


def score_run(
    run: Mapping[str, Sequence[str]],
    qrels: Mapping[str, Mapping[str, int]],
    section_runs: Mapping[str, Sequence[str]] | None = None,
    ks: Sequence[int] = DEFAULT_KS,
) -> dict[str, float]:
    """Document-level metrics, plus ``section_*`` metrics over the queries that name a heading."""
    metrics = evaluate_run(run, qrels, ks)
    if section_runs:
        section_qrels = {qid: {_SECTION_MATCH: 1} for qid in section_runs}
        for name, value in evaluate_run(section_runs, section_qrels, ks).items():
            metrics[f"{SECTION_PREFIX}{name}"] = value
    return metrics


# --- running it against the cluster -----------------------------------------------------------


def _hit_score(hit: SearchHit) -> float:
    return float(hit.scores.get("rerank", hit.scores.get("retrieval", 0.0)))


def _progress(iterable: Any, enabled: bool, description: str, total: int) -> Any:
    if not enabled:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=description, total=total, unit="query", leave=False)


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
        candidates: chunks retrieved (and returned) per query.
        client: the OpenSearch client.
        show_progress: a progress bar on stderr.

    Returns:
        The result, with the run kept for the TREC file.
    """
    from loader.query.search import search

    run: dict[str, list[tuple[str, float]]] = {}
    section_runs: dict[str, list[str]] = {}
    latencies: list[float] = []
    queries = _progress(task.queries, show_progress, config.name, len(task.queries))
    for query in queries:
        result = search(
            query.text,
            settings,
            tenant=EVAL_TENANT,
            mode=config.mode,
            rerank=config.rerank,
            k=candidates,
            candidates=candidates,
            client=client,
        )
        latencies.append(result.timings["total_ms"])
        run[query.id] = document_ranking(
            [(hit.chunk_id, hit.source, _hit_score(hit)) for hit in result.hits]
        )
        if query.heading_path:
            section_runs[query.id] = section_ranking(
                [(hit.chunk_id, hit.source, hit.title, hit.heading_path) for hit in result.hits],
                query,
            )
    ranked_ids = {qid: [key for key, _score in ranked] for qid, ranked in run.items()}
    metrics = score_run(ranked_ids, task.qrels, section_runs)
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
        candidates: chunks retrieved per query (a sweep over ``candidates`` overrides it).
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
    from loader.cluster.client import connect
    from loader.index.apply import apply_config
    from loader.ingest.sync import sync_documents
    from loader.models.embedding import embedder_for

    started = time.perf_counter()
    notify = on_event or (lambda line: None)
    if isinstance(candidates, bool) or not isinstance(candidates, int) or candidates < 1:
        raise ConfigError(f"candidates must be a positive whole number, got {candidates!r}")
    if not task.queries:
        raise InputError(f"{task.name} has no queries to evaluate")
    strategies = list(strategies or [settings.chunk_strategy])
    configs = plan_configurations(strategies, modes, rerank_options, sweep)
    client = client or connect(settings)
    report = EvalReport(
        dataset=task.name,
        kind=task.kind,
        split=task.split,
        queries=len(task.queries),
        documents=task.document_count,
        candidates=candidates,
        settings=settings.public_items(),
        created=datetime.now(UTC).isoformat(timespec="seconds"),
    )

    pushed: set[str] = set()
    applied: dict[str, Settings] = {}  # alias -> settings its pipelines were last applied with
    for config in configs:
        alias = index_alias(index_prefix, task.name, config.strategy, config)
        run_settings = settings.replace(index_name=alias, chunk_strategy=config.strategy)
        if config.sweep_setting is not None:
            run_settings = run_settings.replace(**{config.sweep_setting: config.sweep_value})
        embedder = embedder_for(run_settings)
        if alias not in pushed:
            # Apply with the index's own settings, then push: both are no-ops when unchanged.
            apply_config(run_settings, dimension=embedder.dimension, client=client)
            applied[alias] = run_settings
            push_report = sync_documents(
                task.documents(),
                run_settings,
                collection=_name_part(task.name),
                tenant=EVAL_TENANT,
                show_progress=show_progress,
                client=client,
                embedder=embedder,
            )
            pushed.add(alias)
            report.indexes.append(
                IndexResult(
                    alias,
                    config.strategy,
                    config.sweep if sweep is not None and sweep.changes_index else None,
                    push_report.to_dict(),
                )
            )
            notify(
                f"{alias}: {push_report.added} added, {push_report.updated} updated, "
                f"{push_report.unchanged} unchanged, {push_report.deleted} deleted, "
                f"{push_report.failed} failed; {push_report.chunks} chunks, "
                f"{push_report.embedded} embedded in {push_report.seconds:.1f} s"
            )
        if applied[alias] != run_settings:
            # A pipeline setting changed (rrf_rank_constant, bm25_weight ...): the pipelines are
            # named after the alias, so apply the new bodies before searching.
            apply_config(run_settings, dimension=embedder.dimension, client=client)
            applied[alias] = run_settings
        depth = config.sweep_value if config.sweep_setting == "candidates" else candidates
        result = run_configuration(
            task,
            config,
            run_settings,
            candidates=int(depth),
            client=client,
            show_progress=show_progress,
        )
        report.configurations.append(result)
        notify(
            f"{config.name}: ndcg@10 {result.metrics['ndcg@10']:.4f}, "
            f"recall@100 {result.metrics['recall@100']:.4f}, p50 {result.latency_ms['p50']} ms"
        )

    # Leave each index's pipelines as the base settings render them, so a later run starts from
    # the defaults rather than the last swept value.
    for alias, last in applied.items():
        base = settings.replace(index_name=alias, chunk_strategy=last.chunk_strategy)
        if sweep is not None and sweep.changes_index:
            base = base.replace(**{sweep.setting: getattr(last, sweep.setting)})
        if last != base:
            embedder = embedder_for(base)
            apply_config(base, dimension=embedder.dimension, client=client)
    report.seconds = time.perf_counter() - started
    return report
