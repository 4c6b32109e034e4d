"""`loader fine-tune`: train the embedding model on a BEIR dataset's judged train questions."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import click

from loader.cli.common import check_index_prefix_option, echo_json, settings_options
from loader.cli.options import json_option, quiet_option
from loader.settings import Settings
from loader.terminal import printable, show_progress
from loader.train import defaults


def training_options(max_tokens: int = defaults.MAX_TOKENS) -> Callable[[Callable], Callable]:
    """--epochs, --learning-rate, --batch-size and --max-tokens: how `fine-tune` and `adapt`
    train (one trainer, ``loader.train.trainer``); ``max_tokens`` is the default cut."""

    def decorate(func: Callable) -> Callable:
        for option in reversed(
            [
                click.option(
                    "--epochs",
                    type=int,
                    default=defaults.EPOCHS,
                    show_default=True,
                    help="Passes over the examples.",
                ),
                click.option(
                    "--learning-rate",
                    type=float,
                    default=defaults.LEARNING_RATE,
                    show_default=True,
                    help="AdamW learning rate.",
                ),
                click.option(
                    "--batch-size",
                    type=int,
                    default=defaults.BATCH_SIZE,
                    show_default=True,
                    help="Examples per step; the others in a batch are each one's extra negatives.",
                ),
                click.option(
                    "--max-tokens",
                    type=int,
                    default=max_tokens,
                    show_default=True,
                    help="Cut while training.",
                ),
            ]
        ):
            func = option(func)
        return func

    return decorate


@click.command(name="fine-tune", short_help="Train the embedding model on judged questions.")
@click.argument("dataset", type=click.Path(exists=True, file_okay=False))
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    required=True,
    help="New folder for the trained model (a sentence-transformers folder).",
)
@click.option(
    "--split", default=defaults.SPLIT, show_default=True, help="qrels split to learn from."
)
@click.option(
    "--test-split",
    default=defaults.TEST_SPLIT,
    show_default=True,
    help="The split eval measures: refused.",
)
@training_options()
@click.option(
    "--negatives",
    type=int,
    default=defaults.FINE_TUNE_NEGATIVES,
    show_default=True,
    help="Hard ones per question.",
)
@click.option(
    "--candidates",
    type=int,
    default=defaults.CANDIDATES,
    show_default=True,
    help="Chunks searched per question.",
)
@click.option(
    "--limit", type=click.IntRange(min=1), default=None, help="Only the first N questions."
)
@click.option(
    "--index-prefix",
    default=defaults.INDEX_PREFIX,
    callback=check_index_prefix_option,
    show_default=True,
    help="Prefix of the eval index the examples are mined from (reused when it exists).",
)
@quiet_option()
@json_option("Print the result as JSON.")
@settings_options
def fine_tune_command(
    settings: Settings,
    dataset: str,
    out: Path,
    split: str,
    test_split: str,
    epochs: int,
    learning_rate: float,
    batch_size: int,
    max_tokens: int,
    negatives: int,
    candidates: int,
    limit: int | None,
    index_prefix: str,
    quiet: bool,
    as_json: bool,
) -> None:
    """Fine-tune the configured embedding model on DATASET's judged --split questions.

    Examples are mined from the index `loader eval` pushes DATASET into (the vector side's
    hard negatives, each relevant document's closest chunk) and the model is saved to --out.
    Measure it with `loader eval` and the setting embedding_model = "<out>".
    """
    from loader.train.finetune import FineTuneRequest, fine_tune_embedder
    from loader.train.trainer import FineTuneOptions

    request = FineTuneRequest(
        dataset,
        out,
        split=split,
        test_split=test_split,
        candidates=candidates,
        negatives=negatives,
        limit=limit,
        index_prefix=index_prefix,
        options=FineTuneOptions(epochs, learning_rate, batch_size, max_tokens=max_tokens),
    )
    progress = show_progress(quiet, as_json)
    result = fine_tune_embedder(
        request,
        settings,
        show_progress=progress and sys.stderr.isatty(),  # a bar only where it redraws
        on_event=(lambda line: click.echo(printable(line), err=True)) if progress else None,
    )
    summary = {
        "out": str(result.out),
        "examples": result.examples,
        "steps": result.steps,
        "epoch_losses": [round(loss, 4) for loss in result.epoch_losses],
        "seconds": round(result.seconds, 1),
    }
    if as_json:
        echo_json(summary, indent=2)
        return
    click.echo(
        printable(
            f"trained on {result.examples} examples in {result.steps} steps "
            f"({result.seconds:.0f} s; mean loss per epoch "
            f"{', '.join(f'{loss:.3f}' for loss in result.epoch_losses)}): {result.out}"
        )
    )
    click.echo(
        printable(f'measure it: loader eval {dataset} with embedding_model = "{result.out}"')
    )
