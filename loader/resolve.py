"""Where setting values come from, in layers, later ones winning:

1. the defaults declared in ``loader.settings``;
2. the project's config file (``loader.toml`` in the working directory, or ``--config FILE``);
3. environment variables: ``LOADER_<NAME>`` for every setting, plus the conventional names listed
   in a setting's ``env`` (``OPENSEARCH_URL``, ``OPENSEARCH_IMAGE`` ...); any other ``LOADER_*``
   variable is a warning (``unknown_variables``: a typo would otherwise go unnoticed), unless
   the project reads it for something else (``NOT_SETTING_VARIABLES``);
4. explicit overrides (CLI flags).

``resolve_settings`` returns the frozen ``Settings`` and, for ``loader settings``, where each value
came from. Every value is checked against its type, its choices, its bounds and its own check
(``loader.settings.check_setting``), naming where it came from.

Example::

    settings, sources = resolve_settings(overrides={"index_name": "docs"})
    settings.index_name      # 'docs'
    sources["index_name"]    # 'override'
"""

from __future__ import annotations

import difflib
import logging
import os
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any, get_type_hints

from loader.errors import ConfigError
from loader.settings import Settings, check_setting
from loader.text import first_surrogate
from loader.userfile import file_kind, parse_failure, read_user_text

CONFIG_FILE_NAME = "loader.toml"
ENV_PREFIX = "LOADER_"

log = logging.getLogger(__name__)

# ``LOADER_*`` variables that are not settings but are read by the project itself (by whom is
# noted), so they are no typo and get no warning.
NOT_SETTING_VARIABLES = frozenset(
    {
        # opensearch/build-image.sh: the folder its downloads are cached in (~/.cache/loader).
        "LOADER_CACHE_DIR",
        # tests/integration/multinode/cluster_fixtures.py: seconds a test cluster may take to start.
        "LOADER_TEST_START_TIMEOUT",
        # scripts/setup.sh: the constraints file pip installs from (``none``: the newest versions).
        "LOADER_CONSTRAINTS",
        # scripts/setup.sh and tests/integration/test_wheel.py: the install test's folder of wheels
        # (.ci/run sets it, so every command of the suite would warn).
        "LOADER_TEST_WHEELHOUSE",
    }
)


def unknown_variables(env: Mapping[str, str]) -> list[str]:
    """A warning for each ``LOADER_*`` variable of ``env`` that names no setting (and is none of
    ``NOT_SETTING_VARIABLES``), in name order, naming the setting it probably meant where one is
    close. Only names are read: a value may be a secret, so it is never shown.

    The prefix is matched in any case (``loader_top_k`` is read by nothing either), and the
    suggestion is the closest setting name after it (``difflib``): compared with the prefix, every
    short name would look close to some setting.

    Example::

        unknown_variables({"LOADER_TOPK": "3", "LOADER_CACHE_DIR": "/tmp"})
        # ['LOADER_TOPK is not a setting (did you mean LOADER_TOP_K?); ignored']
    """
    names = [f.name for f in fields(Settings)]
    known = {ENV_PREFIX + name.upper() for name in names} | NOT_SETTING_VARIABLES
    warnings = []
    for var in sorted(env):
        if not var.upper().startswith(ENV_PREFIX) or var in known:
            continue
        close = difflib.get_close_matches(var[len(ENV_PREFIX) :].lower(), names, n=1)
        hint = f" (did you mean {ENV_PREFIX}{close[0].upper()}?)" if close else ""
        warnings.append(f"{var} is not a setting{hint}; ignored")
    return warnings


def _coerce(name: str, value: Any, kind: type, origin: str, hide: bool = False) -> Any:
    """``value`` as a setting of type ``kind``: itself, or parsed from text (the environment).
    With ``hide`` (a value that may hold a credential) a refused value is named by its type only.

    A TOML value of another type is refused rather than converted, since Python's conversion is not
    what was written: a boolean is no number (``top_k = true`` would be 1), and an array, table,
    date, float or boolean is no string (``index_name = ["a"]`` would be ``"['a']"``). Only an
    integer is taken for a string setting, as its digits (``tenant = 42``).
    """
    try:
        if isinstance(value, bool) and kind is not bool:
            raise TypeError(value)
        if isinstance(value, kind):
            return value
        if kind is str and not isinstance(value, int):
            raise TypeError(value)
        if kind is bool:
            if isinstance(value, str) and value.strip().lower() in ("1", "true", "yes", "on"):
                return True
            if isinstance(value, str) and value.strip().lower() in ("0", "false", "no", "off", ""):
                return False
            raise ValueError(value)
        if kind is int and isinstance(value, float):
            raise ValueError(value)
        return kind(value)
    except (TypeError, ValueError):
        shown = f"a {type(value).__name__}" if hide else repr(value)
        raise ConfigError(
            f"setting {name!r} from {origin} must be of type {kind.__name__}, got {shown}"
        ) from None


