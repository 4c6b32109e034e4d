"""JavaScript, TypeScript, Go and Java through tree-sitter (grammars from their PyPI wheels).

What counts as a definition, per language:

- JavaScript / TypeScript: function and generator declarations, classes (members: methods,
  and fields whose value is a function or a class — ``static Inner = class {...}``), namespaces
  (``namespace N {...}``, members as in a file), interfaces, and ``const f = () => {...}``.
  ``export`` is part of what it wraps.
- Go: functions, methods (headed ``Receiver > method``, wherever they are in the file) and
  type declarations.
- Java: classes, interfaces, enums and records (members: methods, constructors, nested types).

A definition starts at the comment lines right above it (a doc comment is part of it). Members
that share a line with their class's first or last line stay in the class's own section.
tree-sitter recovers from syntax errors: the file is still read, and a warning names the line.
"""

from __future__ import annotations

import functools
import textwrap
from dataclasses import dataclass

import tree_sitter

from loader.ingest.readers.code import Definition, Parsed

_COMMENTS = frozenset({"comment", "line_comment", "block_comment"})
# Nodes whose named children are statements (or members): a split may start before each.
_BLOCKS = frozenset(
    {
        "program", "source_file", "statement_block", "class_body", "block", "statement_list",
        "constructor_body", "interface_body", "enum_body", "enum_body_declarations",
        "switch_body", "switch_block", "switch_block_statement_group", "expression_case",
        "default_case", "type_case", "communication_case", "switch_case", "switch_default",
    }
)  # fmt: skip
_FUNCTION_VALUES = frozenset(
    {"arrow_function", "function_expression", "function", "generator_function"}
)
_CLASS_VALUES = frozenset({"class"})


@dataclass(frozen=True)
class _Grammar:
    functions: frozenset[str]  # definitions kept whole
    containers: frozenset[str]  # definitions whose members get their own sections
    wholes: frozenset[str] = frozenset()  # types and interfaces: whole, no members


_JS = _Grammar(
    functions=frozenset({"function_declaration", "generator_function_declaration",
                         "method_definition"}),
    containers=frozenset({"class_declaration", "abstract_class_declaration", "class",
                          "internal_module", "module"}),
    wholes=frozenset({"interface_declaration"}),
)  # fmt: skip
_GRAMMARS = {
    "javascript": _JS,
    "typescript": _JS,
    "tsx": _JS,
    "go": _Grammar(
        functions=frozenset({"function_declaration", "method_declaration"}),
        containers=frozenset(),
        wholes=frozenset({"type_declaration"}),
    ),
    "java": _Grammar(
        functions=frozenset({"method_declaration", "constructor_declaration"}),
        containers=frozenset(
            {"class_declaration", "interface_declaration", "enum_declaration", "record_declaration"}
        ),
    ),  # fmt: skip
}
LANGUAGE_NAMES = {"javascript": "JavaScript", "typescript": "TypeScript", "tsx": "TSX",
                  "go": "Go", "java": "Java"}  # fmt: skip


@functools.cache
def _parser(language: str) -> tree_sitter.Parser:
    if language == "javascript":
        import tree_sitter_javascript as grammar

        capsule = grammar.language()
    elif language in ("typescript", "tsx"):
        import tree_sitter_typescript as grammar

        capsule = grammar.language_tsx() if language == "tsx" else grammar.language_typescript()
    elif language == "go":
        import tree_sitter_go as grammar

        capsule = grammar.language()
    else:
        import tree_sitter_java as grammar

        capsule = grammar.language()
    return tree_sitter.Parser(tree_sitter.Language(capsule))


def _text(node: tree_sitter.Node | None) -> str:
    return node.text.decode("utf-8", "replace") if node is not None and node.text else ""


