"""What a push reports: ``PushReport`` (counts, failures, warnings, the dry run's plan) and the
lines it prints for ignored files and for documents of other tenants. ``loader.ingest.plan``
fills it in, ``loader.ingest.sync`` completes it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from loader.ingest.readers import file_type


@dataclass
class PushReport:
    """What a push did. ``failed`` counts documents that could not be read or written;
    ``ignored`` lists the files of types no reader handles, which are no failure."""

    collection: str = ""
    tenants: list[str] = field(default_factory=list)  # the tenants whose chunks it synced
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    failed: int = 0
    # Documents that give no chunk (an empty file): nothing to write, and nothing is recorded
    # of them, so they are counted apart from "added" on every push alike.
    empty: int = 0
    chunks: int = 0
    chunks_written: int = 0
    chunks_deleted: int = 0
    # Texts embedded (client: one per new content hash) or chunks sent without a vector for
    # the cluster's ingest pipeline to embed (cluster: one per chunk); see embedding_location.
    embedded: int = 0
    embedding_location: str = "client"
    # With a second reader (second_embedding_model): texts it embedded, and chunks of unchanged
    # documents that got its vector alone (partial updates).
    second_embedded: int = 0
    chunks_filled: int = 0
    reused_vectors: int = 0
    retries: int = 0
    seconds: float = 0.0
    embed_seconds: float = 0.0
    skipped: list[dict[str, str]] = field(default_factory=list)  # {source, reason}
    ignored: list[dict[str, str]] = field(default_factory=list)  # {source, reason}
    errors: list[dict[str, str]] = field(default_factory=list)  # {source, reason}
    warnings: list[str] = field(default_factory=list)
    plan: list[str] | None = None  # dry run: what a push would do, one line per change

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def ignored_summary(ignored: Iterable[dict[str, str]]) -> str:
    """The one line a push prints for the files it ignored (types no reader handles), counted
    per type: one line per push, however many images a folder holds.

    Example::

        ignored_summary([{"source": "img/logo.png", ...}, {"source": "Makefile", ...}])
        # "ignored 2 files of unsupported types: .png 1, no suffix 1"
    """
    counts = Counter(file_type(item["source"]) for item in ignored)
    total = sum(counts.values())
    types = ", ".join(
        f"{suffix or 'no suffix'} {count}"
        for suffix, count in sorted(counts.items(), key=lambda pair: (not pair[0], pair[0]))
    )
    files = "1 file" if total == 1 else f"{total} files"
    kinds = "an unsupported type" if len(counts) == 1 else "unsupported types"
    return f"ignored {files} of {kinds}: {types}"


def kept_foreign_warning(owner: str, source: str) -> str:
    return (
        f"kept {source} of tenant {owner!r}, gone from the folder: only a push with "
        f"--tenant {owner!r} deletes it"
    )


def foreign_write_warning(owner: str, source: str) -> str:
    """What a push without ``--tenant`` says when a file's front matter makes it replace another
    tenant's document: allowed, never silent. (A document it adds to another tenant is named in
    the plan line only: the sample docs/ do that on purpose, and a first push would warn.)"""
    return (
        f"{source} belongs to tenant {owner!r} by its front matter: this push replaces that "
        "tenant's document"
    )
