"""What every command shares: settings from --config/--url/--index and the environment,
and the one mapping of errors to a line on stderr and an exit code."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import click

from loader.errors import LoaderError
from loader.redact import parse_url, scrub_secrets
from loader.resolve import resolve_settings
from loader.settings import index_name_problem, secret_values, tenant_problem
from loader.terminal import printable


def check_tenant_option(_ctx: click.Context, _param: click.Parameter, value: str | None) -> Any:
    """A ``--tenant`` value, refused as the ``tenant`` setting is when empty, blank or padded:
    an empty one would silently mean the setting's tenant, a padded one a tenant no one types."""
    problem = None if value is None else tenant_problem(value)
    if problem:
        raise click.BadParameter(problem, param_hint="'--tenant'")
    return value


def check_index_prefix_option(_ctx: click.Context, _param: click.Parameter, value: str) -> Any:
    """An ``--index-prefix`` that can start index names (``<prefix>-<dataset>-<strategy>``),
    checked before any work rather than at the first index it names."""
    problem = index_name_problem(value)
    if problem:
        raise click.BadParameter(f"{value!r:.60} {problem}", param_hint="'--index-prefix'")
    return value


config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Config file (default: ./loader.toml if present).",
)


def settings_options(func: Callable | None = None, *, index: bool = True) -> Any:
    """--config, --url, --index and --debug, shared by every command that talks to a cluster;
    ``@settings_options(index=False)`` leaves --index out, for commands no index concerns
    (``up``, ``down``): an option that means nothing to a command is not offered."""
    if func is None:
        return functools.partial(settings_options, index=index)
    index_option = click.option(
        "--index", "index_name", default=None, help="Index alias to work on."
    )

    @config_option
    @click.option(
        "--url",
        "opensearch_url",
        default=None,
        metavar="URL",
        help="OpenSearch URL (default: $OPENSEARCH_URL or http://127.0.0.1:9200).",
    )
    @click.option("--debug", is_flag=True, help="Show tracebacks and debug logging.")
    @functools.wraps(func)
    def wrapper(
        *args: Any,
        config_path: str | None,
        opensearch_url: str | None,
        debug: bool,
        index_name: str | None = None,
        **kwargs: Any,
    ) -> Any:
        configure_logging(debug)
        secrets: list[str] = []
        with handle_errors(debug, secrets, as_json=bool(kwargs.get("as_json"))):
            settings, _ = resolve_settings(
                config_path=config_path,
                overrides={"opensearch_url": opensearch_url, "index_name": index_name},
            )
            secrets.extend(secret_values(settings))
            _mask_secrets_in_logs(secrets)
            parse_url(settings.opensearch_url)  # a malformed URL: one line, before any work
            try:
                return func(*args, settings=settings, **kwargs)
            finally:
                _SECRET_FILTER.secrets = []

    return index_option(wrapper) if index else wrapper


def configure_logging(debug: bool = False) -> None:
    """Warnings (with ``debug``, debug records too) as ``WARNING <logger>: <message>`` lines on
    stderr, each passed through the secret filter (``_SecretFilter``); called by every command
    before it resolves its settings, so that their warnings (``loader.resolve``) show too."""
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if not debug:  # the client logs every failed request; errors below become one line
        logging.getLogger("opensearch").setLevel(logging.CRITICAL)
        # pypdf warns about damaged PDFs without naming the file; push reports each one.
        logging.getLogger("pypdf").setLevel(logging.ERROR)
    _mask_secrets_in_logs([])


class _SecretFilter(logging.Filter):
    """Masks the running command's secrets in every record a root handler writes, and escapes
    its control characters (a file name in a log line must not forge another line)."""

    def __init__(self) -> None:
        super().__init__()
        self.secrets: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = printable(scrub_secrets(message, self.secrets) if self.secrets else message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if self.secrets and record.exc_info and not record.exc_text:
            text = logging.Formatter().formatException(record.exc_info)
            record.exc_text = scrub_secrets(text, self.secrets)
        return True


_SECRET_FILTER = _SecretFilter()


def _mask_secrets_in_logs(secrets: list[str]) -> None:
    _SECRET_FILTER.secrets = secrets
    for handler in logging.getLogger().handlers:
        if _SECRET_FILTER not in handler.filters:
            handler.addFilter(_SECRET_FILTER)


class _JsonOutput:
    """Whether the running command has printed its JSON document (``echo_json``)."""

    written = False


def echo_json(data: Any, **dumps: Any) -> None:
    """Print a command's ``--json`` document on stdout (``json.dumps`` options in ``dumps``)."""
    click.echo(json.dumps(data, **dumps))
    _JsonOutput.written = True


@contextlib.contextmanager
def handle_errors(
    debug: bool = False, secrets: Sequence[str] = (), as_json: bool = False
) -> Iterator[None]:
    """Turn any error into one line on stderr and an exit code, never a traceback (unless
    ``debug``, which prints it first): a LoaderError gets its class's exit code, anything else
    exit code 1, with or without ``debug``.

    ``secrets`` (read when the error happens) are masked in the line: the package's own messages
    never hold one, but the text of an unexpected exception may. With ``as_json`` (the command's
    ``--json``), an error that comes before the command printed its JSON document is also one on
    stdout, ``{"error": ..., "exit_code": ...}`` (as ``loader chat --json`` reports a turn's), so
    a script reading stdout gets JSON whatever happened; an error after it (the eval gate, a
    failed doctor check) is already in that document.
    """
    _JsonOutput.written = False
    try:
        yield
    except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
        raise
    except LoaderError as exc:
        if not str(exc):  # already reported item by item (PartialFailure): just the exit code
            raise click.exceptions.Exit(exc.exit_code) from exc
        if debug:
            _print_traceback(secrets)
        # Whole secrets only: a piece of one may be a word of the message.
        long_enough = [secret for secret in secrets if len(secret) >= 3]
        message = printable(scrub_secrets(str(exc), long_enough, pieces=False))
        raise _failure(message, exc.exit_code, as_json) from exc
    except Exception as exc:
        if debug:
            _print_traceback(secrets)
        text = printable(scrub_secrets(" ".join(str(exc).split()), list(secrets)))
        message = f"unexpected {type(exc).__name__}: {text}; run with --debug for the traceback"
        raise _failure(message, 1, as_json) from exc


def _print_traceback(secrets: Sequence[str]) -> None:
    """``--debug``: the exception's whole chain on stderr, its secrets masked as an unexpected
    error's are (the server's text in it may echo a credential), before the usual line; the exit
    code stays the error's own."""
    click.echo(scrub_secrets(traceback.format_exc(), list(secrets)).rstrip("\n"), err=True)


def _failure(message: str, exit_code: int, as_json: bool) -> click.ClickException:
    """The one line on stderr and the exit code; with ``as_json`` and no JSON printed yet, the
    error as the command's JSON document too."""
    if as_json and not _JsonOutput.written:
        echo_json({"error": message, "exit_code": exit_code}, ensure_ascii=False)
    error = click.ClickException(message)
    error.exit_code = exit_code
    return error
