"""`loader chat`: a conversation with the index in the terminal (``loader.query.chat``)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import click

from loader.cli.common import settings_options
from loader.cli.options import json_option, k_option, mode_option, tenant_option
from loader.cli.query import rewrite_options
from loader.errors import ConfigError, LoaderError
from loader.redact import scrub_secrets
from loader.settings import (
    REWRITE_CHOICES,
    REWRITE_MODES,
    SEARCH_MODES,
    Settings,
    secret_values,
)
from loader.terminal import printable

HELP = [
    ":mode MODE      search mode: " + ", ".join(SEARCH_MODES),
    ":k N            results per turn",
    ":tenant NAME    tenant to search",
    ":rewrite VALUE  " + ", ".join(REWRITE_CHOICES + REWRITE_MODES) + " (a mode turns llm on)",
    ":reset          forget the conversation",
    ":history        show the conversation so far",
    ":quit           leave (or end of input)",
]
QUIT = (":quit", ":q", ":exit")


def _input_lines(interactive: bool) -> Iterator[str | None]:
    """The lines typed (a prompt and line editing on a terminal), until end of input; ``None``
    for a piped line that is not UTF-8."""
    if interactive:
        import readline  # noqa: F401 (line editing and recall for input())

        while True:
            try:
                yield input("you> ")
            except (EOFError, KeyboardInterrupt):
                click.echo("")
                return
    if sys.stdin is None:  # started with standard input closed (`<&-`): nothing to read
        return
    # Bytes, decoded line by line: one line that is not UTF-8 is refused, not the session ended
    # (or, in another locale, carried on as text no JSON line can hold).
    for raw in sys.stdin.buffer:
        try:
            yield raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError:
            yield None


class _Output:
    """Prints what a turn, a command or an error gives: lines, or one JSON object each."""

    def __init__(self, as_json: bool, secrets: list[str]) -> None:
        self.as_json = as_json
        self.secrets = [secret for secret in secrets if len(secret) >= 3]

    def record(self, payload: dict[str, Any], lines: list[str]) -> None:
        if self.as_json:
            click.echo(json.dumps(payload, ensure_ascii=False))
        else:
            for line in lines:
                click.echo(printable(line))

    def error(self, exc: LoaderError) -> None:
        message = scrub_secrets(str(exc), self.secrets, pieces=False)
        if self.as_json:
            click.echo(json.dumps({"error": message, "exit_code": exc.exit_code}))
        else:
            click.echo(printable(f"! {message}"), err=True)


def _command(session: Any, line: str) -> tuple[str, str, list[str]]:
    """Run one ``:command``; its name, argument and the lines to show.

    Raises:
        ConfigError: an unknown command, a missing or bad argument.
    """
    name, _, argument = line.strip().partition(" ")
    argument = argument.strip()
    setters = {
        ":mode": session.set_mode,
        ":k": session.set_k,
        ":tenant": session.set_tenant,
        ":rewrite": session.set_rewrite,
    }
    if name in setters:
        if not argument:
            raise ConfigError(f"{name} needs a value; :help lists the commands")
        return name, argument, [setters[name](argument)]
    if name == ":reset":
        return name, "", [session.reset()]
    if name == ":history":
        turns = [f"{turn['role']}: {turn['content']}" for turn in session.history]
        return name, "", turns or ["(no turns yet)"]
    if name == ":help":
        return name, "", HELP
    raise ConfigError(f"unknown command {name!r}; :help lists the commands")


def _turn_lines(number: int, result: Any, shown: set[str]) -> list[str]:
    """A turn's lines; a warning already shown by an earlier turn (no cross-encoder, rerank =
    auto) is not repeated."""
    from loader.query.result import format_result

    searched = " | ".join(result.queries)
    new = [warning for warning in result.warnings if warning not in shown]
    shown.update(new)
    return [
        f"[{number}] searched: {searched}",
        *(f"! {warning}" for warning in new),
        *format_result(result, warnings=False),
        "",
    ]


@click.command(short_help="Talk to the index: each line a follow-up question.")
@mode_option("Search mode (default: setting).")
@k_option("Results per turn (default: top_k).")
@click.option(
    "--rerank/--no-rerank",
    default=None,
    help="Rerank with the cross-encoder reranker_model, or by keyword overlap with "
    "rerank_backend = keyword (default: the rerank setting; auto: when that model is on this "
    "machine or the backend is keyword). --rerank without one is an error.",
)
@click.option(
    "--history",
    "history_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Start from the turns of this JSON file ([{role, content}]).",
)
@json_option("One JSON object per line for each turn.")
@settings_options
@tenant_option("Tenant to search (default: the tenant setting).")  # checked now, not per turn
@rewrite_options
def chat(
    settings: Settings,
    tenant: str,
    mode: str | None,
    k: int | None,
    rerank: bool | None,
    history_file: str | None,
    as_json: bool,
) -> None:
    """Talk to the index: each line you type is searched as a follow-up to the earlier ones (the
    rewrite setting decides how: llm, concat or off), and the queries searched and the ranked
    chunks with their heading paths are shown. Lines starting with ':' are commands (:help).
    With --json, one JSON object per turn, command or error (for scripts)."""
    from loader.query.chat import ChatSession
    from loader.query.conversation import load_history

    session = ChatSession(
        settings,
        tenant=tenant,
        mode=mode,
        k=k,
        rerank=rerank,
        history=list(load_history(history_file)) if history_file else [],
    )
    session.connect()  # a cluster that is down ends the session now (exit code 3), not each turn
    output = _Output(as_json, secret_values(settings))
    interactive = sys.stdin is not None and sys.stdin.isatty() and not as_json
    if not as_json:
        click.echo(
            printable(
                f"tenant {session.tenant!r}, {session.describe_rewrite()}; :help for commands, "
                ":quit to leave"
            )
        )
    turn = 0
    shown: set[str] = set()
    for line in _input_lines(interactive):
        if line is None:
            output.error(ConfigError("a line that is not UTF-8 text was skipped"))
            continue
        if not line.strip():
            continue
        if line.strip() in QUIT:
            break
        try:
            if line.lstrip().startswith(":"):
                name, argument, lines = _command(session, line)
                output.record({"command": name[1:], "argument": argument, "lines": lines}, lines)
                continue
            result = session.ask(line)
        except LoaderError as exc:  # one bad turn: say why, the conversation goes on
            output.error(exc)
            continue
        turn += 1
        output.record(
            {"turn": turn, "message": line, **result.to_dict()}, _turn_lines(turn, result, shown)
        )
