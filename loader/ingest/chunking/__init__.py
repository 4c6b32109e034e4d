"""Chunking: turn a ``Document`` into ``Chunk`` objects that fit the embedding model.

Pure functions: the token counter and (for ``semantic``) the embedding function are passed in, so
nothing here loads a model or touches a file.

Every strategy keeps ``count_tokens(chunk.text) <= config.max_tokens`` — ``chunk.text`` being the
``"Title > Heading > Subheading"`` prefix, a blank line and the body — because the model silently
truncates anything longer, and truncated text is text that can never be found. Every strategy
also keeps ``len(chunk.body) <= config.max_chars`` (``chunk_max_chars``): a tokenizer may count a
2 MB line without spaces as three tokens, so text with too few token boundaries is cut by
characters too; the heading prefix gets at most a quarter of that, and ``parent_text`` and
``window`` (stored for context expansion, never embedded) at most four times it, around the chunk.

Token counts and the limit are the configured model's: its own tokenizer (MiniLM's, bge's) and
its positions less the special tokens and its passage instruction (256 - 2 for MiniLM, 512 - 2 for
bge-small), from ``Embedder.count_tokens`` and ``Embedder.max_text_tokens``.

Example::

    embedder = embedder_for(settings)
    config = chunking_config(settings, embedder.max_text_tokens)
    chunks = chunk_document(doc, config, embedder.count_tokens, embedder.embed_passages)
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from loader.documents import Chunk, Document
from loader.errors import ConfigError
from loader.ingest.chunking import strategies
from loader.ingest.chunking.limits import enforce_chars, enforce_limit
from loader.ingest.chunking.sentences import split_sentences
from loader.ingest.chunking.units import counting_cache
from loader.settings import CHUNK_STRATEGIES, Settings

__all__ = [
    "STRATEGIES",
    "ChunkingConfig",
    "chunk_document",
    "chunking_config",
    "split_sentences",
]

log = logging.getLogger(__name__)

STRATEGIES = CHUNK_STRATEGIES

# Below this a heading prefix plus any useful text cannot fit; a typo in the setting, surely.
MIN_MAX_TOKENS = 16
# Likewise for characters: the heading prefix gets a quarter of this.
MIN_MAX_CHARS = 200


_DEFAULTS = Settings()


@dataclass(frozen=True)
class ChunkingConfig:
    """How to cut documents; sizes are in the embedding model's tokens.

    ``max_tokens`` is the hard limit for ``chunk.text`` (prefix included); ``target_tokens`` is
    what the packing strategies aim for, prefix included. ``max_chars`` is the hard limit for
    ``chunk.body`` in characters, for text the tokenizer sees as a few tokens.
    """

    # Defaults are the settings' defaults (max_tokens: all-MiniLM-L6-v2's 256 positions less two).
    strategy: str = _DEFAULTS.chunk_strategy
    target_tokens: int = _DEFAULTS.chunk_target_tokens
    max_tokens: int = 254
    overlap_tokens: int = _DEFAULTS.chunk_overlap_tokens
    semantic_threshold: float = _DEFAULTS.semantic_threshold
    semantic_min_tokens: int = 40
    sentence_window: int = _DEFAULTS.sentence_window
    max_chars: int = _DEFAULTS.chunk_max_chars


def _check(config: ChunkingConfig) -> None:
    """Raise ``ConfigError`` naming the setting that makes ``config`` unusable."""
    if config.strategy not in STRATEGIES:
        raise ConfigError(
            f"chunk_strategy {config.strategy!r} is unknown; use one of {', '.join(STRATEGIES)}"
        )
    if config.max_tokens < MIN_MAX_TOKENS:
        raise ConfigError(
            f"chunk_max_tokens is {config.max_tokens}; it must be at least {MIN_MAX_TOKENS} "
            "(or 0 for the model's maximum)"
        )
    if not 1 <= config.target_tokens <= config.max_tokens:
        raise ConfigError(
            f"chunk_target_tokens is {config.target_tokens}; it must be between 1 and the "
            f"maximum chunk size ({config.max_tokens} tokens)"
        )
    if not 0 <= config.overlap_tokens < config.target_tokens:
        raise ConfigError(
            f"chunk_overlap_tokens is {config.overlap_tokens}; it must be at least 0 and below "
            f"chunk_target_tokens ({config.target_tokens})"
        )
    if not -1.0 <= config.semantic_threshold <= 1.0:
        raise ConfigError(
            f"semantic_threshold is {config.semantic_threshold}; a cosine similarity is "
            "between -1 and 1"
        )
    if config.max_chars < MIN_MAX_CHARS:
        raise ConfigError(
            f"chunk_max_chars is {config.max_chars}; it must be at least {MIN_MAX_CHARS}"
        )
    if config.sentence_window < 0:
        raise ConfigError(f"sentence_window is {config.sentence_window}; it cannot be negative")
    if config.semantic_min_tokens < 0:
        raise ConfigError(
            f"semantic_min_tokens is {config.semantic_min_tokens}; it cannot be negative"
        )


def chunking_config(settings: Settings, max_text_tokens: int) -> ChunkingConfig:
    """The chunking configuration for ``settings`` and a model that takes ``max_text_tokens``.

    Args:
        settings: resolved settings (``chunk_*``, ``semantic_threshold``, ``sentence_window``;
            ``chunk_max_chars`` becomes ``max_chars``).
        max_text_tokens: the most tokens of text the model reads (``Embedder.max_text_tokens``).

    Returns:
        The configuration; ``max_tokens`` is ``chunk_max_tokens`` capped at the model's limit,
        or the model's limit when the setting is 0.

    Raises:
        ConfigError: naming the setting, for an unknown strategy, a target above the maximum,
            an overlap not below the target, and the like.
    """
    if settings.chunk_max_tokens < 0:
        raise ConfigError(f"chunk_max_tokens is {settings.chunk_max_tokens}; it cannot be negative")
    max_tokens = settings.chunk_max_tokens or max_text_tokens
    if max_tokens > max_text_tokens:
        log.warning(
            "chunk_max_tokens %d is above what the model reads (%d); using %d",
            max_tokens,
            max_text_tokens,
            max_text_tokens,
        )
        max_tokens = max_text_tokens
    config = ChunkingConfig(
        strategy=settings.chunk_strategy,
        target_tokens=settings.chunk_target_tokens,
        max_tokens=max_tokens,
        overlap_tokens=settings.chunk_overlap_tokens,
        semantic_threshold=settings.semantic_threshold,
        sentence_window=settings.sentence_window,
        max_chars=settings.chunk_max_chars,
    )
    _check(config)
    return config


def chunk_document(
    doc: Document,
    config: ChunkingConfig,
    count_tokens: Callable[[str], int],
    embed: Callable[[list[str]], np.ndarray] | None = None,
) -> list[Chunk]:
    """Cut one document into chunks with the configured strategy.

    Args:
        doc: the document, as a reader made it.
        config: the chunking configuration.
        count_tokens: the embedding model's token counter (special tokens excluded).
        embed: the embedding function; only ``semantic`` needs it.

    Returns:
        The chunks in document order, ``position`` 0..n-1, each with
        ``count_tokens(chunk.text) <= config.max_tokens`` and
        ``len(chunk.body) <= config.max_chars``.

    Raises:
        ConfigError: for an unusable configuration, or ``semantic`` without ``embed``.
    """
    _check(config)
    count = counting_cache(count_tokens)
    strategy = config.strategy
    if strategy == "semantic":
        chunks = strategies.semantic(doc, config, count, embed)
    else:
        chunker = {
            "structure": strategies.structure,
            "fixed": strategies.fixed,
            "recursive": strategies.recursive,
            "sentence-window": strategies.sentence_window,
            "parent-document": strategies.parent_document,
        }[strategy]
        chunks = chunker(doc, config, count)
    # Characters first: a piece cut out of a long word can count more tokens than the word did,
    # and enforce_limit only ever shortens bodies, so the character limit still holds after it.
    chunks = enforce_chars(chunks, config.max_chars)
    chunks = enforce_limit(chunks, config.max_tokens, count)
    for position, chunk in enumerate(chunks):
        chunk.position = position
    return chunks
