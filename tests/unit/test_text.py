"""Lone surrogates, the text no UTF-8 can carry (``loader.text``), and where they are refused."""

from __future__ import annotations

import re

import pytest

from loader.documents import Block, Document, Section
from loader.errors import ConfigError, InputError
from loader.ingest.plan import identify
from loader.query.request import SearchRequest
from loader.resolve import resolve_settings
from loader.settings import Settings
from loader.terminal import printable
from loader.text import check_document, first_surrogate, require_unicode


@pytest.mark.parametrize(
    ("value", "found"),
    [
        ("caf\udce9", "\udce9"),
        ("plain Café 日本語 😀", None),  # a pair decodes to one code point: never a surrogate
        (["ok", {"key": ("x", "\ud800")}], "\ud800"),
        ({"\udfff": "a key"}, "\udfff"),
        (42, None),
    ],
)
def test_first_surrogate_looks_into_strings_lists_and_mappings(value, found) -> None:
    assert first_surrogate(value) == found


def test_require_unicode_names_the_value_escaped_and_the_fix() -> None:
    assert require_unicode("tenant", "acme") == "acme"
    with pytest.raises(ConfigError) as caught:
        require_unicode("collection", "caf\udce9", "pass another with --collection")
    message = str(caught.value)
    assert message.startswith("collection 'caf\\udce9' is not valid UTF-8 text")
    assert message.endswith("; pass another with --collection")
    message.encode("utf-8")  # printable, loggable, JSON-able


def test_a_setting_from_the_environment_is_refused_without_showing_it() -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_settings(env={"LOADER_REWRITE_API_KEY": "sk-secret\udce9"})
    assert str(caught.value) == (
        "setting 'rewrite_api_key' from $LOADER_REWRITE_API_KEY is not valid UTF-8 text "
        "(an undecodable byte)"
    )


@pytest.mark.parametrize("field", ["question", "tenant"])
def test_a_search_with_a_surrogate_is_refused_by_name(field) -> None:
    values = {"question": "refund", "tenant": "acme", field: "x\ud800"}
    with pytest.raises(ConfigError, match=f"^{field} 'x\\\\ud800' is not valid UTF-8 text"):
        SearchRequest.from_settings(Settings(), values["question"], tenant=values["tenant"])


def test_printable_escapes_surrogates() -> None:
    assert printable("caf\udce9.md") == "caf\\udce9.md"


def _document(title="Lab notes", heading="Results", text="Sample A.", metadata=None) -> Document:
    section = Section(heading_path=(heading,), blocks=[Block("paragraph", text)])
    return Document("lab.ipynb", title, [section], metadata or {})


@pytest.mark.parametrize(
    ("document", "where"),
    [
        (_document(title="Lab \udc9f"), "title holds the lone surrogate U+DC9F"),
        # a BEIR corpus id (a folder's files are refused by name before they are read)
        (Document("doc-\udc80", "T", [], {}), "its source holds the lone surrogate U+DC80"),
        (_document(heading="R\ud800"), "a heading holds the lone surrogate U+D800"),
        (_document(text="Sample \udfff."), "the text holds the lone surrogate U+DFFF"),
        (_document(metadata={"tags": ["ok", "b\udc80"]}), "metadata 'tags' holds"),
        # a notebook's metadata key, decoded from a JSON escape
        (_document(metadata={"t\udc80g": "ok"}), "metadata 't\\udc80g' holds"),
    ],
)
def test_a_document_holding_a_surrogate_is_refused_naming_where(document, where) -> None:
    with pytest.raises(InputError, match="^" + re.escape(f"not valid Unicode: {where}")):
        check_document(document)


def test_push_planning_refuses_such_a_document_before_hashing_it() -> None:
    """Documents from any source (a folder, a BEIR corpus) pass here: the id and the hash would
    otherwise fail to encode it."""
    check_document(_document())  # a clean document passes
    with pytest.raises(InputError, match="^not valid Unicode: the text holds"):
        identify(_document(text="x\udc9f"), "kb", Settings(), tenant=None)
