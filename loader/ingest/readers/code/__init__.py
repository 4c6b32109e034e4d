"""Source-code reader: one section per function, method and class, found by the language's parser.

A language module (``python`` on the standard library's ``ast``, ``treesitter`` for JavaScript,
TypeScript, Go and Java) turns a file into a ``Parsed``: its top-level ``Definition`` tree and
the lines where statements start. ``code_document`` turns that into sections:

- a function or method is one section (heading path ``Class > method``) holding one code block
  with its whole source — decorators, signature, docstring or doc comment, body;
- a class is one section holding the class without its members' bodies (each member stands as
  its signature), followed by a section per member: a class is always split at its methods, so
  every method's chunk is headed ``file > Class > method``;
- the code between definitions (imports, constants, statements) is a section with an empty
  heading path.

The document title is the file name, so chunk prefixes read ``billing.py > Invoice > total``.
Each block carries ``statement_lines``, which tell the chunker where a block too large
for one chunk may be split (the parser's statement boundaries), so nothing is cut mid-statement.
"""

from __future__ import annotations

import logging
import textwrap
from dataclasses import dataclass, field

from loader.documents import Block, Document, Section
from loader.ingest.readers.common import Rejected

__all__ = ["CODE_LANGUAGES", "Definition", "Parsed", "Unparsable", "read_code"]

log = logging.getLogger(__name__)

# suffix -> language (the code fence's info string and the parser to use)
CODE_LANGUAGES = {
    ".py": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".java": "java",
}


@dataclass
@dataclass(frozen=True)
class Definition:
    """A function, method or class: its lines (0-based, ``end`` exclusive) and members."""

    name: str
    start: int  # first line, decorators and the doc comment above it included
    end: int
    signature: str  # what stands for it inside its class's section, e.g. "def total(self): ..."
    members: tuple[Definition, ...] = ()  # a class's methods and nested classes
    owner: str = ""  # a Go method's receiver type: the method is headed "owner > name"


class Unparsable(Exception):
    """Raised by a language module for a file its parser refuses; the message names the line."""


@dataclass
class Parsed:
    """What a language module found in a file."""

    definitions: list[Definition]
    statement_starts: set[int] = field(default_factory=set)  # 0-based lines
    problem: str = ""  # a syntax error the parser recovered from, reported as a warning


def fence(code: str, language: str) -> str:
    """``code`` as a fenced block with its language (the chunker keeps the fence on pieces)."""
    marker = "~~~" if "```" in code else "```"
    return f"{marker}{language}\n{code}\n{marker}"


def _block(lines: list[str], starts: list[int], language: str) -> Block | None:
    """A fenced code block of ``lines``; ``starts`` are indices into ``lines`` where statements
    begin. Blank lines at either end are dropped, the common indentation removed."""
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        return None
    last = max(i for i, line in enumerate(lines) if line.strip())
    code = textwrap.dedent("\n".join(lines[first : last + 1]))
    # +1: the fence's opening line comes first.
    breaks = tuple(sorted({s - first + 1 for s in starts if first < s <= last}))
    return Block("code", fence(code, language), statement_lines=breaks)


class _Builder:
    """Turns definitions into sections, in file order."""

    def __init__(self, lines: list[str], parsed: Parsed, language: str) -> None:
        self.lines = lines
        self.starts = parsed.statement_starts
        self.language = language
        self.sections: list[Section] = []

    def add(self, path: tuple[str, ...], lines: list[str], starts: list[int]) -> None:
        block = _block(lines, starts, self.language)
        if block is not None:
            self.sections.append(Section(path, [block]))

    def span(self, path: tuple[str, ...], start: int, end: int) -> None:
        """Lines ``start..end`` of the file as one section."""
        starts = [line - start for line in self.starts if start <= line < end]
        self.add(path, self.lines[start:end], starts)

    def module(self, definitions: list[Definition]) -> None:
        """The top-level definitions, and the code around them as heading-less sections."""
        cursor = 0
        for definition in definitions:
            self.span((), cursor, definition.start)
            self.definition((), definition)
            cursor = max(cursor, definition.end)
        self.span((), cursor, len(self.lines))

    def definition(self, parent: tuple[str, ...], definition: Definition) -> None:
        path = (*parent, *filter(None, [definition.owner]), definition.name)
        if not definition.members:
            self.span(path, definition.start, definition.end)
            return
        lines: list[str] = []
        starts: list[int] = []
        cursor = definition.start
        for member in definition.members:
            self._keep(lines, starts, cursor, member.start)
            indent = self.lines[member.start][: _indent_width(self.lines[member.start])]
            starts.append(len(lines))
            lines.extend(indent + line for line in member.signature.split("\n"))
            cursor = member.end
        self._keep(lines, starts, cursor, definition.end)
        self.add(path, lines, starts)
        for member in definition.members:
            self.definition(path, member)

    def _keep(self, lines: list[str], starts: list[int], start: int, end: int) -> None:
        starts.extend(len(lines) + line - start for line in self.starts if start <= line < end)
        lines.extend(self.lines[start:end])


def _indent_width(line: str) -> int:
    return len(line) - len(line.lstrip())


def code_document(text: str, source: str, language: str, parsed: Parsed) -> Document:
    """The document of a parsed source file (see the module docstring)."""
    name = source.rsplit("/", 1)[-1]
    if parsed.problem:
        log.warning("%s: %s", source, parsed.problem)
    builder = _Builder(text.split("\n"), parsed, language)
    builder.module(parsed.definitions)
    if not builder.sections:
        raise Rejected("no code found")
    return Document(source=source, title=name, sections=builder.sections)


def plain_code_document(text: str, source: str, language: str, problem: str) -> Document:
    """A file the parser refused, as code blocks split at blank lines in one section: its text
    stays findable, its structure is lost (and the warning says so)."""
    log.warning("%s: %s; indexed as plain code, without sections", source, problem)
    blocks: list[Block] = []
    for paragraph in text.split("\n\n"):
        block = _block(paragraph.split("\n"), [], language)
        if block is not None:
            blocks.append(block)
    if not blocks:
        raise Rejected("no code found")
    return Document(source=source, title=source.rsplit("/", 1)[-1], sections=[Section((), blocks)])


def read_code(text: str, source: str, suffix: str) -> Document:
    """Read a source file whose suffix is in ``CODE_LANGUAGES``."""
    language = CODE_LANGUAGES[suffix]
    if language == "python":
        from loader.ingest.readers.code.python import parse_python as parse
    else:  # imported here: only pushes with such files pay for the grammars
        from loader.ingest.readers.code.treesitter import parse_tree_sitter as parse
    try:
        parsed = parse(text, language)
    except Unparsable as exc:
        return plain_code_document(text, source, language, str(exc))
    return code_document(text, source, language, parsed)
