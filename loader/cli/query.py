"""`loader search` and `loader serve`: the query path on the command line and over HTTP."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click

from loader.cli.common import echo_json, handle_errors, settings_options
from loader.cli.options import RERANKERS, json_option, k_option, mode_option, tenant_option
from loader.settings import (
    EXPANSIONS,
    REWRITE_CHOICES,
    REWRITE_MODES,
    Settings,
)
from loader.terminal import printable


def rewrite_options(func: Callable) -> Callable:
    """--rewrite and --rewrite-mode: override those settings for this command (the endpoint and
    its key come from the settings only, so a key never sits on a command line)."""

    @click.option(
        "--rewrite",
        type=click.Choice(REWRITE_CHOICES),
        default=None,
        help="Rewrite follow-ups: llm (rewrite_url), concat (no model) or off "
        "(default: the rewrite setting).",
    )
    @click.option(
        "--rewrite-mode",
        type=click.Choice(REWRITE_MODES),
        default=None,
        help="What the llm rewriter writes (default: the rewrite_mode setting).",
    )
    @functools.wraps(func)
    def wrapper(
        *args: Any, settings: Settings, rewrite: str | None, rewrite_mode: str | None, **kwargs: Any
    ) -> Any:
        given = {"rewrite": rewrite, "rewrite_mode": rewrite_mode}
        changes = {name: value for name, value in given.items() if value is not None}
        return func(*args, settings=settings.replace(**changes), **kwargs)

    return wrapper


FILTER_OPTIONS = ("lang", "tags", "published_from", "published_to", "decay_scale")


@click.command(short_help="Search the index: ranked chunks with their sources.")
@click.argument("question")
@mode_option(
    "Search mode (default: the search_mode setting; the mode a learned model learnt on, when "
    "it reranks)."
)
@click.option(
    "--rerank/--no-rerank",
    default=None,
    help=f"Rerank the candidates with the reranker the settings choose: {RERANKERS} (default: "
    "the rerank setting; auto: when one is on this machine, else a warning). --rerank without "
    "one is an error (exit code 6).",
)
@k_option("Results to show (default: top_k).")
@click.option(
    "--candidates",
    type=int,
    default=None,
    help="Chunks retrieved before the rerank (default: candidates; the depth a learned model "
    "learnt at, when it reranks).",
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
@click.option(
    "--one-per-document", is_flag=True, help="At most one result per document (its best chunk)."
)
@click.option(
    "--exact/--no-exact",
    "exact_match",
    default=None,
    help="Rank chunks holding the question's identifiers (R-2207, 44821, quoted strings) "
    "first (default: the exact_match setting, on).",
)
@click.option(
    "--history",
    "history_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="JSON file of the earlier turns ([{role, content}]): QUESTION is a follow-up to them.",
)
@json_option("Print the full result as JSON.")
@settings_options
@tenant_option(
    "Tenant to search (default: the tenant setting, 'default' unless configured).",
    check=False,  # SearchRequest checks it: as JSON with --json
)
@rewrite_options
def search(
    settings: Settings,
    question: str,
    history_file: str | None,
    as_json: bool,
    **options: Any,
) -> None:
    """Search the index for QUESTION: ranked chunks with heading path, source and the score and
    rank of each stage (retrieval, rerank), then the latency of each stage.

    The rerank is a cross-encoder (reranker_model: a CrossEncoder on this machine, there is no
    model hub), the learned model learned_reranker names (`loader learn`), or the keyword
    reranker (rerank_backend = keyword): with the rerank setting auto (the default) the search
    reranks when one is here, and says on stderr (and in --json's warnings) when none is.
    --json's reranker names the one that ran (kind and model), or is null with rerank_skipped
    saying why. With --history, the rewrite setting decides how the follow-up is searched
    (concat by default; queries: shows what was).
    """
    from loader.query.conversation import load_history
    from loader.query.request import SearchFilters, SearchRequest
    from loader.query.result import format_result
    from loader.query.search import search as run_search

    filters = SearchFilters(**{name: options.pop(name) for name in FILTER_OPTIONS})
    request = SearchRequest.from_settings(
        settings,
        question,
        filters=filters,
        history=load_history(history_file) if history_file else (),
        **options,  # the options are named like SearchRequest's fields
    )
    result = run_search(request, settings)
    if as_json:
        echo_json(result.to_dict(), indent=2, ensure_ascii=False)
        return
    for warning in result.warnings:  # on stderr: stdout stays the result
        click.echo(printable(f"warning: {warning}"), err=True)
    for line in format_result(result, warnings=False):
        click.echo(printable(line))


@click.command(short_help="Serve the search as an HTTP API.")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; loopback by default, as without api_keys_file anyone who reaches "
    "the port can search every tenant.",
)
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=8000,
    show_default=True,
    help="Port to listen on.",
)
@settings_options
def serve(settings: Settings, host: str, port: int) -> None:
    """Serve the search (retrieve, rerank, context) as an HTTP API: POST /search, GET /health,
    GET /openapi.json. Needs `pip install 'loader[serve]'`.

    The rerank is the one the settings choose: a cross-encoder (reranker_model), the learned
    model learned_reranker names (`loader learn`), or the keyword reranker (rerank_backend =
    keyword). Each /search answer's reranker names the one that ran
    (kind and model), or is null with rerank_skipped saying why."""
    try:
        from loader.serve.app import run_server
    except ImportError as exc:
        raise click.ClickException(
            f"loader serve needs fastapi and uvicorn: pip install 'loader[serve]' ({exc})"
        ) from exc
    with handle_errors():
        run_server(settings, host=host, port=port)
