"""The ``loader`` command line: a thin layer over the library, one module per room.

Each command parses its options, resolves settings (``common.settings_options``), calls one
library function and turns a ``LoaderError`` into one line on stderr with the error class's exit
code (``common.handle_errors``). Commands never call each other.
"""

from __future__ import annotations

import click

from loader.cli import adapt as adapt_cli
from loader.cli import chat as chat_cli
from loader.cli import cluster, eval, index, ingest, query
from loader.cli import doctor as doctor_cli
from loader.cli import explain as explain_cli
from loader.cli import finetune as finetune_cli
from loader.cli import judgments as judgments_cli
from loader.cli import learn as learn_cli

# What a shell reports for a command interrupted by Ctrl-C (128 + SIGINT), and so what scripts
# test; click's own "Aborted!" exits 1, the code of an unexpected error.
INTERRUPTED_EXIT_CODE = 130
# What to do next, where an interrupted command leaves something to finish: a push's writes are
# idempotent and its deletions come last, so running it again ends as an uninterrupted one.
_INTERRUPTED = {
    "push": "interrupted: what was written stays; run the same push again to finish it",
}


class _LoaderGroup(click.Group):
    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo(_INTERRUPTED.get(ctx.invoked_subcommand or "", "interrupted"), err=True)
            raise click.exceptions.Exit(INTERRUPTED_EXIT_CODE) from None


@click.group(cls=_LoaderGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="loader")
def cli() -> None:
    """Hybrid search for RAG on OpenSearch: apply the configuration, push documents, search, and
    measure retrieval quality.

    \b
    Example: a local node, the sample documents, one question
      loader up && loader apply && loader push docs/
      loader search "How long do refunds take for late deliveries?"
    """


for command in (
    cluster.settings_command,
    cluster.up,
    cluster.down,
    index.apply,
    ingest.push,
    query.search,
    chat_cli.chat,
    explain_cli.explain,
    doctor_cli.doctor,
    eval.eval_command,
    judgments_cli.judgments,
    finetune_cli.fine_tune_command,
    adapt_cli.adapt,
    learn_cli.learn,
    query.serve,
):
    cli.add_command(command)
