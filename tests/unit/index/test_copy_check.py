"""The comparison of two index versions' chunks per document and doc_hash (``copy_check``): the
two aggregations merged in their order, differences named and counted per tenant."""

from __future__ import annotations

from loader.index.copy_check import compare


def row(doc_id, doc_hash, count, tenant="t", collection="kb") -> dict:
    key = {"doc_id": doc_id, "doc_hash": doc_hash, "tenant": tenant, "collection": collection}
    return {"key": key, "doc_count": count}


def test_equal_versions_are_equal_and_counted():
    rows = [row(None, None, 2, None, None), row("a", "h1:1", 1), row("b", "h2:3", 3)]
    found = compare(rows, list(rows), "kb-v2", "kb-v3")
    assert (found.equal, found.documents, found.chunks, found.shown) == (True, 3, 6, [])


def test_missing_changed_and_extra_documents_are_named_and_counted_per_tenant():
    source = [
        row("a", "h1:3", 3),
        row("b", "h2:3", 3, tenant="u"),
        row("c", "h3:2", 2),
        row("d", "h4:1", 1),
    ]
    dest = [
        row("a", "h1:3", 3),
        row("c", "h0:2", 2),  # another version of c: the copy has its old chunks
        row("d", "h4:1", 1),
        row("e", "h5:1", 1),  # only in the copy
    ]
    found = compare(source, dest, "kb-v2", "kb-v3", limit=2)
    assert (found.documents, found.chunks, found.differing) == (5, 9, 3)
    assert dict(found.tenants) == {"t": 2, "u": 1}
    paths = {"b": "guide.md", "c": "faq.md"}
    assert found.describe(paths) == (
        "3 of 5 documents differ (by tenant: 't' 2, 'u' 1): kb/faq.md (tenant 't'): 2 chunks "
        "in kb-v2, 2 of another version in kb-v3; kb/guide.md (tenant 'u'): 3 chunks in kb-v2, "
        "none in kb-v3; and 1 more"
    )


def test_a_document_copied_in_part_differs():
    found = compare([row("a", "h1:3", 3)], [row("a", "h1:3", 1)], "kb-v2", "kb-v3")
    assert found.describe({}) == (
        "1 of 1 documents differ (by tenant: 't' 1): kb/a (tenant 't'): 3 chunks in kb-v2, "
        "1 in kb-v3"
    )


def test_chunks_without_a_doc_id_sort_first_as_opensearch_returns_them():
    source = [row(None, None, 2, None, None), row("a", "h1:1", 1)]
    dest = [row("a", "h1:1", 1)]
    found = compare(source, dest, "kb-v2", "kb-v3")
    assert (found.differing, found.describe({})) == (
        1,
        "1 of 2 documents differ (by tenant: None 1): None (tenant None): 2 chunks in kb-v2, "
        "none in kb-v3",
    )


def test_documents_only_the_copy_holds_can_be_left_out():
    # doctor's view: a document pushed into the copy since the swap is no copy's loss.
    source = [row("a", "h1:1", 1), row("c", "h3:1", 1)]
    dest = [row("a", "h1:1", 1), row("b", "h2:1", 1)]
    found = compare(source, dest, "kb-v2", "kb-v3", dest_only=False)
    assert (found.documents, found.differing, found.describe({"c": "faq.md"})) == (
        2,
        1,
        "1 of 2 documents differ (by tenant: 't' 1): kb/faq.md (tenant 't'): 1 chunk in kb-v2, "
        "none in kb-v3",
    )
