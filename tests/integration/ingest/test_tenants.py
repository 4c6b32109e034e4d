"""Two tenants share one index: each push touches only its own tenant's chunks.

A real deployment gives every team the same folder layout: both push a folder called ``kb`` with
a ``pricing.md`` in it. The ground truth for "untouched" is a push of the same folder into an empty
index of its own: after any sequence of pushes, edits and deletions, in either order, each
tenant's chunks in the shared index (ids, content hashes, document hashes, text) are exactly the
chunks of that reference push.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from opensearchpy import helpers

from loader.cli import cli
from loader.errors import ConfigError, IncompatibleIndexError
from loader.index.apply import apply_config, plan_apply
from loader.index.compatible import check_index_compatible
from loader.ingest.sync import push
from loader.query.request import SearchRequest
from loader.query.search import search

ACME = {
    "pricing.md": "# Pricing\n\n## Plans\n\nAcme sells the Rocket plan at 40 euros a month.\n\n"
    "## Discounts\n\nAcme gives schools 30 % off.\n",
    "roadmap.md": "# Roadmap\n\n## Next quarter\n\nAcme ships anvils with tracking.\n",
}
GLOBEX = {
    "pricing.md": "# Pricing\n\n## Plans\n\nGlobex sells the Hammock plan at 12 dollars a week.\n",
    "notes/faq.md": "# FAQ\n\n## Support\n\nGlobex support answers on weekdays.\n",
}
FIELDS = ["chunk_id", "doc_id", "source", "content_hash", "doc_hash", "content", "tenant"]


def write(root: Path, files: dict[str, str]) -> Path:
    """A folder called ``kb`` holding exactly ``files``."""
    root.mkdir(parents=True, exist_ok=True)
    for existing in sorted(root.rglob("*.md")):
        if existing.relative_to(root).as_posix() not in files:
            existing.unlink()
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def tenant_chunks(client, alias: str, tenant: str) -> dict[str, dict]:
    client.indices.refresh(index=alias)
    hits = helpers.scan(
        client,
        index=alias,
        query={"query": {"term": {"tenant": tenant}}, "_source": FIELDS},
    )
    return {hit["_id"]: hit["_source"] for hit in hits}


@pytest.fixture
def shared(base_settings, unique_name, embedder):
    settings = base_settings.replace(index_name=unique_name)
    apply_config(settings, dimension=embedder.dimension)
    return settings


@pytest.fixture
def reference(base_settings, unique_name, embedder, client):
    """Push one tenant's folder into an empty index of its own; return its chunks."""
    from tests.conftest import cleanup_owned

    made = []

    def pushed_alone(folder: Path, tenant: str) -> dict[str, dict]:
        alias = f"{unique_name}-ref{len(made)}"
        made.append(alias)
        settings = base_settings.replace(index_name=alias)
        apply_config(settings, dimension=embedder.dimension)
        report = push(folder, settings, tenant=tenant, client=client, embedder=embedder)
        assert report.failed == 0
        return tenant_chunks(client, alias, tenant)

    yield pushed_alone
    for alias in made:
        cleanup_owned(client, alias)


@pytest.mark.parametrize("first", ["acme", "globex"])
def test_same_folder_and_file_names_never_cross_tenants(
    shared, reference, client, embedder, tmp_path, first
):
    files = {"acme": dict(ACME), "globex": dict(GLOBEX)}
    folders = {tenant: tmp_path / tenant / "kb" for tenant in files}
    second = "globex" if first == "acme" else "acme"

    def push_tenant(tenant: str):
        write(folders[tenant], files[tenant])
        return push(folders[tenant], shared, tenant=tenant, client=client, embedder=embedder)

    def assert_each_tenant_as_if_alone():
        for tenant in files:
            alone = reference(write(tmp_path / "ref" / tenant / "kb", files[tenant]), tenant)
            assert tenant_chunks(client, shared.index_name, tenant) == alone, tenant

    one = push_tenant(first)
    two = push_tenant(second)
    assert (one.added, two.added) == (len(files[first]), len(files[second]))
    assert (two.updated, two.deleted, two.chunks_deleted) == (0, 0, 0)
    assert two.tenants == [second]
    assert_each_tenant_as_if_alone()

    # The first tenant edits the file both have and deletes the one only it has; the second
    # tenant's copy of the same path is untouched.
    files[first]["pricing.md"] = files[first]["pricing.md"].replace("Plans", "Prices")
    only_first = next(name for name in files[first] if name != "pricing.md")
    del files[first][only_first]
    before = tenant_chunks(client, shared.index_name, second)
    edit = push_tenant(first)
    assert (edit.updated, edit.deleted, edit.unchanged) == (1, 1, 0)
    assert tenant_chunks(client, shared.index_name, second) == before
    assert_each_tenant_as_if_alone()

    # The second tenant empties its folder: only its own chunks go.
    files[second] = {}
    emptied = push_tenant(second)
    assert emptied.deleted == len(GLOBEX if second == "globex" else ACME)
    assert tenant_chunks(client, shared.index_name, second) == {}
    assert_each_tenant_as_if_alone()

    # Re-push of the first tenant: nothing to do, nothing embedded, nothing read across.
    again = push_tenant(first)
    assert (again.unchanged, again.embedded, again.chunks_written, again.deleted) == (
        len(files[first]),
        0,
        0,
        0,
    )


