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
from collections.abc import Callable, Iterator
from typing import Any

import click

from loader.errors import LoaderError, PartialFailure
from loader.settings import Settings, resolve_settings, setting_help


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
        with handle_errors(debug):
            settings, _ = resolve_settings(
                config_path=config_path,
                overrides={"opensearch_url": opensearch_url, "index_name": index_name},
            )
            return func(*args, settings=settings, **kwargs)

    return wrapper


@contextlib.contextmanager
def handle_errors(debug: bool = False) -> Iterator[None]:
    """Turn a LoaderError into a ClickException: one line on stderr, the error's exit code."""
    try:
        yield
    except LoaderError as exc:
        if debug:
            raise
        error = click.ClickException(str(exc))
        error.exit_code = exc.exit_code
        raise error from exc


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
        click.echo(f"{name} = {value!r}  [{sources[name]}]")
        click.echo(f"    {helps[name]}")


@cli.command()
@settings_options
def up(settings: Settings) -> None:
    """Start a local single-node OpenSearch in Docker (idempotent) and print its URL."""
    from loader.local import start_local

    url = start_local(settings)
    click.echo(url)


@cli.command()
@settings_options
def down(settings: Settings) -> None:
    """Stop and remove the local OpenSearch started by `loader up` (idempotent)."""
    from loader.local import stop_local

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
    from loader.apply import apply_config

    plan = apply_config(settings, dry_run=dry_run, delete_old=delete_old)
    if as_json:
        click.echo(json.dumps({**plan.to_dict(), "dry_run": dry_run}, indent=2))
        return
    for line in plan.lines():
        click.echo(line)
    for note in plan.notes:
        click.echo(f"! {note}")
    suffix = " (dry run: nothing changed)" if dry_run and plan.has_changes else ""
    click.echo(f"{plan.summary()}{suffix}")


@cli.command()
@click.argument("folder", type=click.Path(file_okay=False))
@click.option("--tenant", default=None, help="Tenant of every document of this push.")
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
    quiet: bool,
    as_json: bool,
) -> None:
    """Chunk, embed and index the documents of FOLDER, keeping the index in sync with it.

    Unchanged documents are neither embedded nor written; changed ones replace exactly their own
    chunks; files removed from the folder lose their chunks. Exit code 8 when any file failed.
    """
    from loader.push import push as push_folder

    if chunk_strategy:
        settings = settings.replace(chunk_strategy=chunk_strategy)
    interactive = sys.stderr.isatty() and not (quiet or as_json)
    report = push_folder(
        folder,
        settings,
        collection=collection,
        tenant=tenant,
        keep_removed=keep_removed,
        show_progress=interactive,
        on_event=None if as_json else lambda line: click.echo(line, err=True),
    )
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    elif not quiet:
        click.echo(
            f"{report.collection}: {report.added} added, {report.updated} updated, "
            f"{report.unchanged} unchanged, {report.deleted} deleted, {report.failed} failed; "
            f"{report.chunks} chunks ({report.chunks_written} written, {report.chunks_deleted} "
            f"deleted, {report.embedded} embedded, {report.reused_vectors} vectors reused, "
            f"{report.retries} retries) in {report.seconds:.1f} s"
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
    type=click.Choice(["bm25", "vector", "hybrid-rrf", "hybrid-minmax"]),
    default=None,
    help="Search mode (default: the search_mode setting).",
)
@click.option(
    "--rerank/--no-rerank",
    default=True,
    show_default=True,
    help="Rerank the candidates with the cross-encoder (reranker_model; it must exist locally).",
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
    type=click.Choice(["parent", "window"]),
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
    rerank: bool,
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

    The default rerank needs reranker_model to be a CrossEncoder available locally (there is no
    model hub); without one, pass --no-rerank.
    """
    from loader.search import SearchFilters, format_result
    from loader.search import search as run_search

    result = run_search(
        question,
        settings,
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
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
        return
    for line in format_result(result):
        click.echo(line)
