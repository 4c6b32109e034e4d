"""The options several commands share, each declared once as a small decorator factory (as
sqlite-utils' ``output_options`` and datasette's shared ``serve`` options are), so that every
command means the same thing by ``--tenant``, ``--json``, ``--mode``, ``--k`` and ``--quiet``.
``--config``, ``--url``, ``--index`` and ``--debug`` come with ``common.settings_options``.

A factory takes the command's own help text (what the option means to that command) and nothing
else: the name, the type, the default and the checks are the same everywhere.

Example::

    @click.command()
    @json_option("Print the result as JSON.")
    @settings_options
    @tenant_option("Tenant to search (default: the tenant setting).")
    def search(settings: Settings, tenant: str, as_json: bool) -> None:
        ...  # tenant: the one given, else the tenant setting (``resolve.resolve_tenant``)
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click

from loader.cli.common import check_tenant_option
from loader.resolve import resolve_tenant
from loader.settings import SEARCH_MODES

Decorator = Callable[[Callable], Callable]

# The three rerankers, as every command that reranks names them in its help (the choice:
# ``loader.models.rerank.check.choose_reranker``).
RERANKERS = (
    "the cross-encoder reranker_model, else the learned model learned_reranker names (`loader "
    "learn`), or keyword overlap with rerank_backend = keyword"
)


def tenant_option(  # noqa: A002 - click's name
    help: str, *, resolve: bool = True, check: bool = True
) -> Decorator:
    """``--tenant``, refused when blank or padded (``check_tenant_option``); without ``check``,
    left to the request object that checks it (``SearchRequest``: its message, and as JSON with
    ``--json``).

    With ``resolve`` (every command but ``push``, whose default is each file's front matter),
    the command receives the tenant it means: the one given, else the ``tenant`` setting,
    resolved by ``loader.resolve.resolve_tenant``. It then goes below ``@settings_options``,
    as it needs the settings.
    """
    callback = check_tenant_option if check else None
    option = click.option("--tenant", default=None, callback=callback, help=help)
    if not resolve:
        return option

    def decorate(func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args: Any, tenant: str | None, **kwargs: Any) -> Any:
            if "settings" not in kwargs:
                raise TypeError(f"{func.__name__}: tenant_option goes below @settings_options")
            resolved = resolve_tenant(kwargs["settings"], tenant)
            return func(*args, tenant=resolved, **kwargs)

        return option(wrapper)

    return decorate


def json_option(help: str) -> Decorator:  # noqa: A002 - click's name
    """``--json``: the result as a JSON document on stdout (parameter ``as_json``); errors too
    (``common.handle_errors``), progress stays on stderr (``terminal.show_progress``)."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def quiet_option(help: str = "No progress lines on stderr.") -> Decorator:  # noqa: A002
    """``--quiet``/``-q``: no progress lines on stderr."""
    return click.option("--quiet", "-q", is_flag=True, help=help)


def mode_option(help: str, *, multiple: bool = False) -> Decorator:  # noqa: A002
    """``--mode``, one of the search modes (``loader.modes``); with ``multiple``, repeatable
    (parameter ``modes``)."""
    if multiple:
        return click.option(
            "--mode", "modes", multiple=True, type=click.Choice(SEARCH_MODES), help=help
        )
    return click.option("--mode", type=click.Choice(SEARCH_MODES), default=None, help=help)


def k_option(help: str) -> Decorator:  # noqa: A002 - click's name
    """``--k``: results kept, ``None`` for the ``top_k`` setting; its range is the request's
    check (``SearchRequest``), so that ``--json`` reports a bad value as JSON."""
    return click.option("--k", "k", type=int, default=None, help=help)