def _check_unicode(name: str, value: Any, origin: str) -> None:
    """Refuse a value holding a lone surrogate (``loader.text``), without showing it: it may be a
    key."""
    if first_surrogate(value) is not None:
        raise ConfigError(
            f"setting {name!r} from {origin} is not valid UTF-8 text (an undecodable byte)"
        )


# What a path that is not a regular file is, for the message.
def _read_config(config_path: str | Path | None) -> tuple[Path, dict[str, Any]]:
    """The config file and its settings: ``config_path``, else ``loader.toml`` in the working
    directory, which may be absent (no settings).

    Whatever sits at the path must be a readable regular file of UTF-8 TOML: a directory, a
    dangling symbolic link or a device such as ``/dev/null`` is refused, not taken as "no file",
    since the defaults would then be used without a word (another index, another cluster).

    Raises:
        ConfigError: naming the file and what it is, or why it cannot be read.
    """
    path = Path(config_path) if config_path else Path(CONFIG_FILE_NAME)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        if path.is_symlink():
            raise ConfigError(
                f"config file {path} is a dangling symbolic link (to {os.readlink(path)})"
            ) from None
        if config_path:
            raise ConfigError(f"config file {path} does not exist") from None
        return path, {}
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        raise ConfigError(
            f"config file {path} is {file_kind(mode)}, not a regular file; give a TOML file"
        )
    text = read_user_text(path, "config file")
    try:
        return path, tomllib.loads(text)
    except ValueError as exc:  # TOMLDecodeError, or a number past the int conversion limit
        raise ConfigError(f"cannot read config file {path}: {parse_failure(exc)}") from None


def resolve_settings(
    config_path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> tuple[Settings, dict[str, str]]:
    """Resolve settings from defaults, config file, environment and overrides.

    Args:
        config_path: a TOML file; ``None`` reads ``loader.toml`` from the working directory if it
            exists. A named file that does not exist is an error, and so is either path when it
            is not a readable regular file of UTF-8 TOML (``_read_config``).
        env: the environment to read (default ``os.environ``); each ``LOADER_*`` variable in it
            that names no setting is logged as a warning (``unknown_variables``), once per call.
        overrides: values from CLI flags; ``None`` values are ignored.

    Returns:
        The settings and, per setting, where its value came from.
    """
    env = os.environ if env is None else env
    types = get_type_hints(Settings)
    known = {f.name: f for f in fields(Settings)}
    values: dict[str, Any] = {}
    sources = {name: "default" for name in known}

    def take(name: str, value: Any, origin: str) -> None:
        if name not in known:
            raise ConfigError(f"unknown setting {name!r} in {origin}; see `loader settings`")
        # A secret, or the URL's user info, must not reach the message (secret_values is not
        # known yet to mask it).
        hide = known[name].metadata["secret"] or name in ("opensearch_url", "rewrite_url")
        if known[name].metadata["parse"]:  # e.g. rerank = false, written before rerank = "auto"
            value = known[name].metadata["parse"](value)
        values[name] = _coerce(name, value, types[name], origin, hide)
        _check_unicode(name, values[name], origin)  # first: the other messages show the value
        check_setting(name, values[name], origin)
        sources[name] = origin

    path, data = _read_config(config_path)
    for name, value in data.items():
        take(name, value, str(path))

    for warning in unknown_variables(env):
        log.warning(warning)
    for name, f in known.items():
        for var in (*f.metadata["env"], f"LOADER_{name.upper()}"):
            if env.get(var) not in (None, ""):
                take(name, env[var], f"${var}")

    for name, value in (overrides or {}).items():
        if value is not None:
            take(name, value, "override")

    return Settings(**values), sources


def resolve_tenant(settings: Settings, tenant: str | None) -> str:
    """The tenant a command or request means: the one given, else the ``tenant`` setting (which
    is ``default`` unless configured). Every command's ``--tenant`` and every library request
    whose tenant was left open resolve it here, so that no front end has a default of its own.

    >>> resolve_tenant(Settings(tenant="acme"), None), resolve_tenant(Settings(), "b")
    ('acme', 'b')
    """
    return settings.tenant if tenant is None else tenant
