"""The ``loader`` command line: a thin layer over the library.

Each command parses its options, resolves settings, calls one library function and turns a
``LoaderError`` into one line on stderr with the error class's exit code. Commands never call each
other; shared options are small decorator factories.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import click

from loader.errors import LoaderError, PartialFailure
from loader.query.request import EXPANSIONS
from loader.redact import parse_url, scrub_secrets
from loader.settings import (
    SEARCH_MODES,
    Settings,
    resolve_settings,
    secret_values,
    setting_help,
)
from loader.terminal import printable, printable_lines


def settings_options(func: Callable) -> Callable:
    """--config, --url and --debug, shared by every command that talks to a cluster."""

    @click.option(
        "--config",
        "config_path",
        type=click.Path(dir_okay=False),
        default=None,
        help="Config file (default: ./loader.toml if present).",
    )
    @click.option(
        "--url",
        "opensearch_url",
        default=None,
        metavar="URL",
        help="OpenSearch URL (default: $OPENSEARCH_URL or http://127.0.0.1:9200).",
    )
    @click.option("--index", "index_name", default=None, help="Index alias to work on.")
    @click.option("--debug", is_flag=True, help="Show tracebacks and debug logging.")
    @functools.wraps(func)
    def wrapper(
        *args: Any,
        config_path: str | None,
        opensearch_url: str | None,
        index_name: str | None,
        debug: bool,
        **kwargs: Any,
    ) -> Any:
        logging.basicConfig(
            level=logging.DEBUG if debug else logging.WARNING,
            format="%(levelname)s %(name)s: %(message)s",
        )
        if not debug:  # the client logs every failed request; errors below become one line
            logging.getLogger("opensearch").setLevel(logging.CRITICAL)
            # pypdf warns about damaged PDFs without naming the file; push reports each one.
            logging.getLogger("pypdf").setLevel(logging.ERROR)
        secrets: list[str] = []
        with handle_errors(debug, secrets):
            settings, _ = resolve_settings(
                config_path=config_path,
                overrides={"opensearch_url": opensearch_url, "index_name": index_name},
            )
            secrets.extend(secret_values(settings))
            _mask_secrets_in_logs(secrets)
            parse_url(settings.opensearch_url)  # a malformed URL: one line, before any work
            try:
                return func(*args, settings=settings, **kwargs)
            finally:
                _SECRET_FILTER.secrets = []

    return wrapper


class _SecretFilter(logging.Filter):
    """Masks the running command's secrets in every record a root handler writes."""

    def __init__(self) -> None:
        super().__init__()
        self.secrets: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if self.secrets:
            message = record.getMessage()
            scrubbed = scrub_secrets(message, self.secrets)
            if scrubbed != message:
                record.msg, record.args = scrubbed, None
            if record.exc_info and not record.exc_text:
                text = logging.Formatter().formatException(record.exc_info)
                record.exc_text = scrub_secrets(text, self.secrets)
        return True


_SECRET_FILTER = _SecretFilter()


def _mask_secrets_in_logs(secrets: list[str]) -> None:
    _SECRET_FILTER.secrets = secrets
    for handler in logging.getLogger().handlers:
        if _SECRET_FILTER not in handler.filters:
            handler.addFilter(_SECRET_FILTER)


@contextlib.contextmanager
def handle_errors(debug: bool = False, secrets: Sequence[str] = ()) -> Iterator[None]:
    """Turn any error into one line on stderr and an exit code, never a traceback (unless
    ``debug``): a LoaderError gets its class's exit code, anything else exit code 1.

    ``secrets`` (read when the error happens) are masked in the line: the package's own messages
    never hold one, but the text of an unexpected exception may.
    """
    try:
        yield
    except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
        raise
    except LoaderError as exc:
        if debug:
            raise
        # Whole secrets only: a piece of one may be a word of the message.
        long_enough = [secret for secret in secrets if len(secret) >= 3]
        error = click.ClickException(printable(scrub_secrets(str(exc), long_enough, pieces=False)))
        error.exit_code = exc.exit_code
        raise error from exc
    except Exception as exc:
        if debug:
            raise
        text = printable(scrub_secrets(" ".join(str(exc).split()), list(secrets)))
        raise click.ClickException(
            f"unexpected {type(exc).__name__}: {text}; run with --debug for the traceback"
        ) from exc


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="loader")
def cli() -> None:
    """Hybrid search for RAG on OpenSearch: apply the configuration, push documents, search, and
    measure retrieval quality."""


