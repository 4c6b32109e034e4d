"""The index the framework retrievers are tested on: the configuration applied under a unique
alias and the sample ``docs/`` pushed three times -- as they are (tenants ``default`` and
``partners``), and under tenants ``A`` and ``B``, B's copy with one more document that only B
may see -- once for every test of this folder."""

from __future__ import annotations

import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from loader.index.apply import apply_config
from loader.ingest.sync import push
from loader.settings import Settings
from tests.conftest import cleanup_owned
from tests.paths import SAMPLE_DOCS

# Ten questions over docs/, each answered by a different section.
QUESTIONS = [
    "How long do refunds take for late deliveries?",
    "What does error E1043 mean?",
    "How do I delete my account?",
    "Which cities does QuickBite deliver to?",
    "What should I do if I have a severe allergy?",
    "When are restaurant payouts made?",
    "How do I set up UPI AutoPay?",
    "The app does not load, what can I do?",
    "Can I get wallet credit instead of a refund?",
    "How do I download my data?",
]

# Only tenant B holds this document: its code and its words are nowhere in docs/.
B_SECRET = "b-only-vault.md"
B_SECRET_CODE = "VAULT-7731"
B_SECRET_TEXT = f"""---
title: Vault procedures
---
# Vault procedures

## Night codes

The night vault code {B_SECRET_CODE} opens the zinc cabinet of tenant B's warehouse.
"""


@dataclass(frozen=True)
class Corpus:
    settings: Settings
    chunk_tenants: dict[str, str]  # chunk id -> tenant, every chunk of the index


@pytest.fixture(scope="package")
def corpus(client, base_settings, embedder, tmp_path_factory) -> Corpus:
    alias = f"t-frameworks-{uuid.uuid4().hex[:8]}"
    # rerank off: no test here depends on whether a cross-encoder happens to be on the machine
    settings = base_settings.replace(index_name=alias, rerank="off")
    try:
        apply_config(settings, dimension=embedder.dimension, client=client)
        a_docs = _copy_without_tenants(tmp_path_factory.mktemp("docs-a"))
        b_docs = _copy_without_tenants(tmp_path_factory.mktemp("docs-b"))
        (b_docs / B_SECRET).write_text(B_SECRET_TEXT, encoding="utf-8")
        for folder, tenant in ((SAMPLE_DOCS, None), (a_docs, "A"), (b_docs, "B")):
            report = push(
                Path(folder),
                settings,
                collection="docs",
                tenant=tenant,
                client=client,
                embedder=embedder,
            )
            assert report.failed == 0 and report.added, report
        client.indices.refresh(index=alias)
        yield Corpus(settings, _chunk_tenants(client, alias))
    finally:
        cleanup_owned(client, alias)


def _copy_without_tenants(parent: Path) -> Path:
    """docs/ under ``parent``, its front matter's tenants left out (a push under one tenant
    refuses a document that names another)."""
    folder = parent / "docs"
    shutil.copytree(SAMPLE_DOCS, folder)
    for path in folder.rglob("*.md"):
        lines = path.read_text(encoding="utf-8").split("\n")
        kept = [line for line in lines if not line.startswith("tenant:")]
        path.write_text("\n".join(kept), encoding="utf-8")
    return folder


def _chunk_tenants(client, alias: str) -> dict[str, str]:
    answer = client.search(
        index=alias, body={"size": 1000, "_source": ["chunk_id", "tenant"]}, params={}
    )
    return {hit["_source"]["chunk_id"]: hit["_source"]["tenant"] for hit in answer["hits"]["hits"]}
