"""The push plan: what a push adds, updates, keeps and deletes, decided without a cluster."""

from __future__ import annotations

import pytest

from loader.documents import Block, Document, Section
from loader.errors import ConfigError
from loader.ingest.plan import (
    chunk_id,
    plan_push,
    recorded_chunk_count,
    stored_doc_hash,
)
from loader.ingest.readers import Skipped
from loader.ingest.report import ignored_summary
from loader.models.embedding import embedder_for
from loader.settings import Settings

SETTINGS = Settings()


@pytest.fixture(scope="module")
def embedder():
    return embedder_for(SETTINGS)  # the tokenizer counts tokens; the model is not loaded


def doc(source: str, text: str, **metadata) -> Document:
    section = Section(("Part",), [Block("paragraph", text)])
    return Document(source=source, title="Doc", sections=[section], metadata=dict(metadata))


def as_state(plan) -> dict:
    """The index state an applied ``plan`` leaves, as ``read_index_state`` returns it."""
    return {
        planned.doc_id: {
            "source": planned.document.source,
            "doc_hashes": {planned.doc_hash},
            "chunks": {
                chunk_id(planned.doc_id, position): content_hash
                for position, content_hash in enumerate(planned.hashes)
            },
        }
        for planned in plan.to_write
    }


def plan(items, embedder, states=None, **options):
    calls = []

    def read_scope(tenant):
        calls.append(tenant)
        return (states or {}).get(tenant, {})

    result = plan_push(items, SETTINGS, embedder, read_scope, collection="kb", **options)
    return result, calls


def test_an_empty_index_adds_every_document(embedder):
    result, calls = plan([doc("a.md", "Alpha text."), doc("b.md", "Beta text.")], embedder)
    assert (result.added, result.updated, result.unchanged, result.deletions) == (
        ["a.md", "b.md"], [], 0, []
    )  # fmt: skip
    assert calls == ["default"]
    assert result.lines() == [
        "+ add a.md (1 chunks, 1 to embed)",
        "+ add b.md (1 chunks, 1 to embed)",
    ]


def test_an_empty_document_is_counted_empty_on_every_push(embedder):
    # Two empty files of a large corpus were reported "2 added" on every push.
    empty = Document(source="blank.md", title="Blank", sections=[], metadata={})
    first, _ = plan([empty, doc("a.md", "Alpha text.")], embedder)
    assert (first.added, first.empty, first.lines()) == (
        ["a.md"], 1, ["+ add a.md (1 chunks, 1 to embed)"]
    )  # fmt: skip
    again, _ = plan([empty, doc("a.md", "Alpha text.")], embedder, {"default": as_state(first)})
    assert (again.added, again.updated, again.unchanged, again.empty) == ([], [], 1, 1)
    assert again.lines() == [] and again.report().empty == 1
    # A document that was indexed and is emptied still has its chunks deleted.
    had_text, _ = plan([doc("blank.md", "Once text.")], embedder)
    emptied, _ = plan([empty], embedder, {"default": as_state(had_text)})
    assert (emptied.updated, len(emptied.deletions)) == (["blank.md"], 1)


def test_unchanged_changed_removed_and_unreadable(embedder):
    first, _ = plan(
        [doc("same.md", "Same."), doc("edit.md", "Old."), doc("gone.md", "Gone."),
         doc("bad.md", "Readable once.")],
        embedder,
    )  # fmt: skip
    state = {"default": as_state(first)}
    items = [
        doc("same.md", "Same."),
        doc("edit.md", "New."),
        Skipped("bad.md", "not UTF-8"),
        doc("new.md", "Same."),  # a known text: its vector is reused
    ]
    second, _ = plan(items, embedder, state)
    assert (second.added, second.updated, second.unchanged) == (["new.md"], ["edit.md"], 1)
    assert second.removed == ["gone.md"]
    assert [source for _, source in second.deletions] == ["gone.md"]  # bad.md's chunks stay
    assert second.skipped == [{"source": "bad.md", "reason": "not UTF-8"}]
    assert second.lines() == [
        "+ add new.md (1 chunks, 0 to embed)",
        "~ update edit.md (1 chunks, 1 to embed)",
        "- delete gone.md (1 chunks)",
        "! skip bad.md: not UTF-8",
    ]
    report = second.report()
    assert (report.added, report.updated, report.deleted, report.failed) == (1, 1, 1, 1)
    assert report.chunks == 3  # same.md kept, edit.md and new.md written

    kept, _ = plan(items, embedder, state, keep_removed=True)
    assert kept.removed == [] and kept.deletions == []


