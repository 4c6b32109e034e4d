"""`loader explain`: where a question's expected document was found, fused, reranked or cut."""

from __future__ import annotations

import click

from loader.cli.common import echo_json, settings_options
from loader.cli.options import RERANKERS, json_option, k_option, mode_option, tenant_option
from loader.settings import Settings
from loader.terminal import printable


@click.command(short_help="Show where a question's expected document ranks, stage by stage.")
@click.argument("question")
@click.option(
    "--expect",
    default=None,
    metavar="SOURCE[#HEADING PATH]",
    help="The document (or section: refunds.md#Refund policy > Late deliveries) that should be "
    "found. A '#' may also be part of the file name or a heading (C#-guide.md#Using C#): the "
    "source is the longest leading part (the whole text, or up to a '#') that names a document "
    "indexed for the tenant, else for another tenant, else the part before the first '#'. "
    "Without --expect, the top results are explained.",
)
@mode_option(
    "Search mode (default: the search_mode setting; the mode a learned model learnt on, when "
    "it reranks)."
)
@k_option("Results kept (default: top_k).")
@click.option(
    "--candidates",
    type=int,
    default=None,
    help="Depth of the BM25, vector and fused lists (default: candidates; the depth a learned "
    "model learnt at, when it reranks).",
)
@click.option(
    "--rerank/--no-rerank",
    default=None,
    help=f"Explain the rerank stage too, by the reranker the settings choose: {RERANKERS} "
    "(default: the rerank setting; auto: when one is on this machine, else a note says why "
    "not). --rerank without one is an error.",
)
@click.option("--lang", default=None, help="Only chunks in this language.")
@click.option("--tag", "tags", multiple=True, help="Only chunks with this tag (repeat: any).")
@click.option("--published-from", default=None, help="Only chunks published on or after.")
@click.option("--published-to", default=None, help="Only chunks published on or before.")
@json_option("Print the explanation as JSON.")
@settings_options
@tenant_option(
    "Tenant to search (default: the tenant setting).",
    check=False,  # SearchRequest checks it: as JSON with --json
)
def explain(
    settings: Settings,
    question: str,
    expect: str | None,
    tenant: str,
    mode: str | None,
    k: int | None,
    candidates: int | None,
    rerank: bool | None,
    lang: str | None,
    tags: tuple[str, ...],
    published_from: str | None,
    published_to: str | None,
    as_json: bool,
) -> None:
    """Explain how QUESTION ranks the --expect document at each stage: its best chunk and rank in
    the BM25 list, the vector list, after fusion (each side's share of the fused score), after
    the rerank and in the context, and where it was cut (candidates, k, a filter, the tenant, or
    not indexed at all). Plain words first, numbers after."""
    from loader.query.explain import explain as run_explain
    from loader.query.explanation import format_report
    from loader.query.request import SearchFilters, SearchRequest

    request = SearchRequest.from_settings(
        settings,
        question,
        tenant=tenant,
        mode=mode,
        rerank=rerank,
        k=k,
        candidates=candidates,
        filters=SearchFilters(
            lang=lang, tags=tags, published_from=published_from, published_to=published_to
        ),
    )
    report = run_explain(request, settings, expect=expect)
    if as_json:
        echo_json(report.to_dict(), indent=2, ensure_ascii=False)
        return
    for line in format_report(report):
        click.echo(printable(line))
