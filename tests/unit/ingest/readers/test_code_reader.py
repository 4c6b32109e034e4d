"""The source-code reader: sections per definition, and splits only at statement boundaries."""

from __future__ import annotations

import ast
import logging

import pytest

from loader.documents import Document
from loader.ingest.chunking import ChunkingConfig, chunk_document
from loader.ingest.readers.code import read_code

PYTHON = '''"""Module doc."""
import os


# Rounds a tip.
@cache
def tip(amount):
    """Ten percent."""
    return amount / 10


class Invoice:
    """An invoice."""

    currency = "INR"

    def total(self, lines):
        return sum(lines)

    class Line:
        def price(self):
            return 1
'''

GO = """package billing

// Server serves refunds.
type Server struct {
	name string
}

// Refund pays back an order.
func (s *Server) Refund(order int) error {
	if order < 0 {
		return nil
	}
	return nil
}
"""

JAVA = """package billing;

/** Refunds. */
public class Refunds {
    /** Pays. */
    public int pay(int amount) {
        return amount;
    }

    static class Line {
        int price() { return 1; }
    }
}
"""


def paths(document: Document) -> list[tuple[str, ...]]:
    return [section.heading_path for section in document.sections]


def test_python_sections_per_definition_with_signature_and_docstring():
    document = read_code(PYTHON, "pkg/billing.py", ".py")
    assert document.title == "billing.py"
    assert paths(document) == [
        (), ("tip",), ("Invoice",), ("Invoice", "total"), ("Invoice", "Line"),
        ("Invoice", "Line", "price"),
    ]  # fmt: skip
    tip = document.sections[1].text
    assert tip == (
        '```python\n# Rounds a tip.\n@cache\ndef tip(amount):\n    """Ten percent."""\n'
        "    return amount / 10\n```"
    )
    invoice = document.sections[2].text
    assert "def total(self, lines): ..." in invoice and "return sum" not in invoice
    assert '"""An invoice."""' in invoice and 'currency = "INR"' in invoice
    assert document.sections[3].text == (
        "```python\ndef total(self, lines):\n    return sum(lines)\n```"
    )


def test_go_methods_are_headed_by_their_receiver():
    document = read_code(GO, "server.go", ".go")
    assert paths(document) == [(), ("Server",), ("Server", "Refund")]
    assert document.sections[2].text.startswith("```go\n// Refund pays back an order.\nfunc (s")


def test_java_nested_classes_and_doc_comments():
    document = read_code(JAVA, "Refunds.java", ".java")
    assert paths(document) == [
        (),
        ("Refunds",),
        ("Refunds", "pay"),
        ("Refunds", "Line"),
        ("Refunds", "Line", "price"),
    ]
    assert "/** Pays. */" in document.sections[2].text
    assert "public int pay(int amount) { … }" in document.sections[1].text


def test_javascript_arrow_functions_and_classes():
    source = (
        "export const add = (a, b) => {\n  return a + b;\n};\n\n"
        "class A {\n  m() {\n    return 1;\n  }\n}\n"
    )
    assert paths(read_code(source, "a.js", ".js")) == [("add",), ("A",), ("A", "m")]


def test_a_python_syntax_error_is_indexed_as_plain_code_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING):
        document = read_code("def f(:\n    pass\n\nx = 1\n", "bad.py", ".py")
    assert paths(document) == [()]
    assert [block.kind for block in document.sections[0].blocks] == ["code", "code"]
    assert "bad.py: Python syntax error on line 1" in caplog.text
    assert "indexed as plain code" in caplog.text


def test_tree_sitter_recovers_and_warns(caplog):
    with caplog.at_level(logging.WARNING):
        document = read_code("function ok() {\n  return 1;\n}\n\nfunction bad( {\n", "a.js", ".js")
    assert ("ok",) in paths(document)
    assert "a.js: JavaScript syntax error near line 5" in caplog.text


def count_words(text: str) -> int:
    return len(text.split())


def test_a_function_too_big_for_a_chunk_is_split_only_between_statements():
    body = "\n".join(
        f"    if value == {n}:\n        total = compute(value, {n}, 'one two three four')\n"
        "        log(total)"
        for n in range(40)
    )
    source = f"def big(value):\n    total = 0\n{body}\n    return total\n"
    document = read_code(source, "big.py", ".py")
    block = document.sections[0].blocks[0]
    assert block.kind == "code" and block.statement_lines
    config = ChunkingConfig(target_tokens=60, max_tokens=80, overlap_tokens=0)
    chunks = chunk_document(document, config, count_words)
    assert len(chunks) > 3
    starts = {node.lineno for node in ast.walk(ast.parse(source)) if isinstance(node, ast.stmt)}
    lines = source.split("\n")
    rebuilt = []
    for chunk in chunks:
        code = chunk.body.split("\n")[1:-1]  # inside the fence
        assert chunk.body.startswith("```python\n") and chunk.body.endswith("\n```")
        assert lines.index(code[0]) + 1 in starts  # each piece starts with a statement
        rebuilt.extend(code)
    assert rebuilt == lines[:-1]  # nothing lost, nothing repeated


@pytest.mark.parametrize("suffix", [".ts", ".tsx", ".go", ".java", ".py"])
def test_an_empty_definition_free_file_is_module_code(suffix):
    text = {".go": "package a\n\nvar x = 1\n", ".java": "package a;\n\nimport b.C;\n"}.get(
        suffix, "const x = 1;\n" if suffix != ".py" else "x = 1\n"
    )
    document = read_code(text, f"a{suffix}", suffix)
    assert paths(document) == [()]
