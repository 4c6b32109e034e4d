"""`loader settings`, `loader up`, `loader down`: the settings, and a local single node."""

from __future__ import annotations

import click

from loader.cli.common import (
    config_option,
    configure_logging,
    echo_json,
    handle_errors,
    settings_options,
)
from loader.cli.options import json_option
from loader.resolve import resolve_settings
from loader.settings import (
    Settings,
    setting_help,
)
from loader.terminal import printable


@click.command(name="settings", short_help="Show every setting, its value and its source.")
@config_option
@json_option("Print JSON.")
def settings_command(config_path: str | None, as_json: bool) -> None:
    """Show every setting, its value and where the value came from (secrets masked)."""
    configure_logging()
    with handle_errors(as_json=as_json):
        settings, sources = resolve_settings(config_path=config_path)
    values = settings.public_items()
    if as_json:
        echo_json({k: {"value": v, "source": sources[k]} for k, v in values.items()}, indent=2)
        return
    helps = setting_help()
    for name, value in values.items():
        click.echo(printable(f"{name} = {value!r}  [{sources[name]}]"))
        click.echo(f"    {helps[name]}")


@click.command(short_help="Start a local single-node OpenSearch in Docker.")
@settings_options(index=False)
@json_option('Print {"url": ...}.')
def up(settings: Settings, as_json: bool) -> None:
    """Start a local single-node OpenSearch in Docker (idempotent) and print its URL."""
    from loader.cluster.local import start_local

    url = start_local(settings.opensearch_image, settings.local_port)
    if as_json:
        echo_json({"url": url})
    else:
        click.echo(printable(url))


@click.command(short_help="Stop the local OpenSearch `loader up` started.")
@settings_options(index=False)
@json_option('Print {"stopped": true|false}.')
def down(settings: Settings, as_json: bool) -> None:
    """Stop and remove the local OpenSearch started by `loader up` (idempotent)."""
    from loader.cluster.local import stop_local

    stopped = stop_local()
    if as_json:
        echo_json({"stopped": stopped})
    else:
        click.echo("stopped" if stopped else "not running")
