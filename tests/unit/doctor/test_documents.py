"""Half-written documents from the composite buckets doctor reads: which documents are whole,
how each other one is described, and a report bounded to the first few by name."""

from __future__ import annotations

from loader.doctor.documents import (
    DocumentChunks,
    documents,
    half_written_check,
    scan_documents,
)


def row(doc_id: str, doc_hash: str, count: int, tenant: str = "A", collection: str = "kb"):
    key = {"doc_id": doc_id, "doc_hash": doc_hash, "tenant": tenant, "collection": collection}
    return {"key": key, "doc_count": count}


def test_a_document_is_whole_with_one_doc_hash_and_as_many_chunks_as_it_records():
    rows = [
        row("d1", "aa:3", 3),  # whole
        row("d2", "bb:3", 1),  # a new document cut short: 1 of 3
        row("d3", "cc:4", 1),  # a stale chunk of the old version beside the new one
        row("d3", "dd:3", 3),
        row("d4", "ee", 2),  # no recorded count: nothing to check against
    ]
    found = list(documents(rows))
    assert [doc.doc_id for doc in found] == ["d1", "d2", "d3", "d4"]
    assert [doc.whole for doc in found] == [True, False, False, True]
    assert found[1].state() == "1 of 3 chunks"
    assert found[2].state() == "chunks of 2 pushes (3 of 3, 1 of 4)"
    assert DocumentChunks("d5", "A", "kb", {"ff": 1, "gg:2": 2}).state() == (
        "chunks of 2 pushes (2 of 2, 1)"
    )


def test_the_report_names_the_first_documents_and_counts_the_rest():
    rows = [row(f"d{number:02}", f"h{number}:2", 1) for number in range(25)]
    rows += [row("e1", "x:2", 1, tenant="team b", collection="notes")]
    scan = scan_documents(rows, limit=10)
    assert (scan.documents, scan.count, len(scan.shown)) == (26, 26, 10)
    assert scan.places == {("A", "kb"), ("team b", "notes")}
    check = half_written_check(scan, {"d00": "a.md", "d01": "b.md"})
    assert check.status == "fail"
    assert check.detail.startswith(
        "26 of 26 documents are half-written (a push stopped in the middle of them, or one is "
        "running now): kb/a.md (tenant 'A'): 1 of 2 chunks; kb/b.md (tenant 'A'): 1 of 2 chunks; "
        "kb/d02 (tenant 'A'): 1 of 2 chunks; "
    )
    assert check.detail.endswith("; and 16 more")
    assert check.fix == (
        "run `loader push <folder> --tenant A` (collection 'kb'), `loader push <folder> "
        "--tenant 'team b'` (collection 'notes'): it rewrites them"
    )
    assert check.to_dict()["exit_code"] == 5


def test_all_whole():
    check = half_written_check(scan_documents([row("d1", "aa:1", 1)]), {})
    assert (check.status, check.detail) == ("ok", "the chunks of each of the 1 documents agree")
    assert half_written_check(scan_documents([]), {}).line() == (
        "skip  half-written documents: no documents to check"
    )
