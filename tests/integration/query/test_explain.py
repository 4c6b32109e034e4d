"""`loader explain` on a corpus pushed into a unique index: it names the stage a section was found
at, fused to or cut at -- a section BM25 finds and the vector side misses, one cut by k, one of
another tenant, one filtered out, one not indexed -- and its fused-score shares add up to the
score OpenSearch's pipeline gave. A second index holds files and headings named with '#'
(C#-guide.md#Using C#), in two tenants with the same file names."""

from __future__ import annotations

import json
import uuid

import pytest
from click.testing import CliRunner

from loader.cli import cli
from loader.index.apply import apply_config
from loader.ingest.sync import push
from loader.models.readers import reader_settings
from loader.modes import HYBRID_MODES, search_mode
from loader.query.explain import explain
from loader.query.explanation import format_report
from loader.query.request import SearchFilters, SearchRequest
from loader.query.search import search
from tests.conftest import cleanup_owned


def _doc(title: str, heading: str, text: str, lang: str = "en") -> str:
    return f"---\ntitle: {title}\nlang: {lang}\n---\n# {title}\n\n## {heading}\n\n{text}\n"


TENANT_A = {
    # Long and about bread: its one mention of the identifier is lost in its vector.
    "bakery.md": _doc(
        "Bakery",
        "Opening hours",
        "The bakery opens at seven in the morning and closes at six. Rye bread, sourdough loaves "
        "and croissants are baked before dawn; the ovens are cleaned on Sundays. Delivery van "
        "ZX-9041 brings the flour.",
    ),
    "signin.md": _doc(
        "Account help", "Signing in", "If you cannot sign in, request a new login link by email."
    ),
    "password.md": _doc(
        "Account help",
        "Passwords",
        "Reset your password from the login page; the link expires after 30 minutes.",
    ),
    "locked.md": _doc(
        "Account help",
        "Locked accounts",
        "After five failed sign in attempts the account is locked for an hour.",
    ),
    "twofactor.md": _doc(
        "Account help",
        "Two-factor login",
        "Two-factor login codes come from the authenticator app.",
    ),
    "email.md": _doc(
        "Account help",
        "Login email",
        "Change the email you log in with from the settings page.",
    ),
    "refunds.md": _doc(
        "Refund policy", "Late deliveries", "Orders delayed by 45 minutes get a full refund."
    ),
    "remboursement.md": _doc(
        "Remboursement", "Retards", "Une livraison en retard est remboursée.", lang="fr"
    ),
}
TENANT_B = {"vault.md": _doc("Vault", "Codes", "The vault code of tenant B rotates weekly.")}
IDENTIFIER_QUESTION = "login ZX-9041"


@pytest.fixture(scope="module")
def settings(client, base_settings, tmp_path_factory, embedder):
    alias = f"t-explain-{uuid.uuid4().hex[:8]}"
    settings = base_settings.replace(index_name=alias, rerank=False)
    root = tmp_path_factory.mktemp("explain-corpus")
    try:
        apply_config(settings, dimension=embedder.dimension, client=client)
        for files, tenant in ((TENANT_A, "A"), (TENANT_B, "B")):
            folder = root / tenant
            folder.mkdir()
            for name, text in files.items():
                (folder / name).write_text(text, encoding="utf-8")
            report = push(
                folder, settings, collection="kb", tenant=tenant, client=client, embedder=embedder
            )
            assert report.failed == 0, report
        yield settings
    finally:
        cleanup_owned(client, alias)


def _explain(settings, client, embedder, question, expect, **fields):
    fields.setdefault("tenant", "A")
    request = SearchRequest.from_settings(settings, question, **fields)
    report = explain(request, settings, expect=expect, client=client, embedder=embedder)
    (explanation,) = report.explanations
    return explanation


def _sources(settings, client, embedder, question, mode, candidates):
    request = SearchRequest.from_settings(
        settings, question, tenant="A", mode=mode, k=candidates, candidates=candidates
    )
    return [hit.source for hit in search(request, settings, client=client, embedder=embedder).hits]


def test_found_by_bm25_missed_by_the_vector_side(settings, client, embedder):
    # The scenario itself, checked through the library's own search first.
    assert _sources(settings, client, embedder, IDENTIFIER_QUESTION, "bm25", 3)[0] == "bakery.md"
    assert "bakery.md" not in _sources(settings, client, embedder, IDENTIFIER_QUESTION, "vector", 3)
    explanation = _explain(
        settings,
        client,
        embedder,
        IDENTIFIER_QUESTION,
        "bakery.md#Opening hours",
        mode="hybrid-rrf",
        candidates=3,
        k=3,
    )
    sentence = explanation.sentence()
    assert sentence.startswith("found by BM25 at 1, missed by the vector side (rank > 3), ")
    assert "found by the exact-term side at 1, fused to 1" in sentence
    assert explanation.cut is None and sentence.endswith("kept at 1 of 3")
    shares = {share.side: share for share in explanation.contributions}
    assert (shares["bm25"].rank, shares["vector"].rank, shares["vector"].value) == (1, None, 0.0)
    # The identifier also makes the exact-term sub-query find it, first.
    assert shares["exact"].rank == 1
    # The shares computed from the sub-queries' lists and the stored pipeline's weights add up to
    # the score the RRF pipeline gave.
    total = sum(share.value for share in explanation.contributions)
    assert explanation.fused_score == pytest.approx(total, rel=1e-4)