def test_files_of_unsupported_types_are_ignored_not_failed_and_keep_their_chunks(embedder):
    # A data.csv indexed once (by a reader that handled CSV) and no longer read: ignored, kept.
    first, _ = plan([doc("data.csv", "a,b"), doc("guide.md", "Guide.")], embedder)
    events = []
    items = [
        Skipped("Makefile", "unsupported file type (no suffix)", ignored=True),
        Skipped("bad.md", "binary file"),
        Skipped("data.csv", "unsupported file type .csv", ignored=True),
        doc("guide.md", "Guide."),
        Skipped("img/logo.png", "unsupported file type .png", ignored=True),
    ]
    second = plan_push(
        items,
        SETTINGS,
        embedder,
        lambda tenant: as_state(first),
        collection="kb",
        on_event=events.append,
    )
    assert second.deletions == [] and second.removed == []  # data.csv's chunk stays
    assert second.skipped == [{"source": "bad.md", "reason": "binary file"}]
    assert second.ignored == [
        {"source": "Makefile", "reason": "unsupported file type (no suffix)"},
        {"source": "data.csv", "reason": "unsupported file type .csv"},
        {"source": "img/logo.png", "reason": "unsupported file type .png"},
    ]
    # One line for all the ignored files, once they are read; none in the dry-run plan.
    assert events == [
        "skipped bad.md: binary file",
        "ignored 3 files of unsupported types: .csv 1, .png 1, no suffix 1",
    ]
    assert second.lines() == ["! skip bad.md: binary file"]
    report = second.report()
    assert (report.unchanged, report.failed, report.chunks) == (1, 1, 1)  # as for skipped files
    assert report.ignored == second.ignored and report.to_dict()["ignored"] == second.ignored


def test_nothing_ignored_means_no_ignored_line(embedder):
    events = []
    plan_push(
        [Skipped("bad.md", "binary file")],
        SETTINGS,
        embedder,
        lambda tenant: {},
        collection="kb",
        on_event=events.append,
    )
    assert events == ["skipped bad.md: binary file"]


@pytest.mark.parametrize(
    ("sources", "line"),
    [
        (["logo.png"], "ignored 1 file of an unsupported type: .png 1"),
        (["a.png", "b/c.PNG"], "ignored 2 files of an unsupported type: .png 2"),
        (
            ["Makefile", "x.svg", "b.png", "a.png", "data.CSV", "LICENSE"],
            "ignored 6 files of unsupported types: .csv 1, .png 2, .svg 1, no suffix 2",
        ),
        # Kept raw: the CLI escapes the whole line through ``printable``, like every other.
        (["a.p\ng", "b.exe"], "ignored 2 files of unsupported types: .exe 1, .p\ng 1"),
    ],
)
def test_the_ignored_line_counts_per_type_sorted_no_suffix_last(sources, line):
    assert ignored_summary({"source": source, "reason": "-"} for source in sources) == line


@pytest.mark.parametrize("tenant", ["", " ", "acme "])
def test_a_push_for_a_blank_or_padded_tenant_is_refused(embedder, tenant):
    # `push --tenant ''` once silently meant the setting's tenant; ' ' filed unsearchable chunks.
    with pytest.raises(ConfigError, match=r"^tenant '"):
        plan([doc("a.md", "Alpha.")], embedder, tenant=tenant)


def test_files_under_an_unreadable_folder_keep_their_chunks(embedder):
    first, _ = plan(
        [doc("locked/inner.md", "Inner."), doc("locked/deep/x.md", "Deep."),
         doc("lockedness.md", "Sibling."), doc("top.md", "Top.")],
        embedder,
    )  # fmt: skip
    # The walk cannot enter locked/ any more (chmod 000): the folder is reported, not its files.
    second, _ = plan(
        [Skipped("locked", "permission denied"), doc("top.md", "Top.")],
        embedder,
        {"default": as_state(first)},
    )
    assert second.removed == ["lockedness.md"]  # a name that merely starts with the folder's
    assert [source for _, source in second.deletions] == ["lockedness.md"]


