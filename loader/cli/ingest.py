"""`loader push`: sync a folder into the index (or print what a push would do)."""

from __future__ import annotations

import sys

import click

from loader.cli.common import echo_json, settings_options
from loader.cli.options import json_option, quiet_option, tenant_option
from loader.errors import PartialFailure
from loader.settings import (
    CHUNK_STRATEGIES,
    Settings,
)
from loader.terminal import printable


@click.command(short_help="Chunk, embed and index a folder's documents, kept in sync.")
@click.argument("folder", type=click.Path(file_okay=False))
@tenant_option(
    "The one tenant of this push: only its chunks of the collection are read, updated or "
    "deleted (default: each file's front matter, else the tenant setting).",
    resolve=False,  # push's default is each file's front matter, read by the library
)
@click.option(
    "--collection",
    default=None,
    help="Name scoping this folder's documents in the index (default: folder name).",
)
@click.option(
    "--strategy",
    "chunk_strategy",
    type=click.Choice(CHUNK_STRATEGIES),
    default=None,
    help="Chunking strategy (default: the chunk_strategy setting).",
)
@click.option("--keep-removed", is_flag=True, help="Keep chunks of files no longer in the folder.")
@click.option(
    "--bulk-load",
    is_flag=True,
    help="Write with the index relaxed (refresh_interval -1, no replicas), restored after, also "
    "after a crash by the next push or apply (default: the bulk_load setting).",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Processes that embed the chunks, each with the model and 1/N of the cores (default: "
    "the push_workers setting, 1).",
)
@click.option(
    "--dry-run", is_flag=True, help="Print what the push would do; embed and write nothing."
)
@quiet_option("Print nothing but errors.")
@json_option("Print the report as JSON.")
@settings_options
def push(
    settings: Settings,
    folder: str,
    tenant: str | None,
    collection: str | None,
    chunk_strategy: str | None,
    keep_removed: bool,
    workers: int | None,
    bulk_load: bool,
    dry_run: bool,
    quiet: bool,
    as_json: bool,
) -> None:
    """Chunk, embed and index the documents of FOLDER, keeping the index in sync with it.

    Unchanged documents are neither embedded nor written; changed ones replace exactly their own
    chunks; files removed from the folder lose their chunks. Files of types no reader handles
    (images, CSVs, Makefiles) are ignored and counted in one line. Exit code 8 when any file
    failed.
    """
    from loader.ingest.sync import push as push_folder
    from loader.ingest.workers import require_workers

    if chunk_strategy:
        settings = settings.replace(chunk_strategy=chunk_strategy)
    if workers:
        settings = settings.replace(push_workers=workers)
    # From loader.toml or the environment: refused before any work.
    require_workers(settings.push_workers)
    if bulk_load:
        settings = settings.replace(bulk_load=True)
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
    ignored = f", {len(report.ignored)} ignored" if report.ignored else ""
    ignored += f", {report.empty} empty" if report.empty else ""
    if as_json:
        echo_json(report.to_dict(), indent=2)
    elif dry_run and not quiet:
        for line in report.plan or []:
            click.echo(printable(line))
        click.echo(
            f"{printable(report.collection)}: {report.added} to add, {report.updated} to update, "
            f"{report.unchanged} unchanged, {report.deleted} to delete, {report.failed} failed"
            f"{ignored}; tenant {printable(', '.join(report.tenants))} (dry run: nothing changed)"
        )
    elif not quiet:
        where = " on the cluster" if report.embedding_location == "cluster" else ""
        if report.second_embedded or report.chunks_filled:
            where += (
                f", {report.second_embedded} by the second reader"
                f"{f', {report.chunks_filled} given its vector' if report.chunks_filled else ''}"
            )
        click.echo(
            f"{printable(report.collection)}: {report.added} added, {report.updated} updated, "
            f"{report.unchanged} unchanged, {report.deleted} deleted, {report.failed} failed"
            f"{ignored}; {report.chunks} chunks ({report.chunks_written} written, "
            f"{report.chunks_deleted} deleted, {report.embedded} embedded{where}, "
            f"{report.reused_vectors} vectors reused, "
            f"{report.retries} retries) in {report.seconds:.1f} s; "
            f"tenant {printable(', '.join(report.tenants))}"
        )
    if report.failed:
        raise PartialFailure()  # each failure is already on stderr: exit code 8, no more lines