def test_minmax_shares_add_up_to_the_pipeline_score(settings, client, embedder):
    explanation = _explain(
        settings,
        client,
        embedder,
        "cannot sign in",
        "signin.md",
        mode="hybrid-minmax",
        candidates=10,
        k=5,
    )
    assert explanation.cut is None
    total = sum(share.value for share in explanation.contributions)
    assert explanation.fused_score == pytest.approx(total, rel=1e-3)
    assert [share.side for share in explanation.contributions] == _sides(settings)


def _sides(settings) -> list[str]:
    """The hybrid sub-queries, with the second reader's when the settings have one."""
    second = ["second_vector"] if reader_settings(settings) is not None else []
    return ["bm25", "vector", *second, "exact"]


@pytest.mark.parametrize("mode", HYBRID_MODES)
def test_every_hybrid_mode_names_its_stored_technique_and_its_shares_add_up(
    settings, client, embedder, mode
):
    request = SearchRequest.from_settings(
        settings, "cannot sign in", tenant="A", mode=mode, k=5, candidates=10
    )
    report = explain(request, settings, expect="signin.md", client=client, embedder=embedder)
    # Read back from the cluster by technique: the mode's own, named as OpenSearch names it.
    technique = search_mode(mode).technique
    assert report.fusion is not None and report.fusion.technique == technique
    assert report.to_dict()["fusion"]["technique"] == technique
    assert f"{mode} ({technique}" in format_report(report)[-1]
    (explanation,) = report.explanations
    assert explanation.cut is None
    assert [share.side for share in explanation.contributions] == _sides(settings)
    total = sum(share.value for share in explanation.contributions)
    assert explanation.fused_score == pytest.approx(total, rel=1e-3)


def test_cut_by_k(settings, client, embedder):
    explanation = _explain(
        settings,
        client,
        embedder,
        "cannot sign in to my account",
        "locked.md#Locked accounts",
        mode="hybrid-rrf",
        candidates=10,
        k=1,
    )
    fused = explanation.stage("fused")
    assert fused is not None and fused.rank is not None and fused.rank > 1
    assert explanation.cut == "k"
    assert explanation.sentence().endswith(f"fused to {fused.rank}, cut by k=1")


def test_filtered_out_by_tenant(settings, client, embedder):
    explanation = _explain(settings, client, embedder, "vault code", "vault.md", mode="bm25")
    assert explanation.cut == "tenant"
    assert explanation.sentence() == (
        "filtered out by tenant: the chunks of vault.md belong to tenant 'B', not 'A'"
    )


def test_cut_by_a_filter(settings, client, embedder):
    explanation = _explain(
        settings,
        client,
        embedder,
        "livraison en retard",
        "remboursement.md",
        mode="bm25",
        filters=SearchFilters(lang="en"),
    )
    assert explanation.cut == "filter"
    assert explanation.sentence() == (
        "missed by BM25 (rank > 50), cut by a filter (found once lang, tags and dates are dropped)"
    )


def test_not_indexed(settings, client, embedder):
    explanation = _explain(settings, client, embedder, "refund", "nowhere.md", mode="hybrid-rrf")
    assert explanation.cut == "not indexed"
    assert explanation.sentence() == "not indexed: no chunk of nowhere.md for any tenant"
    # The file is indexed; the heading is what it lacks (a typo, a renamed section).
    expect = "refunds.md#No such heading"
    explanation = _explain(settings, client, embedder, "refund", expect, mode="hybrid-rrf")
    assert explanation.cut == "not indexed"
    sentence = explanation.sentence()
    assert sentence.startswith(
        "not indexed: refunds.md is, but no section of it is headed 'No such heading' (its "
        "headings: "
    ), sentence
    assert "Late deliveries" in sentence


def test_top_results_and_the_command_line(settings, client, embedder):
    request = SearchRequest.from_settings(
        settings, "cannot sign in", tenant="A", mode="hybrid-rrf", k=2
    )
    report = explain(request, settings, client=client, embedder=embedder)
    assert len(report.explanations) == 2
    assert all(
        e.cut is None and e.stage("context").rank == n
        for n, e in enumerate(report.explanations, start=1)
    )
    result = CliRunner().invoke(
        cli,
        [
            "explain",
            IDENTIFIER_QUESTION,
            "--expect",
            "bakery.md",
            "--tenant",
            "A",
            "--candidates",
            "3",
            "--k",
            "3",
            "--mode",
            "hybrid-rrf",
            "--no-rerank",
            "--url",
            settings.opensearch_url,
            "--index",
            settings.index_name,
        ],
    )
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    assert first.startswith("bakery.md: found by BM25 at 1, missed by the vector side (rank > 3)")
    as_json = CliRunner().invoke(
        cli,
        [
            "explain",
            "vault code",
            "--expect",
            "vault.md",
            "--tenant",
            "A",
            "--json",
            "--url",
            settings.opensearch_url,
            "--index",
            settings.index_name,
            "--no-rerank",
        ],
    )
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.output)["explanations"][0]["cut"] == "tenant"