def test_front_matter_writes_another_tenants_document_but_never_deletes_its_others(embedder):
    # globex pushed its own "kb" folder; acme's "kb" folder holds one file whose front matter
    # names globex (copied from globex's folder, say).
    globex, _ = plan([doc("policy.md", "Old."), doc("second.md", "Theirs.")], embedder,
                     tenant="globex")  # fmt: skip
    states = {"globex": as_state(globex)}
    acme, calls = plan([doc("policy.md", "New.", tenant="globex")], embedder, states)
    assert calls == ["default", "globex"]
    assert acme.updated == ["policy.md"]  # the document the file names is written...
    assert acme.removed == [] and acme.deletions == []  # ...and globex's second.md is not touched
    assert acme.kept_foreign == [("globex", "second.md")]
    assert acme.lines()[-1] == (
        "= keep second.md (tenant 'globex': only a push with --tenant 'globex' deletes it)"
    )
    # The write into globex's scope is named, in the plan and in the report (--json) alike.
    assert acme.lines()[0].startswith("~ update policy.md (1 chunks, ")
    assert acme.lines()[0].endswith("; tenant 'globex', named by its front matter)")
    assert acme.report().warnings[0] == (
        "policy.md belongs to tenant 'globex' by its front matter: this push replaces that "
        "tenant's document"
    )
    added, _ = plan([doc("new.md", "New.", tenant="globex")], embedder, states)
    assert added.lines()[0].endswith("; tenant 'globex', named by its front matter)")
    # Adding is named in the plan line, not warned about.
    assert not any("by its front matter" in warning for warning in added.report().warnings)
    # The push's own tenant named in front matter is nothing to warn about.
    own_named, _ = plan([doc("mine.md", "Mine.", tenant="default")], embedder)
    assert own_named.report().warnings == [] and "tenant" not in own_named.lines()[0]
    # A push for globex itself deletes it.
    own, _ = plan([doc("policy.md", "New.")], embedder, states, tenant="globex")
    assert own.removed == ["second.md"] and own.kept_foreign == []


def test_each_tenant_is_read_once_and_only_its_scope_is_deleted(embedder):
    acme, _ = plan([doc("p.md", "Acme.")], embedder, tenant="acme")
    globex, _ = plan([doc("p.md", "Globex.")], embedder, tenant="globex")
    states = {"acme": as_state(acme), "globex": as_state(globex)}
    emptied, calls = plan([], embedder, states, tenant="acme")
    assert calls == ["acme"]
    assert emptied.removed == ["p.md"]
    (acme_doc,) = states["acme"].values()
    assert {cid for cid, _ in emptied.deletions} == set(acme_doc["chunks"])

    mixed, calls = plan(
        [doc("x.md", "X."), doc("y.md", "Y.", tenant="partners"), doc("z.md", "Z.")], embedder
    )
    assert calls == ["default", "partners"] and mixed.tenants == ["default", "partners"]


def test_a_stored_doc_hash_records_the_chunk_count(embedder):
    assert recorded_chunk_count(stored_doc_hash("ab12", 7)) == 7
    assert [recorded_chunk_count(value) for value in (None, "", "ab12", "ab12:", "ab:x")] == [
        None
    ] * 5
    plan = plan_push(
        [doc("a.md", "Some text.")], SETTINGS, embedder, lambda tenant: {}, collection="kb"
    )
    (planned,) = plan.to_write
    assert recorded_chunk_count(planned.doc_hash) == len(planned.chunks)


def test_documents_chunked_before_the_whole_heading_trail_are_chunked_again(embedder, monkeypatch):
    # Chunker version 1 stored a heading path over the prefix's budget cut ("Part III:
    # Deploying…"): a push must rewrite such documents, though their files did not change.
    from loader.ingest import plan as push_plan

    monkeypatch.setattr(push_plan, "CHUNKING_VERSION", "1")
    first, _ = plan([doc("guide.md", "Text.")], embedder)
    monkeypatch.undo()
    second, _ = plan([doc("guide.md", "Text.")], embedder, {"default": as_state(first)})
    assert (second.updated, second.unchanged) == (["guide.md"], 0)
