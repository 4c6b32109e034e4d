"""`loader judgments`: sample a query set from the query log, and export or import it with its
grades (the judging page of `loader serve` grades it in between)."""

from __future__ import annotations

import click

from loader.cli.common import echo_json, settings_options
from loader.cli.options import json_option, tenant_option
from loader.settings import Settings
from loader.terminal import printable

STRATEGIES = ("frequent", "random", "worst")
FORMATS = ("questions", "srw-query-set", "srw-judgments", "quepid-csv")

set_tenant_option = tenant_option(
    "Tenant whose log and grades these are (default: the tenant setting)."
)
name_option = click.option(
    "--name", required=True, help="Name of the query set (at most 50 characters)."
)
rating_scale_option = click.option(
    "--rating-scale",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="quepid-csv: the file's top rating (Quepid's nDCG scorer grades 0-3: 3; AP 0-1: 1), "
    "mapped to and from the page's 0-2 by the nearest grade.",
)


def _client(settings: Settings):  # noqa: ANN202 - the opensearch-py client
    from loader.cluster.client import connect, require_cluster

    client = connect(settings)
    require_cluster(client, settings)
    return client


@click.group(short_help="Sample, export and import judged query sets.")
def judgments() -> None:
    """A test set from real questions: sample the query log (query_log = "ubi") into a query
    set, grade it at /judge on `loader serve`, export it for `loader eval` or the Search
    Relevance Workbench.

    \b
    Example: from the log to eval
      loader judgments sample --tenant acme --name week-49 --strategy worst --size 50
      (grade at http://127.0.0.1:8000/judge)
      loader judgments export --tenant acme --name week-49 -o week-49.jsonl
      loader eval week-49.jsonl --docs docs/
    """