def test_the_cli_reproduction_of_the_report(shared, client, tmp_path):
    """The issue's two commands, through the CLI: acme keeps its two documents."""
    write(tmp_path / "t1" / "kb", ACME)
    write(tmp_path / "t2" / "kb", {"pricing.md": GLOBEX["pricing.md"]})
    runner = CliRunner()
    env = {"OPENSEARCH_URL": shared.opensearch_url, "LOADER_INDEX_NAME": shared.index_name}
    for folder, tenant in ((tmp_path / "t1" / "kb", "acme"), (tmp_path / "t2" / "kb", "globex")):
        result = runner.invoke(cli, ["push", str(folder), "--tenant", tenant], env=env)
        assert result.exit_code == 0, result.output
    assert "kb: 1 added, 0 updated, 0 unchanged, 0 deleted, 0 failed" in result.output
    assert "tenant globex" in result.output
    acme = tenant_chunks(client, shared.index_name, "acme")
    assert {chunk["source"] for chunk in acme.values()} == {"pricing.md", "roadmap.md"}
    assert all("Acme" in chunk["content"] for chunk in acme.values())


def test_search_finds_each_tenants_own_copy(shared, client, embedder, tmp_path):
    for tenant, files in (("acme", ACME), ("globex", GLOBEX)):
        push(write(tmp_path / tenant / "kb", files), shared, tenant=tenant, client=client,
             embedder=embedder)  # fmt: skip
    for tenant, word in (("acme", "Rocket"), ("globex", "Hammock")):
        for mode in ("bm25", "vector", "hybrid-rrf", "hybrid-minmax"):
            request = SearchRequest.from_settings(
                shared, "how much does the plan cost", tenant=tenant, mode=mode, rerank=False, k=10
            )
            result = search(request, shared, client=client, embedder=embedder)
            assert {hit.tenant for hit in result.hits} == {tenant}, (tenant, mode)
            assert word in result.hits[0].text, (tenant, mode)


def test_front_matter_tenant_other_than_the_push_is_skipped(shared, client, embedder, tmp_path):
    folder = write(
        tmp_path / "kb",
        {
            "mine.md": "# Mine\n\nAcme text.\n",
            "theirs.md": "---\ntenant: globex\n---\n# Theirs\n\nGlobex text.\n",
        },
    )
    report = push(folder, shared, tenant="acme", client=client, embedder=embedder)
    assert report.added == 1 and report.failed == 1
    (skipped,) = report.skipped
    assert skipped["source"] == "theirs.md"
    assert "names tenant 'globex' but this push is for tenant 'acme'" in skipped["reason"]
    assert tenant_chunks(client, shared.index_name, "globex") == {}

    # Without --tenant, the front matter decides, and both tenants' scopes are synced.
    both = push(folder, shared, client=client, embedder=embedder)
    assert sorted(both.tenants) == ["default", "globex"] and both.failed == 0
    assert {c["source"] for c in tenant_chunks(client, shared.index_name, "globex").values()} == {
        "theirs.md"
    }
    # acme's mine.md stays: a push without --tenant syncs default and globex, not acme.
    assert {c["source"] for c in tenant_chunks(client, shared.index_name, "acme").values()} == {
        "mine.md"
    }


