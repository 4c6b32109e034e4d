"""loader: OpenSearch-native hybrid search for RAG.

Configuration as code (mappings, search pipelines, stored search templates), a structure-aware
document push that keeps an index in sync with a folder, a hybrid query path with a client-side
cross-encoder rerank, and retrieval evaluation.
"""

from __future__ import annotations

__version__ = "0.1.0"
