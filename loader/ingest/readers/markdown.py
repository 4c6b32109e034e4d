"""Markdown reader: CommonMark (plus pipe tables) parsed by markdown-it-py, with front matter.

Front matter is YAML between ``---`` lines at the very top (closed by ``---`` or ``...``)::

    ---
    title: Refund policy   # a comment
    tags: [refunds, orders]
    lang: en
    published: 2024-05-01
    ---

It is read by PyYAML's safe loader, so comments, quoting and block scalars mean what they mean
in YAML (``tenant: alpha # comment`` is the tenant ``alpha``). Every key but ``tenant`` keeps the
text it was written with (``published: 2024-05-01`` is the string ``"2024-05-01"``, a list a list
of strings), as the documents' hashes always had it; ``tenant`` is read as YAML types it, so that
``tenant: true``, a list or a date is refused instead of filing the document under "True". A
front matter that is no valid YAML is an error naming the line, because silently dropping
metadata (a tenant!) is worse than refusing the file.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import yaml

from loader.documents import Block, Document
from loader.ingest.readers.common import Heading, Rejected, assemble
from loader.ingest.readers.markdown_tokens import parser, token_events
from loader.ingest.readers.markdown_windows import WHOLE_BODY_CHARS, windowed_events

LIST_KEYS = frozenset({"tags"})
# Values read from a front matter: far above any real one, far below what aliases (YAML's
# "billion laughs") or a self-referencing anchor would expand to.
MAX_FRONT_MATTER_VALUES = 10_000
MAX_FRONT_MATTER_DEPTH = 20


def parse_front_matter(text: str) -> tuple[dict[str, Any], str, int]:
    """Split front matter off the top of a Markdown text.

    Args:
        text: the whole file.

    Returns:
        ``(metadata, rest, lines)``: the parsed keys (lower-cased), the Markdown after the
        closing ``---``, and how many lines the front matter took (for line numbers).

    Raises:
        Rejected: naming the line of what is not valid YAML or not ``key: value`` pairs, an
            unclosed block, or a ``published`` value that is not an ISO date.
    """
    lines = text.split("\n")
    if lines[0].strip() != "---":
        return {}, text, 0
    end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
    if end is None:
        raise Rejected("front matter opened on line 1 is never closed with '---'")
    metadata, key_lines = _yaml_pairs("".join(line + "\n" for line in lines[1:end]))
    _normalize_lists(metadata)
    _check_published(metadata, key_lines.get("published", 2))
    return metadata, "\n".join(lines[end + 1 :]), end + 1


def _yaml_pairs(block: str) -> tuple[dict[str, Any], dict[str, int]]:
    """The ``key: value`` pairs of the YAML between the ``---`` lines, and each key's line (the
    first is line 2).

    Raises:
        Rejected: naming the line of the first YAML error, or of what is no mapping.
    """
    loader = yaml.SafeLoader(block)
    try:
        root = loader.get_single_node()  # composed, not yet constructed: no value typed yet
        if root is None:
            return {}, {}
        if not isinstance(root, yaml.MappingNode):
            raise Rejected(
                f"malformed front matter on line {_line(root)}: expected 'key: value' lines, "
                f"got a YAML {root.id}"
            )
        metadata: dict[str, Any] = {}
        key_lines: dict[str, int] = {}
        budget = [MAX_FRONT_MATTER_VALUES]
        for key_node, value_node in root.value:
            if not isinstance(key_node, yaml.ScalarNode) or not key_node.value.strip():
                raise Rejected(f"malformed front matter on line {_line(key_node)}: not a key")
            key = key_node.value.lower()
            key_lines[key] = _line(key_node)
            if key == "tenant":
                metadata[key] = _typed(loader, value_node)
            else:
                metadata[key] = _as_written(value_node, budget, 0)
        return metadata, key_lines
    except yaml.MarkedYAMLError as exc:
        mark = exc.context_mark or exc.problem_mark  # where the bad construct begins
        where = f" on line {mark.line + 2}" if mark is not None else ""
        raise Rejected(
            f"malformed front matter{where}: not valid YAML ({exc.problem or exc.context})"
        ) from None
    except yaml.YAMLError as exc:
        raise Rejected(f"malformed front matter: not valid YAML ({exc})") from None
    except RecursionError:  # PyYAML composes nested collections recursively ("[[[[...")
        raise Rejected("malformed front matter: not valid YAML (nested too deeply)") from None
    finally:
        loader.dispose()


def _line(node: yaml.Node) -> int:
    """The file's line of ``node`` (the front matter starts on line 2)."""
    return node.start_mark.line + 2


