"""`loader doctor`: one line per check of the cluster, the index and the query path."""

from __future__ import annotations

import click

from loader.cli.common import echo_json, settings_options
from loader.cli.options import json_option
from loader.settings import Settings
from loader.terminal import printable


@click.command(short_help="Check the cluster, the index and the query path.")
@json_option("Print the checks as JSON.")
@settings_options
def doctor(settings: Settings, as_json: bool) -> None:
    """Check that the cluster is set up the way the configuration says: reachable and healthy,
    plugins, alias -> one versioned index, no write block on it, no drift from the files, the
    vector dimension and engine, pipelines and templates as `loader apply` stores them, hybrid
    scores really fused, filters inside the k-NN search, the ml-commons model, chunks per tenant,
    chunks cut with other chunking settings and documents a stopped push left half-written; then
    the learned reranker's folder the settings name (learned_reranker), checked and loaded as a
    search would. Exit code 0 when nothing failed, else the first failure's (3 the cluster, 5 the
    index or its configuration, 2 a setting, 6 a model)."""
    from loader.doctor.checks import run_doctor

    report = run_doctor(settings)
    if as_json:
        echo_json(report.to_dict(), indent=2)
    else:
        for line in report.lines():
            click.echo(printable(line))
        click.echo(report.summary())
    report.check()