@judgments.command(short_help="Sample a query set from the query log.")
@name_option
@click.option(
    "--strategy",
    type=click.Choice(STRATEGIES),
    default="frequent",
    show_default=True,
    help="Most asked, random, or worst (no click, a quick follow-up, a low top score).",
)
@click.option("--size", type=click.IntRange(1, 1000), default=50, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of --strategy random.")
@json_option("Print the query set as JSON.")
@settings_options
@set_tenant_option
def sample(
    settings: Settings,
    tenant: str,
    name: str,
    strategy: str,
    size: int,
    seed: int,
    as_json: bool,
) -> None:
    """Sample SIZE distinct questions (deduplicated after normalisation) of one tenant's log."""
    from loader.query.judgments import create_query_set

    query_set = create_query_set(
        _client(settings),
        settings.index_name,
        tenant,
        name,
        strategy=strategy,
        size=size,
        seed=seed,
    )
    if as_json:
        echo_json({"set_id": query_set.set_id, "name": name, "questions": query_set.questions})
        return
    click.echo(
        printable(f"query set {name!r} of tenant {tenant!r}: {len(query_set.questions)} questions")
    )
    for question in query_set.questions:
        click.echo(printable(f"  {question}"))


@judgments.command(name="export", short_help="Write a judged query set to a file.")
@name_option
@click.option(
    "--format",
    "file_format",
    type=click.Choice(FORMATS),
    default="questions",
    show_default=True,
    help="questions: the JSONL `loader eval` reads (grades kept for nDCG); srw-query-set, "
    "srw-judgments: the Search Relevance Workbench's; quepid-csv: Quepid's query,docid,rating.",
)
@click.option("-o", "--output", type=click.Path(dir_okay=False), required=True)
@rating_scale_option
@json_option("Print what was written as JSON.")
@settings_options
@set_tenant_option
def export_command(
    settings: Settings,
    tenant: str,
    name: str,
    file_format: str,
    output: str,
    rating_scale: int,
    as_json: bool,
) -> None:
    """Export query set NAME with its grades."""
    from loader.eval.judgments import export

    client = _client(settings)
    count = export(client, settings.index_name, tenant, name, file_format, output, rating_scale)
    if as_json:
        echo_json({"output": output, "format": file_format, "questions": count})
        return
    click.echo(printable(f"{output}: {count} questions ({file_format})"))


@judgments.command(name="import", short_help="Read a query set (and grades) from a file.")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@name_option
@rating_scale_option
@json_option("Print what was imported as JSON.")
@settings_options
@set_tenant_option
def import_command(
    settings: Settings, path: str, tenant: str, name: str, rating_scale: int, as_json: bool
) -> None:
    """Import PATH (a questions file, an SRW query set, SRW judgments or a Quepid ratings CSV)
    as query set NAME."""
    from loader.eval.judgments import read_judgment_file, store_imported

    imported = read_judgment_file(path, rating_scale)  # a bad file is refused before any request
    client = _client(settings)
    query_set, grades = store_imported(client, settings.index_name, tenant, name, imported)
    if as_json:
        echo_json({"set_id": query_set.set_id, "questions": query_set.questions, "grades": grades})
        return
    click.echo(
        printable(
            f"query set {name!r} of tenant {tenant!r}: {len(query_set.questions)} questions, "
            f"{grades} grades"
        )
    )


@judgments.command(
    name="clicks", short_help="Judgments from the log's clicks (position-corrected)."
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    required=True,
    help="The questions file (JSONL) to write.",
)
@click.option(
    "--min-impressions",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Grade a question's chunk only when shown at least this often.",
)
@click.option(
    "--grade-1-at",
    type=click.FloatRange(0, 1, min_open=True),
    default=0.2,
    show_default=True,
    help="Estimated chance of a click at rank 1 from which a chunk is graded 1.",
)
@click.option(
    "--grade-2-at",
    type=click.FloatRange(0, 1, min_open=True),
    default=0.5,
    show_default=True,
    help="Estimated chance of a click at rank 1 from which a chunk is graded 2.",
)
@json_option("Print what was written as JSON.")
@settings_options
@set_tenant_option
def clicks_command(
    settings: Settings,
    tenant: str,
    output: str,
    min_impressions: int,
    grade_1_at: float,
    grade_2_at: float,
    as_json: bool,
) -> None:
    """Fit a position-based click model (PBM, by EM) to one tenant's logged searches and click
    events, and write graded judgments in the questions format `loader eval` reads, each line
    marked "implicit": true. Clicks are corrected for the rank they were shown at; chunks shown
    fewer than --min-impressions times are not graded, and the output says how many questions
    fell short of it, and by how much. A log with no click, or with no question left to grade,
    writes nothing and exits with code 15 (not enough evidence), saying how far short it fell.

    \b
    Example:
      loader judgments clicks --tenant acme -o clicks.jsonl
      loader eval clicks.jsonl --docs docs/
    """
    from loader.train.click_export import export_click_judgments
    from loader.train.clicks import ClickGrading

    grading = ClickGrading(
        min_impressions=min_impressions, grade_1_at=grade_1_at, grade_2_at=grade_2_at
    )
    summary = export_click_judgments(_client(settings), settings, tenant, output, grading)
    if as_json:
        echo_json(summary.to_dict())
        return
    click.echo(
        printable(
            f"{output}: {summary.questions} questions, {summary.judgments} judgments "
            f"(implicit, {summary.model}) from {summary.searches} searches and "
            f"{summary.clicks} clicks of tenant {tenant!r}"
        )
    )
    examination = " ".join(
        f"{e:.2f}{'' if tied else '*'}"
        for e, tied in zip(summary.examination[:10], summary.identified, strict=False)
    )
    if summary.shortfall.short:
        click.echo(printable(summary.shortfall.line()))
    click.echo(f"examination by rank: {examination}")
    if not all(summary.identified):
        click.echo("  * not told apart from relevance by this log: kept at the guess, 1/rank")
    click.echo(
        f"{summary.varied_pairs} of {summary.pairs} question-chunk pairs were shown at more "
        "than one rank (the evidence that tells position from relevance)"
    )


@judgments.command(short_help="Keep what a query set's searches return now, before a change.")
@name_option
@click.option("--label", required=True, help="What is about to change (at most 120 characters).")
@json_option("Print the snapshot's summary as JSON.")
@settings_options
@set_tenant_option
def snapshot(settings: Settings, tenant: str, name: str, label: str, as_json: bool) -> None:
    """Search every question of query set NAME in every mode (and by the tenant's learned model
    when one is served) and keep each one's top 10 documents as a snapshot, to compare with
    after a change (`loader judgments compare`, or the question list of the judging page)."""
    from loader.eval.set_searches import take_snapshot

    taken = take_snapshot(settings, tenant, name, label, client=_client(settings))
    if as_json:
        echo_json(taken.summary())
        return
    click.echo(
        printable(
            f"snapshot {taken.snapshot_id} of query set {name!r} (tenant {tenant!r}): "
            f"{taken.count} questions, columns {', '.join(taken.columns)}"
        )
    )


@judgments.command(short_help="List a query set's snapshots, newest first.")
@name_option
@json_option("Print the snapshots as JSON.")
@settings_options
@set_tenant_option
def snapshots(settings: Settings, tenant: str, name: str, as_json: bool) -> None:
    """List the snapshots of query set NAME, newest first (the newest 100, as the judging page
    lists them): the id `compare --against` and `delete-snapshot` take, when, by whom, its
    label and its questions.

    \b
    Example:
      loader judgments snapshots --tenant acme --name week-49
    """
    from loader.query.judgments import find_query_set
    from loader.query.snapshots import list_snapshots

    client = _client(settings)
    query_set = find_query_set(client, settings.index_name, tenant, name)
    listed = list_snapshots(client, settings.index_name, tenant, query_set.set_id)
    if as_json:
        echo_json({"set_id": query_set.set_id, "snapshots": [s.summary() for s in listed]})
        return
    if not listed:
        click.echo(printable(f"query set {name!r} (tenant {tenant!r}) has no snapshot"))
    for snapshot in listed:
        rater = f" by {snapshot.rater}" if snapshot.rater else ""
        click.echo(
            printable(
                f"{snapshot.snapshot_id}  {snapshot.timestamp}{rater}  {snapshot.label!r}  "
                f"{snapshot.count} questions"
            )
        )


@judgments.command(name="delete-snapshot", short_help="Delete a snapshot of a query set.")
@click.argument("snapshot_id", metavar="SNAPSHOT")
@name_option
@json_option("Print what was deleted as JSON.")
@settings_options
@set_tenant_option
def delete_snapshot_command(
    settings: Settings, tenant: str, name: str, snapshot_id: str, as_json: bool
) -> None:
    """Delete snapshot SNAPSHOT (the id `loader judgments snapshot` printed) of query set NAME
    for good, as the judging page's "Delete snapshot" does: a set lists only its newest
    snapshots. Exit code 12 when the set has no such snapshot (another tenant's is answered
    alike, and nothing is deleted).

    \b
    Example:
      loader judgments delete-snapshot --tenant acme --name week-49 3f2a9c0d1e4b5a6c7d8e
    """
    from loader.query.judgments import find_query_set
    from loader.query.snapshots import delete_snapshot

    client = _client(settings)
    query_set = find_query_set(client, settings.index_name, tenant, name)
    delete_snapshot(client, settings.index_name, tenant, query_set.set_id, snapshot_id)
    if as_json:
        echo_json({"snapshot": snapshot_id, "set_id": query_set.set_id, "deleted": True})
        return
    click.echo(
        printable(f"snapshot {snapshot_id} of query set {name!r} (tenant {tenant!r}) deleted")
    )


@judgments.command(short_help="A query set's searches now against a snapshot; a gate.")
@name_option
@click.option(
    "--against",
    "snapshot_id",
    default="",
    help="The snapshot's id (default: the set's newest).",
)
@click.option(
    "--threshold",
    type=click.FloatRange(0, 1),
    default=0.01,
    show_default=True,
    help="Exit code 10 when the served column's mean nDCG@10 dropped by more.",
)
@json_option("Print the comparison as JSON.")
@settings_options
@set_tenant_option
def compare(
    settings: Settings,
    tenant: str,
    name: str,
    snapshot_id: str,
    threshold: float,
    as_json: bool,
) -> None:
    """Search query set NAME again and score both the snapshot's rankings and today's with
    today's grades, so a change is the searches', not grades given since. Exit code 10 when the
    column served (the learned model's when one reranks the tenant's searches, else
    search_mode) lost more than --threshold of mean nDCG@10; 7 when no graded question
    compared it."""
    from loader.eval.set_searches import check_served_column, compare_with_snapshot
    from loader.eval.snapshot_scores import comparison_lines

    client = _client(settings)
    result = compare_with_snapshot(settings, tenant, name, snapshot_id, client=client)
    if as_json:
        echo_json(result)
    else:
        for line in comparison_lines(result):
            click.echo(printable(line))
    check_served_column(result, threshold)


@judgments.command(name="try", short_help="Score other fusion settings on a judged set, unapplied.")
@name_option
@click.option(
    "--set",
    "assignments",
    multiple=True,
    metavar="NAME=VALUE",
    help="A fusion setting to try (search_mode, rrf_rank_constant, rrf_bm25_weight, bm25_weight, "
    "second_reader_share, exact_weight); repeat for several.",
)
@click.option(
    "--sweep",
    metavar="NAME=V1,V2,...",
    help="Try each of 2 to 10 values of one of those settings (the --set ones held fixed): the "
    "lists are searched once; the best value's trial is shown.",
)
@json_option("Print the trial as JSON.")
@settings_options
@set_tenant_option
def try_command(
    settings: Settings,
    tenant: str,
    name: str,
    assignments: tuple[str, ...],
    sweep: str | None,
    as_json: bool,
) -> None:
    """Fuse each graded question of query set NAME again with other fusion settings and score
    it with the set's grades beside the fusion served now: per question nDCG@10 now and tried,
    the means, and the loader.toml lines that would apply it. Nothing is applied; each
    question's sub-query lists are searched once. Exit code 2 for a setting that cannot be
    tried (the index's, the chunks', the model's) or a bad value.

    \b
    Example:
      loader judgments try --tenant acme --name week-49 --set rrf_bm25_weight=0.4 \\
        --set rrf_rank_constant=20
      loader judgments try --tenant acme --name week-49 --sweep rrf_bm25_weight=0.3,0.5,0.7
    """
    from loader.eval.trial_searches import try_settings
    from loader.eval.trials import sweep_lines, trial_from_options, trial_lines

    trial, swept = trial_from_options(assignments, sweep)  # checked before the cluster is asked
    result = try_settings(settings, tenant, name, trial, client=_client(settings), sweep=swept)
    if as_json:
        echo_json(result)
        return
    for line in [*(sweep_lines(result) if swept else []), *trial_lines(result)]:
        click.echo(printable(line))
