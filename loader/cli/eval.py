"""`loader eval`: retrieval quality per mode and strategy, with a regression gate."""

from __future__ import annotations

import sys
from typing import Any, NamedTuple, TextIO

import click

from loader.cli.common import check_index_prefix_option, echo_json, settings_options
from loader.cli.options import RERANKERS, json_option, mode_option, quiet_option, tenant_option
from loader.eval.configs import RERANK_CHOICES
from loader.settings import (
    CHUNK_STRATEGIES,
    Settings,
)
from loader.terminal import printable, printable_lines
from loader.terminal import show_progress as terminal_progress


@click.command(name="eval", short_help="Measure recall, MRR, nDCG and latency on a dataset.")
@click.argument("dataset", type=click.Path(exists=True))
@click.option(
    "--docs",
    type=click.Path(file_okay=False),
    default=None,
    help="Documents folder a questions file asks about (DATASET is then a .jsonl file).",
)
@tenant_option(
    "Whose documents in --docs the questions are judged on: pushed and searched under it, "
    "other tenants' documents (by their front matter) left out (default: the tenant the "
    "questions file names, as `loader judgments export` writes it, else the tenant setting).",
    resolve=False,
)
@click.option("--split", default="test", show_default=True, help="BEIR qrels split.")
@mode_option("Search mode; repeat for several (default: every mode).", multiple=True)
@click.option(
    "--strategy",
    "strategies",
    multiple=True,
    type=click.Choice(CHUNK_STRATEGIES),
    help="Chunking strategy; repeat for several (default: the chunk_strategy setting).",
)
@click.option(
    "--rerank",
    type=click.Choice(list(RERANK_CHOICES)),
    is_flag=False,
    flag_value="on",
    default=None,
    help=f"Rerank with the reranker the settings choose ({RERANKERS}): --rerank, --rerank both "
    "(each mode with and without). Default: the rerank setting (auto: when one is on this "
    "machine). results.md names the one that ran, or why none did.",
)
@click.option("--no-rerank", is_flag=True, help="No rerank.")
@click.option(
    "--candidates",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Documents retrieved per query: each sub-query retrieves 3 x as many chunks, collapsed "
    "on doc_id, so recall@100 counts 100 documents.",
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
    callback=check_index_prefix_option,
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
    help="Earlier results JSON: print the deltas; exit 10 when a gated metric dropped, 7 when "
    "no gated metric could be compared.",
)
@click.option(
    "--gate-metric",
    "gate_metrics",
    multiple=True,
    help="Metric the --compare gate checks; repeat (default: ndcg@10, recall@10, recall@100). "
    "--tune: the first is the objective (default: ndcg@10).",
)
@click.option(
    "--threshold",
    type=click.FloatRange(min=0),
    default=0.01,
    show_default=True,
    help="Largest allowed drop of a gated metric (absolute).",
)
@click.option(
    "--tune",
    is_flag=True,
    help="Search the settings that matter on the --train-split, within --budget configurations, "
    "then compare the winner with the current settings on --split.",
)
@click.option(
    "--budget",
    type=click.IntRange(min=1),
    default=12,
    show_default=True,
    help="--tune: configurations measured on the train split at most.",
)
@click.option("--train-split", default="train", show_default=True, help="--tune: split tuned on.")
@click.option(
    "--space",
    multiple=True,
    metavar="SETTING=V1,V2",
    help="--tune: the values to try for a setting; repeat (default: mode, rrf_rank_constant, "
    "bm25_weight, keyword_rerank_weight with the keyword reranker, candidates, chunk strategy, "
    "target tokens, overlap).",
)
@click.option(
    "--write", is_flag=True, help="--tune: write the winning values into loader.toml (diff first)."
)
@click.option("--no-chart", is_flag=True, help="Do not draw the PNG chart.")
@quiet_option("No progress or push lines on stderr.")
@json_option("Print the results (and comparison) as JSON.")
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
    pushed into their own index per strategy (an unchanged re-run embeds nothing). Judged
    documents that are not in the corpus are named: more than half of them is an error (exit 2).
    Writes results.json, results.md, results.png and one TREC run per configuration into
    --out-dir. With --compare, exit code 10 when a gated metric dropped by more than --threshold.
    Progress goes to stderr when it is a terminal, with --json too (not with --quiet).
    """
    from loader.eval.compare import render_comparison
    from loader.eval.report import render_table
    from loader.eval.runner import EvalRequest, run_eval

    tune_options = {name: options.pop(name) for name in ("budget", "train_split", "space", "write")}
    progress = show_progress(quiet, as_json)
    if options.pop("tune"):
        _tune(settings, options, tune_options, not progress.lines, as_json)
        return
    if no_rerank:
        options["rerank"] = "off"
    # The other options are named after EvalRequest's fields.
    request = EvalRequest(**options, chart=not no_chart)
    run = run_eval(
        request,
        settings,
        show_progress=progress.bars,
        on_event=(lambda line: click.echo(printable(line), err=True)) if progress.lines else None,
    )
    if as_json:
        echo_json(run.to_dict(), indent=2)
    else:
        click.echo(printable_lines(render_table(run.report.to_dict())))
        if run.comparison is not None:
            click.echo("")
            click.echo(printable_lines(render_comparison(run.comparison)))
        if not quiet:
            click.echo(f"\nresults: {printable(run.outputs['json'])}", err=True)
    run.check()  # the regression gate: RegressionError, exit code 10


def _tune(
    settings: Settings, options: dict[str, Any], tune: dict[str, Any], silent: bool, as_json: bool
) -> None:
    """`loader eval --tune`: tune, print the tables, show (and with --write make) the change."""
    from loader.eval.tune import TuneRequest, render_tune, toml_change, tune_settings, write_winner

    request = TuneRequest(
        options["dataset"],
        train_split=tune["train_split"],
        test_split=options["split"],
        budget=tune["budget"],
        metric=(options["gate_metrics"] or ("ndcg@10",))[0],
        space=tune["space"],
        limit=options["limit"],
        index_prefix=options["index_prefix"],
    )
    notify = None if silent else (lambda line: click.echo(printable(line), err=True))
    result = tune_settings(request, settings, on_event=notify)
    config_path = click.get_current_context().params.get("config_path")
    if tune["write"]:
        path, diff = write_winner(result, config_path)
    else:
        path, _after, diff = toml_change(result, config_path)
    if as_json:
        payload = {**result.to_dict(), "diff": diff, "written": bool(tune["write"] and diff)}
        echo_json(payload, indent=2)
        return
    click.echo(printable_lines(render_tune(result)))
    click.echo("")
    for line in diff or [f"{path}: the current settings won; nothing to write"]:
        click.echo(printable(line))
    if diff:
        click.echo(
            printable(f"{'written to' if tune['write'] else 'not written (add --write):'} {path}")
        )


class Progress(NamedTuple):
    """What `loader eval` shows on stderr while it works: tqdm bars, and a line per step."""

    bars: bool
    lines: bool


def show_progress(quiet: bool, as_json: bool, stderr: TextIO | None = None) -> Progress:
    """Progress on stderr: the step lines (pushes, rows) as every long command decides
    (``loader.terminal.show_progress``: with ``--json`` only on a terminal), and tqdm's bars only
    on a terminal. ``--quiet`` shows none."""
    stream = sys.stderr if stderr is None else stderr
    lines = terminal_progress(quiet, as_json, stream)
    return Progress(bars=lines and stream.isatty(), lines=lines)
