"""Document identity and push scope: pure, no cluster."""

from __future__ import annotations

import datetime
import re

import pytest

from loader.documents import Document, Section, joined_parts
from loader.errors import InputError
from loader.ingest.plan import document_id, identify, scope_query
from loader.settings import Settings


def doc(source: str = "pricing.md", **metadata) -> Document:
    return Document(source=source, title="Pricing", sections=[Section(())], metadata=metadata)


def test_same_path_in_two_tenants_is_two_documents():
    settings = Settings()
    acme, _ = identify(doc(), "kb", settings, "acme")
    globex, _ = identify(doc(), "kb", settings, "globex")
    assert acme != globex
    assert acme == document_id("acme", "kb", "pricing.md")


def test_id_parts_cannot_be_shifted_between_fields():
    assert document_id("a", "b/c", "d") != document_id("a/b", "c", "d")
    assert document_id("ab", "c", "d") != document_id("a", "bc", "d")


# Ids written before names could hold the separator; they must not change (an index would see
# every document as new and removed at once).
@pytest.mark.parametrize(
    ("parts", "known_id"),
    [
        (("acme", "kb", "pricing.md"), "537651528403d065f7b7"),
        (("", "kb", "a/b.md"), "0de13dedcfb980dc9908"),
        (("t é", "docs", "x y/ü.md"), "0cef51bc827a47cb9701"),
        (("px", "py", "kb"), "0c6e4b3191bb0f082bf6"),
    ],
)
def test_ordinary_names_keep_their_ids(parts, known_id):
    assert document_id(*parts) == known_id


def test_ids_stay_distinct_whatever_the_names_hold():
    # A tenant or collection holding the unit separator once joined to the same string.
    assert document_id("px\x1fpy", "kb", "g.md") != document_id("px", "py\x1fkb", "g.md")
    tricky = [
        "a",
        "a\x1f",
        "\x1fa",
        "a\x1e",
        "\x1e",
        "\x1e\x1f",
        "\x1f\x1e",
        "",
        "\x1f",
        "a\x1e\x1fb",
    ]
    tuples = {(t, c, "g.md") for t in tricky for c in tricky}
    assert len({document_id(*parts) for parts in tuples}) == len(tuples)
    assert len({joined_parts(parts) for parts in tuples}) == len(tuples)


def test_tenant_comes_from_the_push_then_front_matter_then_settings():
    settings = Settings(tenant="fallback")
    plain, named = doc(), doc(tenant="partners")
    identify(plain, "kb", settings, None)
    identify(named, "kb", settings, None)
    assert (plain.metadata["tenant"], named.metadata["tenant"]) == ("fallback", "partners")
    pushed = doc(tenant="acme")
    identify(pushed, "kb", settings, "acme")
    assert pushed.metadata["tenant"] == "acme"


def test_front_matter_naming_another_tenant_than_the_push_is_refused():
    with pytest.raises(
        InputError, match="names tenant 'globex' but this push is for tenant 'acme'"
    ):
        identify(doc(tenant="globex"), "kb", Settings(), "acme")


@pytest.mark.parametrize(
    "named, message",
    [
        (["a", "b"], r"must be a name, got list \['a', 'b'\]"),  # YAML tenant: [a, b]
        ({"a": 1}, "must be a name, got dict"),
        (True, "must be a name, got bool"),  # YAML tenant: yes
        (datetime.date(2024, 5, 1), "must be a name, got date"),
        ("  ", "'  ' must not be empty or blank"),
        ("acme ", "'acme ' must not start or end with whitespace"),
        ("ac\x07me", r"'ac\\x07me' must not hold the control character U\+0007"),
    ],
)
def test_a_front_matter_tenant_that_is_no_usable_name_is_refused(named, message):
    with pytest.raises(InputError, match=r"^its front matter's tenant " + message):
        identify(doc(tenant=named), "kb", Settings(), None)


def test_a_front_matter_tenant_may_be_a_number_or_empty():
    numbered, empty = doc(tenant=42), doc(tenant="")
    identify(numbered, "kb", Settings(), None)
    identify(empty, "kb", Settings(tenant="fallback"), None)
    assert (numbered.metadata["tenant"], empty.metadata["tenant"]) == ("42", "fallback")


def test_scope_query_filters_on_tenant_and_collection():
    assert scope_query("acme", "kb") == {
        "bool": {"filter": [{"term": {"tenant": "acme"}}, {"term": {"collection": "kb"}}]}
    }


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("true", "must be a name, got bool True"),
        ("No", "must be a name, got bool False"),
        ("{x: 1}", "must be a name, got dict {'x': 1}"),
        ("2024-05-01", "must be a name, got date datetime.date(2024, 5, 1)"),
        ("[a, b]  # two tenants", "must be a name, got list ['a', 'b']"),
        ("|\n  acme", "'acme\\n' must not start or end with whitespace"),
    ],
)
def test_a_markdown_tenant_yaml_reads_as_no_name_is_refused(
    tmp_path, value: str, message: str
) -> None:
    """A tenant YAML reads as a bool, a mapping or a date must not become the tenant "true",
    "{x: 1}" or "2024-05-01"."""
    from loader.ingest.readers import read_document

    path = tmp_path / "guide.md"
    path.write_text(f"---\ntenant: {value}\n---\nText.\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"^its front matter's tenant " + re.escape(message)):
        identify(read_document(path, tmp_path, 1000), "kb", Settings(), None)


@pytest.mark.parametrize(("value", "tenant"), [("null", "fallback"), ("~", "fallback"),
                                              ('"true"', "true"), ("acme", "acme"),
                                              # YAML, not text to the end of the line: these
                                              # were the tenants "alpha # comment" and "|".
                                              ("alpha # comment", "alpha"), ("|", "fallback"),
                                              ("|-\n  acme", "acme"), ("'a # b'", "a # b"),
                                              ("42", "42")])  # fmt: skip
def test_a_markdown_tenant_null_is_none_and_a_quoted_one_a_name(
    tmp_path, value: str, tenant: str
) -> None:
    from loader.ingest.readers import read_document

    path = tmp_path / "guide.md"
    path.write_text(f"---\ntenant: {value}\n---\nText.\n", encoding="utf-8")
    document = read_document(path, tmp_path, 1000)
    identify(document, "kb", Settings(tenant="fallback"), None)
    assert document.metadata["tenant"] == tenant
