"""`loader learn`: train the learned reranker from judged questions (``loader.train.learn``)."""

from __future__ import annotations

from pathlib import Path

import click

from loader.cli.common import check_index_prefix_option, echo_json, settings_options
from loader.cli.options import json_option, mode_option, quiet_option, tenant_option
from loader.errors import ModelRejectedError
from loader.settings import Settings
from loader.terminal import printable, show_progress
from loader.train import defaults
from loader.train.defaults import LEARN_BASE_MODES as BASE_MODES


@click.command(short_help="Train the learned reranker from judged questions, kept if it helps.")
@click.argument("sources", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="Folder of the learned rerankers, one model folder per tenant (default: the "
    "learned_reranker setting): the model goes to <out>/<tenant>/, written only when it beats "
    "the current search, retrained in place.",
)
@click.option(
    "--split",
    default="train",
    show_default=True,
    help="The BEIR folders' qrels file (qrels/<split>.tsv) to learn from.",
)
@click.option(
    "--test-split",
    default=defaults.TEST_SPLIT,
    show_default=True,
    help="The split eval measures: refused as --split.",
)
@click.option(
    "--index-prefix",
    default="eval",
    callback=check_index_prefix_option,
    show_default=True,
    help="First part of the index `loader eval` built for a BEIR folder "
    "(<prefix>-<dataset>-<strategy>).",
)
@mode_option(
    "The search whose candidates the model reranks (default: the one of "
    f"{', '.join(BASE_MODES)} the model scores best over, by cross-validation)."
)
@click.option(
    "--candidates",
    type=int,
    default=50,
    show_default=True,
    help="Candidates per question the model learns from, and reranks when it is on.",
)
@click.option(
    "--folds",
    type=int,
    default=5,
    show_default=True,
    help="Cross-validation folds (whole questions) that judge the model against the current "
    "search.",
)
@click.option(
    "--max-questions",
    type=int,
    default=None,
    help="Questions at most, a seeded sample (10 to 10,000; for a learning curve or a larger "
    "set; default: all, refused above 10,000).",
)
@click.option(
    "--implicit-weight",
    type=float,
    default=0.5,
    show_default=True,
    help='Sample weight of click-derived questions ("implicit": true); explicit grades weigh 1.',
)
@click.option("--rounds", type=int, default=300, show_default=True, help="Boosting rounds.")
@click.option("--seed", type=int, default=0, show_default=True, help="Sampling, folds, model.")
@quiet_option()
@json_option("Print the result as JSON.")
@settings_options
@tenant_option(
    "Whose index questions files are searched as (default: the tenant setting); a BEIR "
    "folder's are its eval index's (tenant eval)."
)
def learn(
    settings: Settings,
    sources: tuple[Path, ...],
    out: Path | None,
    split: str,
    test_split: str,
    tenant: str,
    index_prefix: str,
    mode: str | None,
    candidates: int,
    folds: int,
    max_questions: int | None,
    implicit_weight: float,
    rounds: int,
    seed: int,
    quiet: bool,
    as_json: bool,
) -> None:
    """Train a learned reranker (LambdaMART, LightGBM) from judged questions: SOURCES are BEIR
    folders (their qrels/<split>.tsv, searched in the index `loader eval` built for them) and
    questions files (`loader judgments export --format questions`, or click-derived ones with
    "implicit": true on each line).

    A questions file is read once and every line checked before anything is searched; a line
    naming another tenant than --tenant is refused, and identical lines count once. It takes at
    least 10 distinct judged questions, and searches at most 10,000 (--max-questions samples).

    The model is one tenant's: the tenant the sources are searched as (--tenant; a BEIR
    folder's, eval), and it reranks only that tenant's searches. Each question is searched as
    `loader search` would, in each of the base modes (or --mode: then in that one alone), and
    the model learns from its candidates' features, close to the fused order. The base is the
    mode whose model scores best by cross-validation (each question scored by a model trained
    without it; three bases cost 3 x --folds trainings); the model records it and the
    candidates it learnt from, and the searches it reranks use them. It is written to
    <out>/<tenant>/ only when its cross-validated nDCG@10 beats the search served now (the
    tenant's model already there, else fusion), with the one-sided 90 % lower bound of the gain
    (the 10th percentile of paired-bootstrap means) above zero; the model written is trained on
    every question. Otherwise nothing is written, the one line on stderr says what the guard
    measured and to judge more questions, and the exit code is 14. Then set learned_reranker =
    "<out>" (guide/rerank.md).

    Exit codes: 0 kept; 2 a bad source or option (the message names the file and line, or the
    option, or a source's missing index); 3 OpenSearch failed; 4 OpenSearch refused the
    credentials; 6 the embedding model failed; 14 the guard refused the model.
    """
    from loader.train.learn import LearnRequest
    from loader.train.learn import learn as learn_reranker

    request = LearnRequest(
        sources=sources,
        out=out,
        split=split,
        test_split=test_split,
        tenant=tenant,
        index_prefix=index_prefix,
        mode=mode,
        candidates=candidates,
        folds=folds,
        max_questions=max_questions,
        implicit_weight=implicit_weight,
        seed=seed,
        rounds=rounds,
    )
    progress = show_progress(quiet, as_json)
    result = learn_reranker(
        request,
        settings,
        on_event=(lambda line: click.echo(printable(line), err=True)) if progress else None,
    )
    if as_json:
        echo_json(result.to_dict(), indent=2)
    if not result.adopted:  # its one line on stderr, by the error handler
        raise ModelRejectedError(result.reason)
    if not as_json:
        click.echo(printable(result.reason))
        root = Path(result.out).parent
        click.echo(
            printable(
                f"learned reranker of tenant {result.provenance['model']['tenant']!r}: "
                f'{result.out}; use it with learned_reranker = "{root}"'
            )
        )
