"""guide/cli.md is the commands' own help: regenerated here and compared with the committed file."""

from __future__ import annotations

from loader.cli import cli
from loader.cli.reference import REGENERATE, reference
from tests.paths import REPO

COMMITTED = REPO / "guide" / "cli.md"


def test_committed_cli_reference_is_the_commands_help():
    committed = COMMITTED.read_text(encoding="utf-8")
    assert committed == reference(), (
        f"guide/cli.md is stale: a command's help changed. Regenerate it with `{REGENERATE}`"
    )


def test_cli_reference_has_a_section_per_command():
    text = reference()
    for name in cli.commands:
        assert f"\n## loader {name}\n" in text
        assert f"Usage: loader {name} [OPTIONS]" in text
    assert "-h, --help" in text
