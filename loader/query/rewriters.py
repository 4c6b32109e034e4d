"""The rewriter the ``rewrite`` settings configure (``rewriter_from_settings``), the one place a
rewriter is built from settings: ``off`` none, ``concat`` a ``ConcatRewriter``
(``loader.query.conversation``), ``llm`` an ``OpenAICompatibleRewriter``
(``loader.query.chat_model``).

Apart from ``loader.query.rewrite``, which the rewriters themselves import (``Rewrite``,
``failed_rewrite``), so that building one imports them without an import circle.

Example::

    rewriter = rewriter_from_settings(Settings(rewrite="concat"))   # a ConcatRewriter
"""

from __future__ import annotations

from loader.errors import ConfigError
from loader.query.chat_model import OpenAICompatibleRewriter
from loader.query.conversation import ConcatRewriter
from loader.query.rewrite import MAX_QUERIES, QueryRewriter
from loader.redact import split_url
from loader.settings import REWRITE_MODES, Settings, rewrite_api_key


def rewriter_from_settings(settings: Settings) -> QueryRewriter | None:
    """The rewriter the ``rewrite`` settings configure: ``None`` (off), a ``ConcatRewriter``, or
    an ``OpenAICompatibleRewriter`` for ``rewrite_url`` in ``rewrite_mode``.

    Raises:
        ConfigError: ``rewrite = llm`` without a usable ``rewrite_url`` or ``rewrite_model``, a
            timeout or query count out of range, or an unreadable ``rewrite_api_key_file``.
    """
    if settings.rewrite == "off":
        return None
    if settings.rewrite == "concat":
        return ConcatRewriter()
    _check_llm_settings(settings)
    return OpenAICompatibleRewriter(
        settings.rewrite_url,
        settings.rewrite_model,
        api_key=rewrite_api_key(settings),
        timeout=settings.rewrite_timeout,
        max_queries=settings.rewrite_max_queries,
        mode=settings.rewrite_mode,
    )


def _check_llm_settings(settings: Settings) -> None:
    url = split_url(settings.rewrite_url)
    if url.scheme not in ("http", "https") or not url.host:
        shown = url.redacted() or "(empty)"
        raise ConfigError(
            f"rewrite = llm needs rewrite_url, an http(s) API root such as "
            f"http://127.0.0.1:8000/v1; got {shown!r} (set LOADER_REWRITE_URL, or rewrite = off)"
        )
    if not settings.rewrite_model.strip():
        raise ConfigError("rewrite = llm needs rewrite_model, the model name the endpoint serves")
    if not 0 < settings.rewrite_timeout <= 300:
        raise ConfigError(
            f"rewrite_timeout must be more than 0 and at most 300 seconds, got "
            f"{settings.rewrite_timeout}"
        )
    if not 1 <= settings.rewrite_max_queries <= MAX_QUERIES:
        raise ConfigError(
            f"rewrite_max_queries must be from 1 to {MAX_QUERIES}, got "
            f"{settings.rewrite_max_queries}"
        )
    if settings.rewrite_mode not in REWRITE_MODES:
        raise ConfigError(
            f"rewrite_mode must be one of {', '.join(REWRITE_MODES)}, got {settings.rewrite_mode!r}"
        )
