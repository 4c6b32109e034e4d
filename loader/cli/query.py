"""`loader search` and `loader serve`: the query path on the command line and over HTTP."""

from __future__ import annotations

import json

import click

from loader.cli.common import handle_errors, settings_options
from loader.query.request import EXPANSIONS
from loader.settings import (
    SEARCH_MODES,
    Settings,
)
from loader.terminal import printable


@click.command()
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


@click.command()
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
