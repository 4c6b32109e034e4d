"""The data that flows from readers through chunkers to the index.

A reader turns a file into a ``Document``: a title, metadata, and its sections in document order.
Each ``Section`` carries its heading path (the headings above it, outermost first, *without* the
document title) and its blocks: paragraphs, code, tables and lists kept as separate units so the
chunkers can keep them whole. A chunker turns a document into ``Chunk`` objects.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Literal

BlockKind = Literal["paragraph", "code", "table", "list"]
PATH_SEPARATOR = " > "

# What a document id hashes (``loader.ingest.plan.document_id``). ``loader apply`` writes it into
# the chunk index's mapping ``_meta``, and push refuses an index built with another scheme: ids of
# two schemes in one index would let a push overwrite or delete what it does not own.
DOC_ID_SCHEME = "tenant/collection/source"


@dataclass
class Block:
    kind: BlockKind
    text: str
    page: int | None = None  # 1-based page number, for PDFs
    # Code read through its syntax tree (readers.code, notebooks): the indices into
    # text.split("\n") where a statement starts. A code block too large for one chunk is split
    # only there (chunking.units), never mid-statement.
    statement_lines: tuple[int, ...] = ()


@dataclass
class Section:
    heading_path: tuple[str, ...]
    blocks: list[Block] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n\n".join(block.text for block in self.blocks)


@dataclass
class Document:
    source: str  # path relative to the pushed folder, with forward slashes
    title: str
    sections: list[Section]
    metadata: dict[str, Any] = field(default_factory=dict)  # tenant, lang, tags, published, ...


@dataclass
class Chunk:
    """One unit of retrieval.

    ``body`` is the chunk's own text; ``text`` (what is indexed and embedded) is the body prefixed
    with the document title and heading path, e.g. ``"Refund policy > Late deliveries\\n\\n..."``.
    ``title`` and ``heading_path`` are the whole trail (stored, searched and shown); ``prefix``
    is what the model's budget holds of it: for a deep path, the title and the innermost
    headings (``"Admin guide > … > Proxy > Certificates"``, see
    ``loader.ingest.chunking.limits.fit_prefix``).
    """

    source: str
    position: int  # 0-based order of the chunk within its document
    title: str
    heading_path: tuple[str, ...]
    body: str
    prefix: str
    section_id: str = ""  # id of the parent section (parent-document expansion)
    parent_text: str = ""  # the whole parent section, for parent-document expansion
    window: str = ""  # surrounding sentences, for sentence-window expansion
    page: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return f"{self.prefix}\n\n{self.body}"

    @property
    def content_hash(self) -> str:
        """Hash of everything that goes into the index for this chunk."""
        digest = hashlib.sha256()
        for part in (self.text, self.parent_text, self.window, repr(sorted(self.metadata.items()))):
            digest.update(part.encode("utf-8"))
            digest.update(b"\x00")
        return digest.hexdigest()


_SEPARATOR, _ESCAPE = "\x1f", "\x1e"


def joined_parts(parts: tuple[str, ...]) -> str:
    """``parts`` as one string that no other tuple gives: joined by the unit separator as ids
    always were, so ordinary names keep their ids; parts that hold the separator or the escape
    character are escaped first. Joined plainly, ``('px\x1fpy', 'kb')`` and ``('px', 'py\x1fkb')``
    were one id, and a push of one tenant overwrote the other's document. An escaped join always
    holds the escape character, which a plain one never does, so the two kinds cannot meet."""
    if not any(_SEPARATOR in part or _ESCAPE in part for part in parts):
        return _SEPARATOR.join(parts)
    return _SEPARATOR.join(
        part.replace(_ESCAPE, _ESCAPE * 2).replace(_SEPARATOR, _ESCAPE + _SEPARATOR)
        for part in parts
    )


def section_id(source: str, heading_path: tuple[str, ...], ordinal: int) -> str:
    """A stable id for a section: its source, heading path and ordinal within the document."""
    raw = joined_parts((source, *heading_path, str(ordinal)))
    return hashlib.sha1(raw.encode("utf-8")).hexdigest()[:16]
