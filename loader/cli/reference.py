"""The command-line reference (guide/cli.md), written from the commands' own help.

Run ``python3 -m loader.cli.reference > guide/cli.md`` after changing a command, an option or a
help text; ``tests/unit/test_cli_reference.py`` fails while the committed file differs.
"""

from __future__ import annotations

import click

from loader.cli import cli

REGENERATE = "python3 -m loader.cli.reference > guide/cli.md"

# click wraps help to the terminal's width; a fixed width makes the file the same on every machine.
HELP_WIDTH = 100


def command_help(command: click.Command, path: list[str]) -> str:
    """``loader <path> --help`` as click prints it, at HELP_WIDTH columns."""
    parent = None
    for name in path[:-1]:
        parent = click.Context(cli, info_name=name, parent=parent, **cli.context_settings)
    context = click.Context(
        command,
        info_name=path[-1],
        parent=parent,
        terminal_width=HELP_WIDTH,
        max_content_width=HELP_WIDTH,
        **command.context_settings,
    )
    return command.get_help(context)


def reference() -> str:
    """The whole reference as Markdown: the group's help, then each command's, in name order."""
    lines = [
        "# Command-line reference",
        "",
        "Every `loader` command's `--help`, generated from the commands themselves by",
        f"`{REGENERATE}`; do not edit by hand.",
        "",
    ]
    sections = [(["loader"], cli)]
    sections += [(["loader", name], cli.commands[name]) for name in sorted(cli.commands)]
    for path, command in sections:
        lines += [f"## {' '.join(path)}", "", "```text", command_help(command, path), "```", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    click.echo(reference(), nl=False)