# Files and headings holding '#', in two tenants with the same folder and file names; only
# globex has notes#3.md, and the headings of their C#-guide.md differ.
HASH_FILES = {
    "acme": {
        "C#-guide.md": "# C# guide\n\n## Using C#\n\nCreate a console app with dotnet new "
        "console.\n\n## Setup\n\nInstall the SDK first.\n",
        "notes#2.md": "# Meeting notes\n\n## Decisions\n\nThe beta ships on Friday.\n",
        "F#/intro.md": "# F# intro\n\n## Pipelines\n\nThe pipe operator passes a value on.\n",
    },
    "globex": {
        "C#-guide.md": "# C# guide\n\n## Calling F# from C#\n\nReference the F# project from "
        "the console app.\n",
        "notes#2.md": "# Meeting notes\n\n## Budget\n\nThe budget is frozen.\n",
        "notes#3.md": "# Meeting notes\n\n## Hiring\n\nTwo engineers join in May.\n",
        "F#/intro.md": "# F# intro\n\n## Types\n\nRecords are immutable.\n",
    },
}


@pytest.fixture(scope="module")
def hash_settings(client, base_settings, tmp_path_factory, embedder):
    alias = f"t-explain-hash-{uuid.uuid4().hex[:8]}"
    settings = base_settings.replace(index_name=alias, rerank=False)
    root = tmp_path_factory.mktemp("explain-hash-corpus")
    try:
        apply_config(settings, dimension=embedder.dimension, client=client)
        for tenant, files in HASH_FILES.items():
            for name, text in files.items():
                (root / tenant / name).parent.mkdir(parents=True, exist_ok=True)
                (root / tenant / name).write_text(text, encoding="utf-8")
            report = push(
                root / tenant,
                settings,
                collection="kb",
                tenant=tenant,
                client=client,
                embedder=embedder,
            )
            assert report.failed == 0, report
        yield settings
    finally:
        cleanup_owned(client, alias)


@pytest.mark.parametrize(
    ("expect", "question"),
    [
        ("C#-guide.md#Using C#", "console app dotnet"),
        ("notes#2.md", "beta ships Friday"),
        ("notes#2.md#Decisions", "beta ships Friday"),
        ("F#/intro.md#Pipelines", "pipe operator"),
        ("F#\\intro.md", "pipe operator"),
    ],
)
def test_expect_names_a_file_or_heading_holding_a_hash(
    hash_settings, client, embedder, expect, question
):
    explanation = _explain(
        hash_settings, client, embedder, question, expect, tenant="acme", mode="bm25"
    )
    assert explanation.target == expect.replace("\\", "/")
    assert explanation.cut is None, explanation.sentence()
    assert explanation.stage("bm25").rank == 1


@pytest.mark.parametrize(
    ("tenant", "expect", "sentence"),
    [
        # acme's C#-guide.md is read, not globex's: its own headings are listed.
        (
            "acme",
            "C#-guide.md#Using D#",
            "not indexed: C#-guide.md is, but no section of it is headed 'Using D#' (its "
            "headings: Setup; Using C#)",
        ),
        (
            "globex",
            "C#-guide.md#Calling F#",
            "not indexed: C#-guide.md is, but no section of it is headed 'Calling F#' (its "
            "headings: Calling F# from C#)",
        ),
        # The section (or the file) is another tenant's.
        (
            "globex",
            "C#-guide.md#Using C#",
            "filtered out by tenant: the chunks of C#-guide.md#Using C# belong to tenant 'acme', "
            "not 'globex'",
        ),
        (
            "acme",
            "notes#3.md",
            "filtered out by tenant: the chunks of notes#3.md belong to tenant 'globex', not "
            "'acme'",
        ),
        # No reading names an indexed file: the message names what was typed.
        (
            "acme",
            "missing#1.md#Using C#",
            "not indexed: no chunk of missing#1.md#Using C# for any tenant",
        ),
    ],
)
def test_a_missed_file_or_heading_holding_a_hash_says_why(
    hash_settings, client, embedder, tenant, expect, sentence
):
    question = "console app dotnet"
    explanation = _explain(
        hash_settings, client, embedder, question, expect, tenant=tenant, mode="hybrid-rrf"
    )
    assert (explanation.target, explanation.sentence()) == (expect, sentence)


def test_the_command_line_takes_a_hash_in_the_file_name_and_heading(hash_settings):
    result = CliRunner().invoke(
        cli,
        [
            "explain",
            "console app dotnet",
            "--expect",
            "C#-guide.md#Using C#",
            "--tenant",
            "acme",
            "--mode",
            "bm25",
            "--no-rerank",
            "--url",
            hash_settings.opensearch_url,
            "--index",
            hash_settings.index_name,
        ],
    )
    assert result.exit_code == 0, result.output
    assert (
        result.output.splitlines()[0] == "C#-guide.md#Using C#: found by BM25 at 1, kept at 1 of 5"
    )
