"""`loader apply`: print the plan, then apply it."""

from __future__ import annotations

import click

from loader.cli.common import echo_json, settings_options
from loader.cli.options import json_option
from loader.settings import (
    Settings,
)
from loader.terminal import printable


@click.command(short_help="Create or update the index, pipelines and templates.")
@click.option("--dry-run", is_flag=True, help="Print the plan and change nothing.")
@click.option(
    "--delete-old", is_flag=True, help="Delete index versions older than the one the alias ends on."
)
@json_option("Print the plan as JSON.")
@settings_options
def apply(settings: Settings, dry_run: bool, delete_old: bool, as_json: bool) -> None:
    """Create or update the index, alias, pipelines and search templates from the config files:
    print the plan, then apply it (idempotent)."""
    from loader.index.apply import apply_config

    plan = apply_config(settings, dry_run=dry_run, delete_old=delete_old)
    if as_json:
        echo_json({**plan.to_dict(), "dry_run": dry_run}, indent=2)
        return
    for line in plan.lines():
        click.echo(printable(line))
    for note in plan.notes:
        click.echo(printable(f"! {note}"))
    suffix = " (dry run: nothing changed)" if dry_run and plan.has_changes else ""
    click.echo(printable(f"{plan.summary()}{suffix}"))
