"""Jupyter notebook reader (``.ipynb``, nbformat 4, read as plain JSON).

Markdown cells are read by the Markdown reader's ``markdown_events``, so their headings give the
heading paths of the cells below them; each code cell is one code block, whole, fenced with the
notebook's language (``metadata.kernelspec.language``, else ``metadata.language_info.name``,
else Python) and, for Python, with its statement boundaries for a split. Raw cells are
paragraphs. Outputs (results, plots, tracebacks) are left out: they are what the code made, not
what anyone wrote, and a base64 plot is no text to search; a debug line counts them.

nbformat is not needed: the format is plain JSON, and its validation would refuse notebooks
that are readable (extra keys), where a clear message for the few real breakages is enough.
"""

from __future__ import annotations

import contextlib
import json
import logging
from typing import Any

from loader.documents import Block, Document
from loader.ingest.readers.code import Unparsable, fence
from loader.ingest.readers.common import Heading, Rejected, assemble, normalize_space
from loader.ingest.readers.markdown import markdown_events
from loader.userfile import parse_failure

log = logging.getLogger(__name__)


def _load(text: str) -> dict[str, Any]:
    """The notebook's JSON object.

    Raises:
        Rejected: not JSON, or JSON that is not an nbformat 4 notebook.
    """
    try:
        notebook = json.loads(text)
    except json.JSONDecodeError as exc:
        raise Rejected(
            f"not a Jupyter notebook: invalid JSON on line {exc.lineno} column {exc.colno}: "
            f"{exc.msg}"
        ) from None
    except (ValueError, RecursionError) as exc:  # a number past the int-string limit; nesting
        reason = "nested too deeply" if isinstance(exc, RecursionError) else parse_failure(exc)
        raise Rejected(f"not a Jupyter notebook: invalid JSON: {reason}") from None
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        if isinstance(notebook, dict) and "worksheets" in notebook:
            raise Rejected(
                "nbformat 3 notebook; convert it with 'jupyter nbconvert --to notebook' first"
            )
        raise Rejected("not a Jupyter notebook: no 'cells' list at the top level")
    return notebook


def _language(notebook: dict[str, Any]) -> str:
    metadata = notebook.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    for key, field in (("kernelspec", "language"), ("language_info", "name")):
        value = metadata.get(key)
        if isinstance(value, dict) and isinstance(value.get(field), str) and value[field]:
            return value[field].strip().lower()
    return "python"


def _source(cell: Any, number: int) -> str:
    """A cell's source text (a string or a list of lines in the file)."""
    if not isinstance(cell, dict):
        raise Rejected(f"cell {number} is not an object")
    source = cell.get("source", "")
    if isinstance(source, list) and all(isinstance(line, str) for line in source):
        return "".join(source)
    if isinstance(source, str):
        return source
    raise Rejected(f"cell {number}: 'source' is neither a string nor a list of strings")


def _code_block(code: str, language: str) -> Block:
    """A code cell as one block; Python cells know their statement starts."""
    breaks: tuple[int, ...] = ()
    if language == "python":
        from loader.ingest.readers.code.python import parse_python

        # IPython magics (%timeit), or a cell that does not parse: no boundaries to split at.
        with contextlib.suppress(Unparsable):
            # +1: the fence's opening line comes first.
            breaks = tuple(sorted(line + 1 for line in parse_python(code).statement_starts))
    return Block("code", fence(code, language), statement_lines=breaks)


def read_notebook(text: str, source: str, stem: str) -> Document:
    """Read a Jupyter notebook (see the module docstring)."""
    notebook = _load(text)
    language = _language(notebook)
    events: list[Heading | Block] = []
    outputs = 0
    for number, cell in enumerate(notebook["cells"], start=1):
        body = _source(cell, number)
        kind = cell.get("cell_type")
        if not body.strip():
            continue
        if kind == "markdown":
            events.extend(markdown_events(body))
        elif kind == "code":
            events.append(_code_block(body.strip("\n"), language))
            outputs += len(cell.get("outputs") or [])
        elif kind == "raw":
            events.append(Block("paragraph", normalize_space(body)))
        else:
            raise Rejected(f"cell {number}: unknown cell_type {kind!r}")
    if outputs:
        log.debug("%s: %d cell outputs left out (only sources are indexed)", source, outputs)
    metadata = notebook.get("metadata")
    title = metadata.get("title") if isinstance(metadata, dict) else None
    return assemble(source, stem, events, title=title if isinstance(title, str) else None)