class _Reader:
    """Finds the definitions of one parsed file."""

    def __init__(self, source: bytes, language: str) -> None:
        self.source = source
        self.language = language
        self.grammar = _GRAMMARS[language]

    def core(self, node: tree_sitter.Node) -> tuple[str, tree_sitter.Node] | None:
        """``(name, node that has the body)`` of a definition, through ``export``, a namespace's
        expression statement, ``const f = () => {}`` and function-valued fields; else None."""
        grammar = self.grammar
        if node.type in ("export_statement", "expression_statement"):
            inner = node.child_by_field_name("declaration") or next(
                (child for child in node.named_children if child.type not in _COMMENTS), None
            )
            return self.core(inner) if inner is not None else None
        if node.type in ("lexical_declaration", "variable_declaration"):
            declarators = [c for c in node.named_children if c.type == "variable_declarator"]
            if len(declarators) == 1:
                return self._valued(declarators[0], declarators[0].child_by_field_name("name"))
            return None
        if node.type in ("public_field_definition", "field_definition"):
            name = node.child_by_field_name("name") or node.child_by_field_name("property")
            return self._valued(node, name)
        if node.type == "type_declaration":
            spec = next((c for c in node.named_children if c.type == "type_spec"), None)
            return (_text(spec.child_by_field_name("name")), node) if spec is not None else None
        kinds = grammar.functions | grammar.containers | grammar.wholes
        if node.type in kinds and node.child_by_field_name("name") is not None:
            return _text(node.child_by_field_name("name")), node
        return None

    def _valued(self, holder: tree_sitter.Node, name: tree_sitter.Node | None):
        value = holder.child_by_field_name("value")
        if name is None or value is None:
            return None
        if value.type in _FUNCTION_VALUES | _CLASS_VALUES:
            return _text(name), value
        return None

    def definitions(self, nodes: list[tree_sitter.Node], floor: int, ceiling: int) -> list:
        """The definitions among sibling ``nodes`` that own their lines (strictly between
        rows ``floor`` and ``ceiling``)."""
        found: list[Definition] = []
        last_end = floor
        for node in nodes:
            named = self.core(node)
            start, end = node.start_point[0], node.end_point[0]
            if named is None or start <= last_end or end >= ceiling:
                continue
            found.append(self.definition(node, *named, max(floor, last_end)))
            last_end = end
        return found

    def definition(self, outer, name: str, core, floor: int) -> Definition:
        start = outer.start_point[0]
        sibling = outer.prev_named_sibling
        while (
            sibling is not None
            and sibling.type in _COMMENTS
            and sibling.end_point[0] == start - 1
            and sibling.start_point[0] > floor
        ):
            start = sibling.start_point[0]
            sibling = sibling.prev_named_sibling
        body = core.child_by_field_name("body")
        members: list[Definition] = []
        if core.type in self.grammar.containers and body is not None:
            children = list(body.named_children)
            for child in list(children):
                if child.type == "enum_body_declarations":
                    children.extend(child.named_children)
            members = self.definitions(children, outer.start_point[0], outer.end_point[0])
        return Definition(
            name=name,
            start=start,
            end=outer.end_point[0] + 1,
            signature=self._signature(outer, body),
            members=tuple(members),
            owner=self._receiver(core),
        )

    def _receiver(self, node: tree_sitter.Node) -> str:
        """A Go method's receiver type (``Server`` for ``func (s *Server) Handle()``), else ""."""
        receiver = node.child_by_field_name("receiver")
        if receiver is None or self.language != "go" or node.type != "method_declaration":
            return ""
        kinds = ("type_identifier", "generic_type")
        stack = list(receiver.named_children)
        while stack:
            child = stack.pop(0)
            if child.type in kinds:
                return _text(child).split("[")[0]
            stack.extend(child.named_children)
        return ""

    def _signature(self, outer: tree_sitter.Node, body: tree_sitter.Node | None) -> str:
        """The definition up to its body, then ``{ … }``; without a body, all of it."""
        end = body.start_byte if body is not None else outer.end_byte
        head = self.source[outer.start_byte : end].decode("utf-8", "replace").rstrip()
        head = textwrap.dedent(" " * outer.start_point[1] + head).rstrip()
        return f"{head} {{ … }}" if body is not None else head


def _statement_starts(root: tree_sitter.Node) -> set[int]:
    """Rows where a statement or member starts (a comment right above one starts it)."""
    starts: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        children = node.named_children
        stack.extend(children)
        if node.type not in _BLOCKS:
            continue
        previous = None
        for child in children:
            attached = (
                previous is not None
                and previous.type in _COMMENTS
                and previous.end_point[0] == child.start_point[0] - 1
            )
            if not attached:
                starts.add(child.start_point[0])
            previous = child
    return starts


def _first_error(root: tree_sitter.Node) -> int | None:
    """The 0-based row of the first syntax error tree-sitter recovered from."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            return node.start_point[0]
        stack.extend(reversed([child for child in node.children if child.has_error or
                               child.is_missing]))  # fmt: skip
    return None


def parse_tree_sitter(text: str, language: str) -> Parsed:
    """Definitions and statement starts of a JavaScript, TypeScript, Go or Java file."""
    source = text.encode("utf-8")
    root = _parser(language).parse(source).root_node
    reader = _Reader(source, language)
    definitions = reader.definitions(list(root.named_children), -1, root.end_point[0] + 1)
    problem = ""
    if root.has_error:
        row = _first_error(root)
        where = f" near line {row + 1}" if row is not None else ""
        problem = (
            f"{LANGUAGE_NAMES[language]} syntax error{where}; read around it, so a definition "
            "there may be cut"
        )
    return Parsed(definitions, _statement_starts(root), problem)