def _typed(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    """``node`` as YAML's safe loader types it (a bool, a date, a mapping, None...).

    Raises:
        Rejected: a value YAML types but cannot build (``2024-13-45`` is typed a date; a number
            of more digits than Python converts).
    """
    try:
        return loader.construct_object(node, deep=True)
    except (ValueError, OverflowError) as exc:
        raise Rejected(
            f"malformed front matter on line {_line(node)}: {node.value!r:.60} is no valid "
            f"YAML value ({exc}); quote it"
        ) from None


def _as_written(node: yaml.Node, budget: list[int], depth: int) -> Any:
    """``node`` with every scalar as the text it was written with (a list a list, a mapping a
    dict); ``budget`` counts the values left, so that aliases cannot make it expand forever."""
    budget[0] -= 1
    if budget[0] < 0 or depth > MAX_FRONT_MATTER_DEPTH:
        raise Rejected(
            f"malformed front matter on line {_line(node)}: more than "
            f"{MAX_FRONT_MATTER_VALUES:,} values or {MAX_FRONT_MATTER_DEPTH} levels (aliases?)"
        )
    if isinstance(node, yaml.SequenceNode):
        return [_as_written(item, budget, depth + 1) for item in node.value]
    if isinstance(node, yaml.MappingNode):
        return {
            str(_as_written(key, budget, depth + 1)): _as_written(value, budget, depth + 1)
            for key, value in node.value
        }
    return node.value


def _normalize_lists(metadata: dict[str, Any]) -> None:
    """List keys are lists (``tags: refunds, orders`` too); an empty other key is ``""``."""
    for key in LIST_KEYS & metadata.keys():
        if isinstance(metadata[key], str):  # "tags: refunds, orders"
            metadata[key] = [tag.strip() for tag in metadata[key].split(",") if tag.strip()]
    for key, value in list(metadata.items()):
        if value == [] and key not in LIST_KEYS:
            metadata[key] = ""


def _check_published(metadata: dict[str, Any], line_number: int) -> None:
    """Refuse a ``published`` value that is not an ISO date, naming its line."""
    published = metadata.get("published")
    if not published:
        return
    try:
        dt.date.fromisoformat(str(published)[:10])
    except ValueError:
        raise Rejected(
            f"malformed front matter on line {line_number}: published {published!r} is not "
            "an ISO date (YYYY-MM-DD)"
        ) from None


def markdown_events(text: str) -> list[Heading | Block]:
    """Headings and blocks of a Markdown text, in order.

    A body of up to ``WHOLE_BODY_CHARS`` characters is parsed at once; a larger one in windows
    of lines (``markdown_windows``), so that the tokens of a 10 MB table or list never all exist
    at once.
    """
    if len(text) <= WHOLE_BODY_CHARS:
        return token_events(parser.parse(text))
    return windowed_events(text)


def read_markdown(text: str, source: str, stem: str) -> Document:
    """Read a Markdown document (front matter, headings, paragraphs, code, tables, lists)."""
    metadata, body, _ = parse_front_matter(text)
    title = str(metadata.pop("title", "") or "").strip() or None
    if not body.strip():
        raise Rejected("no text after the front matter" if metadata or title else "empty file")
    return assemble(source, stem, markdown_events(body), title=title, metadata=metadata)