@cli.command(name="settings")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Config file (default: ./loader.toml if present).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def settings_command(config_path: str | None, as_json: bool) -> None:
    """Show every setting, its value and where the value came from (secrets masked)."""
    with handle_errors():
        settings, sources = resolve_settings(config_path=config_path)
    values = settings.public_items()
    if as_json:
        click.echo(
            json.dumps({k: {"value": v, "source": sources[k]} for k, v in values.items()}, indent=2)
        )
        return
    helps = setting_help()
    for name, value in values.items():
        click.echo(printable(f"{name} = {value!r}  [{sources[name]}]"))
        click.echo(f"    {helps[name]}")


@cli.command()
@settings_options
def up(settings: Settings) -> None:
    """Start a local single-node OpenSearch in Docker (idempotent) and print its URL."""
    from loader.cluster.local import start_local

    url = start_local(settings)
    click.echo(printable(url))


@cli.command()
@settings_options
def down(settings: Settings) -> None:
    """Stop and remove the local OpenSearch started by `loader up` (idempotent)."""
    from loader.cluster.local import stop_local

    click.echo("stopped" if stop_local(settings) else "not running")


@cli.command()
@click.option("--dry-run", is_flag=True, help="Print the plan and change nothing.")
@click.option(
    "--delete-old", is_flag=True, help="Delete index versions older than the one the alias ends on."
)
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@settings_options
def apply(settings: Settings, dry_run: bool, delete_old: bool, as_json: bool) -> None:
    """Create or update the index, alias, pipelines and search templates from the config files:
    print the plan, then apply it (idempotent)."""
    from loader.index.apply import apply_config

    plan = apply_config(settings, dry_run=dry_run, delete_old=delete_old)
    if as_json:
        click.echo(json.dumps({**plan.to_dict(), "dry_run": dry_run}, indent=2))
        return
    for line in plan.lines():
        click.echo(printable(line))
    for note in plan.notes:
        click.echo(printable(f"! {note}"))
    suffix = " (dry run: nothing changed)" if dry_run and plan.has_changes else ""
    click.echo(printable(f"{plan.summary()}{suffix}"))


@cli.command()
@click.argument("folder", type=click.Path(file_okay=False))
@click.option(
    "--tenant",
    default=None,
    help="The one tenant of this push: only its chunks of the collection are read, updated or "
    "deleted (default: each file's front matter, else the tenant setting).",
)
@click.option(
    "--collection",
    default=None,
    help="Name scoping this folder's documents in the index (default: folder name).",
)
@click.option(
    "--strategy",
    "chunk_strategy",
    default=None,
    help="Chunking strategy: structure, fixed, recursive, semantic, sentence-window, "
    "parent-document.",
)
@click.option("--keep-removed", is_flag=True, help="Keep chunks of files no longer in the folder.")
@click.option(
    "--dry-run", is_flag=True, help="Print what the push would do; embed and write nothing."
)
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@settings_options
def push(
    settings: Settings,
    folder: str,
    tenant: str | None,
    collection: str | None,
    chunk_strategy: str | None,
    keep_removed: bool,
    dry_run: bool,
    quiet: bool,
    as_json: bool,
) -> None:
    """Chunk, embed and index the documents of FOLDER, keeping the index in sync with it.

    Unchanged documents are neither embedded nor written; changed ones replace exactly their own
    chunks; files removed from the folder lose their chunks. Exit code 8 when any file failed.
    """
    from loader.ingest.sync import push as push_folder

    if chunk_strategy:
        settings = settings.replace(chunk_strategy=chunk_strategy)
    interactive = sys.stderr.isatty() and not (quiet or as_json)
    report = push_folder(
        folder,
        settings,
        collection=collection,
        tenant=tenant,
        keep_removed=keep_removed,
        dry_run=dry_run,
        show_progress=interactive,
        on_event=None if as_json else lambda line: click.echo(printable(line), err=True),
    )
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    elif dry_run and not quiet:
        for line in report.plan or []:
            click.echo(printable(line))
        click.echo(
            f"{printable(report.collection)}: {report.added} to add, {report.updated} to update, "
            f"{report.unchanged} unchanged, {report.deleted} to delete, {report.failed} failed; "
            f"tenant {printable(', '.join(report.tenants))} (dry run: nothing changed)"
        )
    elif not quiet:
        click.echo(
            f"{printable(report.collection)}: {report.added} added, {report.updated} updated, "
            f"{report.unchanged} unchanged, {report.deleted} deleted, {report.failed} failed; "
            f"{report.chunks} chunks ({report.chunks_written} written, {report.chunks_deleted} "
            f"deleted, {report.embedded} embedded, {report.reused_vectors} vectors reused, "
            f"{report.retries} retries) in {report.seconds:.1f} s; "
            f"tenant {printable(', '.join(report.tenants))}"
        )
    if report.failed:
        raise click.exceptions.Exit(PartialFailure.exit_code)


