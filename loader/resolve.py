"""Where setting values come from, in layers, later ones winning:

1. the defaults declared in ``loader.settings``;
2. the project's config file (``loader.toml`` in the working directory, or ``--config FILE``);
3. environment variables: ``LOADER_<NAME>`` for every setting, plus the conventional names listed
   in a setting's ``env`` (``OPENSEARCH_URL``, ``OPENSEARCH_IMAGE`` ...);
4. explicit overrides (CLI flags).

``resolve_settings`` returns the frozen ``Settings`` and, for ``loader settings``, where each value
came from. Every value is checked against its type and its choices, naming where it came from.

Example::

    settings, sources = resolve_settings(overrides={"index_name": "docs"})
    settings.index_name      # 'docs'
    sources["index_name"]    # 'override'
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any, get_type_hints

from loader.errors import ConfigError
from loader.settings import Settings, check_choice
from loader.text import first_surrogate

CONFIG_FILE_NAME = "loader.toml"


def _coerce(name: str, value: Any, kind: type, origin: str) -> Any:
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    try:
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
        raise ConfigError(
            f"setting {name!r} from {origin} must be of type {kind.__name__}, got {value!r}"
        ) from None


def _check_unicode(name: str, value: Any, origin: str) -> None:
    """Refuse a value holding a lone surrogate (``loader.text``), without showing it: it may be a
    key."""
    if first_surrogate(value) is not None:
        raise ConfigError(
            f"setting {name!r} from {origin} is not valid UTF-8 text (an undecodable byte)"
        )


def resolve_settings(
    config_path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> tuple[Settings, dict[str, str]]:
    """Resolve settings from defaults, config file, environment and overrides.

    Args:
        config_path: a TOML file; ``None`` reads ``loader.toml`` from the working directory if it
            exists. A named file that does not exist is an error.
        env: the environment to read (default ``os.environ``).
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
        values[name] = _coerce(name, value, types[name], origin)
        check_choice(name, values[name], origin)
        _check_unicode(name, values[name], origin)
        sources[name] = origin

    path = Path(config_path) if config_path else Path(CONFIG_FILE_NAME)
    if path.is_file():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read config file {path}: {exc}") from exc
        for name, value in data.items():
            take(name, value, str(path))
    elif config_path:
        raise ConfigError(f"config file {path} does not exist")

    for name, f in known.items():
        for var in (*f.metadata["env"], f"LOADER_{name.upper()}"):
            if env.get(var) not in (None, ""):
                take(name, env[var], f"${var}")

    for name, value in (overrides or {}).items():
        if value is not None:
            take(name, value, "override")

    return Settings(**values), sources
