"""loader: OpenSearch-native hybrid search for RAG.

Configuration as code (mappings, search pipelines, stored search templates), a structure-aware
document push that keeps an index in sync with a folder, a hybrid query path with a client-side
cross-encoder rerank, and retrieval evaluation.

The front door: the functions the ``loader`` commands call, importable from here (``__all__``)
and loaded only when first used, so ``import loader`` costs no numpy, onnxruntime or
opensearch-py. Settings resolve as for the command (``loader.toml`` in the working directory,
then ``LOADER_*`` variables); guide/python.md has more.

Example::

    import loader

    settings, _ = loader.resolve_settings()
    loader.apply_config(settings)                      # `loader apply`
    loader.push("docs/", settings, tenant="default")   # `loader push docs/`
    request = loader.SearchRequest.from_settings(settings, "refund time", tenant="default")
    for hit in loader.search(request, settings).hits:  # `loader search`
        print(hit.scores["retrieval"], hit.source, " > ".join(hit.heading_path))
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# name -> the module that defines it; each is imported on first use (``__getattr__``).
_ENTRY_POINTS = {
    "Settings": "loader.settings",
    "resolve_settings": "loader.resolve",
    "LoaderError": "loader.errors",
    "apply_config": "loader.index.apply",
    "push": "loader.ingest.sync",
    "search": "loader.query.search",
    "asearch": "loader.query.search",
    "SearchRequest": "loader.query.request",
    "SearchFilters": "loader.query.request",
    "SearchResult": "loader.query.result",
    "EvalRequest": "loader.eval.runner",
    "run_eval": "loader.eval.runner",
}

__all__ = [
    "EvalRequest",
    "LoaderError",
    "SearchFilters",
    "SearchRequest",
    "SearchResult",
    "Settings",
    "apply_config",
    "asearch",
    "push",
    "resolve_settings",
    "run_eval",
    "search",
]

if TYPE_CHECKING:
    from loader.errors import LoaderError
    from loader.eval.runner import EvalRequest, run_eval
    from loader.index.apply import apply_config
    from loader.ingest.sync import push
    from loader.query.request import SearchFilters, SearchRequest
    from loader.query.result import SearchResult
    from loader.query.search import asearch, search
    from loader.resolve import resolve_settings
    from loader.settings import Settings


def __getattr__(name: str) -> Any:
    module = _ENTRY_POINTS.get(name)
    if module is None:
        raise AttributeError(f"module 'loader' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next access is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