@cli.command()
@click.argument("question")
@click.option(
    "--tenant",
    default=None,
    help="Tenant to search (default: the tenant setting, 'default' unless configured).",
)
@click.option(
    "--mode",
    type=click.Choice(SEARCH_MODES),
    default=None,
    help="Search mode (default: the search_mode setting).",
)
@click.option(
    "--rerank/--no-rerank",
    default=None,
    help="Rerank the candidates with the cross-encoder (reranker_model; it must exist locally). "
    "Default: the rerank setting (on unless LOADER_RERANK=false).",
)
@click.option("--k", "k", type=int, default=None, help="Results to show (default: top_k).")
@click.option(
    "--candidates",
    type=int,
    default=None,
    help="Chunks retrieved before the rerank (default: candidates).",
)
@click.option("--lang", default=None, help="Only chunks in this language (e.g. en).")
@click.option(
    "--tag", "tags", multiple=True, help="Only chunks with this tag (repeat: any of them)."
)
@click.option(
    "--published-from", default=None, help="Only chunks published on or after (2024-01-01, now-1y)."
)
@click.option("--published-to", default=None, help="Only chunks published on or before this date.")
@click.option(
    "--decay-scale", default=None, help="Favour recent chunks: score halved this long ago (180d)."
)
@click.option(
    "--expand",
    type=click.Choice(EXPANSIONS),
    default=None,
    help="Replace each chunk by its parent section or its sentence window.",
)
@click.option("--merge-adjacent", is_flag=True, help="Merge consecutive chunks of one document.")
@click.option("--prompt-order", is_flag=True, help="Best results at the start and the end.")
@click.option("--json", "as_json", is_flag=True, help="Print the full result as JSON.")
@settings_options
def search(
    settings: Settings,
    question: str,
    tenant: str | None,
    mode: str | None,
    rerank: bool | None,
    k: int | None,
    candidates: int | None,
    lang: str | None,
    tags: tuple[str, ...],
    published_from: str | None,
    published_to: str | None,
    decay_scale: str | None,
    expand: str | None,
    merge_adjacent: bool,
    prompt_order: bool,
    as_json: bool,
) -> None:
    """Search the index for QUESTION: ranked chunks with heading path, source and the score and
    rank of each stage (retrieval, rerank), then the latency of each stage.

    The rerank (on unless the rerank setting is false) needs reranker_model to be a CrossEncoder
    available locally (there is no model hub); without one, pass --no-rerank or set
    LOADER_RERANK=false.
    """
    from loader.query.request import SearchFilters, SearchRequest
    from loader.query.result import format_result
    from loader.query.search import search as run_search

    request = SearchRequest.from_settings(
        settings,
        question,
        tenant=settings.tenant if tenant is None else tenant,
        mode=mode,
        rerank=rerank,
        k=k,
        candidates=candidates,
        filters=SearchFilters(
            lang=lang,
            tags=tags,
            published_from=published_from,
            published_to=published_to,
            decay_scale=decay_scale,
        ),
        expand=expand,
        merge_adjacent=merge_adjacent,
        prompt_order=prompt_order,
    )
    result = run_search(request, settings)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
        return
    for line in format_result(result):
        click.echo(printable(line))