def test_a_front_matter_tenant_never_deletes_that_tenants_other_documents(
    shared, client, embedder, tmp_path
):
    # globex pushes its "handbook" folder; acme's "handbook" folder holds a file copied from
    # globex with its front matter. Acme's push writes that document for globex, and deletes
    # none of globex's others (the same collection name, another team's folder).
    theirs = write(
        tmp_path / "globex" / "handbook",
        {"policy.md": "# Policy\n\nGlobex policy.\n", "second.md": "# Second\n\nGlobex's.\n"},
    )
    push(theirs, shared, tenant="globex", client=client, embedder=embedder)
    mine = write(
        tmp_path / "acme" / "handbook",
        {
            "mine.md": "# Mine\n\nAcme text.\n",
            "policy.md": "---\ntenant: globex\n---\n# Policy\n\nA copy, edited.\n",
        },
    )
    acme = shared.replace(tenant="acme")  # LOADER_TENANT=acme, no --tenant
    planned = push(mine, acme, client=client, embedder=embedder, dry_run=True).plan
    assert "= keep second.md (tenant 'globex': only a push with --tenant 'globex' deletes it)" in (
        planned
    )
    assert not any(line.startswith("- delete") for line in planned)
    # The write into globex's scope is named too, not a bare "~ update policy.md".
    (update,) = [line for line in planned if line.startswith("~ update policy.md")]
    assert update.endswith("; tenant 'globex', named by its front matter)")
    report = push(mine, acme, client=client, embedder=embedder)
    assert report.deleted == 0 and sorted(report.tenants) == ["acme", "globex"]
    assert report.warnings == [
        "policy.md belongs to tenant 'globex' by its front matter: this push replaces that "
        "tenant's document",
        "kept second.md of tenant 'globex', gone from the folder: only a push with --tenant "
        "'globex' deletes it",
    ]
    globex = {c["source"]: c for c in tenant_chunks(client, shared.index_name, "globex").values()}
    assert set(globex) == {"policy.md", "second.md"}
    assert "A copy, edited." in globex["policy.md"]["content"]


def test_an_index_of_the_old_id_scheme_is_refused_then_replaced(shared, client, embedder, tmp_path):
    """An index whose ids ignore the tenant is never pushed into: apply plans a new, empty
    version and says to push each tenant again."""
    alias = shared.index_name
    old = next(iter(client.indices.get_alias(name=alias)))
    client.indices.put_mapping(index=old, body={"_meta": {}})  # what apply wrote before the fix
    folder = write(tmp_path / "kb", ACME)
    with pytest.raises(IncompatibleIndexError, match="ignore the tenant.*loader apply"):
        push(folder, shared, tenant="acme", client=client, embedder=embedder)

    plan = plan_apply(shared, dimension=embedder.dimension)
    kinds = {(change.kind, change.action) for change in plan.pending}
    assert ("index", "create") in kinds and ("reindex", "create") not in kinds
    assert any("ignore the tenant" in note and "--tenant" in note for note in plan.notes)

    apply_config(shared, dimension=embedder.dimension)
    new = check_index_compatible(client, shared, embedder.dimension)
    assert new != old
    report = push(folder, shared, tenant="acme", client=client, embedder=embedder)
    assert report.added == 2


def test_push_dry_run_prints_the_plan_and_changes_nothing(shared, client, embedder, tmp_path):
    folder = write(tmp_path / "kb", ACME)
    push(folder, shared, tenant="acme", client=client, embedder=embedder)
    before = tenant_chunks(client, shared.index_name, "acme")
    write(folder, {"pricing.md": ACME["pricing.md"] + "\n## Support\n\nCall us.\n"})
    env = {"OPENSEARCH_URL": shared.opensearch_url, "LOADER_INDEX_NAME": shared.index_name}
    result = CliRunner().invoke(
        cli, ["push", str(folder), "--tenant", "acme", "--dry-run"], env=env
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("~ update pricing.md (") and "to embed" in lines[0]
    assert lines[1] == "- delete roadmap.md (1 chunks)"
    assert lines[2].startswith("kb: 0 to add, 1 to update, 0 unchanged, 1 to delete, 0 failed")
    assert "dry run: nothing changed" in lines[2]
    assert tenant_chunks(client, shared.index_name, "acme") == before

    as_json = CliRunner().invoke(
        cli, ["push", str(folder), "--tenant", "acme", "--dry-run", "--json"], env=env
    )
    report = json.loads(as_json.output)
    assert report["plan"] == lines[:2] and report["chunks_written"] == 0


def test_names_holding_the_separator_never_share_a_document(shared, client, embedder, tmp_path):
    # (tenant 'px\x1fpy', collection 'kb') and (tenant 'px', collection 'py\x1fkb') once gave one
    # id, and the second push overwrote the first tenant's document with exit 0. The ids escape
    # the separator (tests/unit/ingest/test_identity.py), and a tenant holding a control
    # character is now refused before anything is written: no name anyone types holds one.
    def pushed(tenant: str, collection: str, text: str):
        folder = write(tmp_path / tenant.replace("\x1f", "_") / "kb", {"g.md": f"# G\n\n{text}\n"})
        return push(
            folder, shared, tenant=tenant, collection=collection, client=client, embedder=embedder
        )

    with pytest.raises(ConfigError, match=r"must not hold the control character U\+001F"):
        pushed("px\x1fpy", "kb", "first tenant's text")
    report = pushed("px", "py\x1fkb", "second tenant's")
    assert (report.added, report.failed) == (1, 0)
    assert tenant_chunks(client, shared.index_name, "px\x1fpy") == {}
    chunks = tenant_chunks(client, shared.index_name, "px")
    assert [chunk["content"].endswith("second tenant's") for chunk in chunks.values()] == [True]
