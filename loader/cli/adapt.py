"""`loader adapt`: fine-tune the embedding model on pairs mined from the indexed corpus."""

from __future__ import annotations

from pathlib import Path

import click

from loader.cli.common import echo_json, settings_options
from loader.cli.finetune import training_options
from loader.cli.options import json_option, quiet_option, tenant_option
from loader.settings import Settings
from loader.terminal import printable, show_progress
from loader.train import defaults


@click.command(short_help="Adapt the embedding model to the indexed corpus, no questions needed.")
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    required=True,
    help="New folder for the adapted model (written only when it beats the stock model).",
)
@click.option(
    "--held-out",
    type=float,
    default=defaults.HELD_OUT_SHARE,
    show_default=True,
    help="Share of the documents whose pairs are held aside to judge the adapted model.",
)
@click.option(
    "--min-gain",
    type=float,
    default=defaults.MIN_GAIN,
    show_default=True,
    help="Held-out MRR@10 the adapted model must gain over the stock one (with 95 % confidence).",
)
@click.option(
    "--max-pairs",
    type=int,
    default=defaults.MAX_PAIRS,
    show_default=True,
    help="Training pairs at most.",
)
@click.option(
    "--negatives",
    type=int,
    default=defaults.ADAPT_NEGATIVES,
    show_default=True,
    help="Hard negatives per pair.",
)
@click.option(
    "--negative-margin",
    type=float,
    default=defaults.NEGATIVE_MARGIN,
    show_default=True,
    help="Skip a nearest chunk the stock model scores within this share of the pair's own "
    "passage (likely another right answer, not a wrong one).",
)
@click.option(
    "--mix",
    type=float,
    default=defaults.MIX,
    show_default=True,
    help="Share of the trained weights in the saved model, the rest the stock model's "
    "(WiSE-FT; 1: the trained model as is).",
)
@click.option(
    "--judged",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The tenant's judged questions (a questions file: `loader judgments export`, or eval's): "
    "the adapted model is judged on them instead of the held-out pairs.",
)
@training_options(max_tokens=defaults.ADAPT_MAX_TOKENS)
@click.option(
    "--seed", type=int, default=defaults.SEED, show_default=True, help="Sampling and shuffling."
)
@quiet_option()
@json_option("Print the result as JSON.")
@settings_options
@tenant_option(
    "Whose chunks to learn from (default: the tenant setting); pairs and negatives never cross "
    "tenants."
)
def adapt(
    settings: Settings,
    out: Path,
    tenant: str,
    held_out: float,
    min_gain: float,
    max_pairs: int,
    negatives: int,
    negative_margin: float,
    mix: float,
    judged: Path | None,
    epochs: int,
    learning_rate: float,
    batch_size: int,
    max_tokens: int,
    seed: int,
    quiet: bool,
    as_json: bool,
) -> None:
    """Fine-tune the configured embedding model on the tenant's indexed chunks, with no judged
    questions: heading and section, title and body, a sentence and its chunk without it, with the
    index's nearest other chunks as negatives (less those scored nearly as high as the pair's own
    passage), with the model's own instructions and temperature.

    Whole documents' pairs are held aside; the adapted model is written to --out only when it
    ranks them better than the stock model, and no kind of pair worse (with --judged, the
    tenant's judged questions instead). Then set embedding_model = "<out>": `loader apply`
    plans a new index version, `loader push` fills it. Needs the torch extra.
    """
    from loader.train.adapt import AdaptRequest, adapt_embedder
    from loader.train.trainer import FineTuneOptions

    request = AdaptRequest(
        out=out,
        tenant=tenant,
        held_out_share=held_out,
        max_pairs=max_pairs,
        negatives=negatives,
        negative_margin=negative_margin,
        min_gain=min_gain,
        mix=mix,
        seed=seed,
        judged=judged,
        options=FineTuneOptions(
            epochs, learning_rate, batch_size, max_tokens=max_tokens, seed=seed
        ),
    )
    progress = show_progress(quiet, as_json)
    result = adapt_embedder(
        request,
        settings,
        on_event=(lambda line: click.echo(printable(line), err=True)) if progress else None,
    )
    if as_json:
        echo_json(result.to_dict(), indent=2)
        return
    pairs = ", ".join(f"{count} {kind}" for kind, count in result.pairs.items())
    click.echo(
        printable(
            f"pairs mined: {pairs}; trained on {result.trained_on} in {result.seconds:.0f} s "
            f"({result.without_negatives} with no hard negative: every nearest chunk of another "
            "document scored within --negative-margin of the pair's own passage)"
        )
    )
    click.echo(printable(result.reason))
    for kind, figures in result.kinds.items():
        click.echo(
            printable(
                f"  {kind}: {figures['queries']} queries, MRR@10 {figures['stock_mrr']:.4f} stock, "
                f"{figures['adapted_mrr']:.4f} adapted"
            )
        )
    if result.adopted:
        click.echo(
            printable(f'adapted model: {result.out}; use it with embedding_model = "{result.out}"')
        )
    else:
        click.echo("nothing written: the stock model stays")