@cli.command(name="eval")
@click.argument("dataset", type=click.Path(exists=True))
@click.option(
    "--docs",
    type=click.Path(file_okay=False),
    default=None,
    help="Documents folder a questions file asks about (DATASET is then a .jsonl file).",
)
@click.option("--split", default="test", show_default=True, help="BEIR qrels split.")
@click.option(
    "--mode",
    "modes",
    multiple=True,
    type=click.Choice(["bm25", "vector", "hybrid-rrf", "hybrid-minmax"]),
    help="Search mode; repeat for several (default: all four).",
)
@click.option(
    "--strategy",
    "strategies",
    multiple=True,
    help="Chunking strategy; repeat for several (default: the chunk_strategy setting).",
)
@click.option(
    "--rerank",
    type=click.Choice(["on", "off", "both"]),
    is_flag=False,
    flag_value="on",
    default="off",
    show_default=True,
    help="Rerank with the cross-encoder: --rerank, --rerank both (each mode with and without).",
)
@click.option("--no-rerank", is_flag=True, help="No rerank (the default).")
@click.option(
    "--candidates",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Chunks retrieved per query. Chunks of one document collapse into one result, so "
    "recall@100 sees 100 documents only when this is several times 100.",
)
@click.option(
    "--sweep",
    default=None,
    metavar="SETTING=V1,V2",
    help="Evaluate one setting over values, e.g. chunk_target_tokens=120,180,240 or "
    "bm25_weight=0.2,0.3,0.5.",
)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the first N queries.")
@click.option(
    "--index-prefix",
    default="eval",
    show_default=True,
    help="First part of the eval indices' aliases (<prefix>-<dataset>-<strategy>).",
)
@click.option(
    "--out-dir",
    type=click.Path(file_okay=False),
    default="eval-results",
    show_default=True,
    help="Folder of the JSON, Markdown table, PNG chart and TREC run files.",
)
@click.option(
    "--output",
    type=click.Path(dir_okay=False),
    default=None,
    help="Results JSON file (default: <out-dir>/results.json).",
)
@click.option(
    "--compare",
    "previous",
    type=click.Path(dir_okay=False),
    default=None,
    help="Earlier results JSON: print the deltas; exit 10 when a gated metric dropped.",
)
@click.option(
    "--gate-metric",
    "gate_metrics",
    multiple=True,
    help="Metric the --compare gate checks; repeat (default: ndcg@10, recall@10, recall@100).",
)
@click.option(
    "--threshold",
    type=click.FloatRange(min=0),
    default=0.01,
    show_default=True,
    help="Largest allowed drop of a gated metric (absolute).",
)
@click.option("--no-chart", is_flag=True, help="Do not draw the PNG chart.")
@click.option("--quiet", "-q", is_flag=True, help="No progress or push lines on stderr.")
@click.option("--json", "as_json", is_flag=True, help="Print the results (and comparison) as JSON.")
@settings_options
def eval_command(
    settings: Settings,
    no_rerank: bool,
    no_chart: bool,
    quiet: bool,
    as_json: bool,
    **options: Any,
) -> None:
    """Measure recall@k, MRR@10, nDCG@10 and latency of every mode and strategy on DATASET.

    DATASET is a BEIR folder (corpus.jsonl[.gz], queries.jsonl, qrels/<split>.tsv), or a questions
    file (JSONL: question, source, optional heading_path) with --docs FOLDER. The documents are
    pushed into their own index per strategy (an unchanged re-run embeds nothing). Writes
    results.json, results.md, results.png and one TREC run per configuration into --out-dir.
    With --compare, exit code 10 when a gated metric dropped by more than --threshold.
    """
    from loader.eval.compare import render_comparison
    from loader.eval.report import render_table
    from loader.eval.runner import EvalRequest, run_eval

    if no_rerank:
        options["rerank"] = "off"
    # The other options are named after EvalRequest's fields.
    request = EvalRequest(**options, chart=not no_chart)
    silent = quiet or as_json
    run = run_eval(
        request,
        settings,
        show_progress=sys.stderr.isatty() and not silent,
        on_event=None if silent else lambda line: click.echo(printable(line), err=True),
    )
    if as_json:
        click.echo(json.dumps(run.to_dict(), indent=2))
    else:
        click.echo(printable_lines(render_table(run.report.to_dict())))
        if run.comparison is not None:
            click.echo("")
            click.echo(printable_lines(render_comparison(run.comparison)))
        if not quiet:
            click.echo(f"\nresults: {printable(run.outputs['json'])}", err=True)
    run.check()  # the regression gate: RegressionError, exit code 10


@cli.command()
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to listen on (loopback only)."
)
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@settings_options
def serve(settings: Settings, host: str, port: int) -> None:
    """Serve the search (retrieve, rerank, context) as an HTTP API: POST /search, GET /health,
    GET /openapi.json. Needs `pip install 'loader[serve]'`."""
    try:
        from loader.query.serve import run_server
    except ImportError as exc:
        raise click.ClickException(
            f"loader serve needs fastapi and uvicorn: pip install 'loader[serve]' ({exc})"
        ) from exc
    with handle_errors():
        run_server(settings, host=host, port=port)
