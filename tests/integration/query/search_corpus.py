"""The fixture corpus of the search tests (test_search.py, test_search_cli.py): documents of two
tenants, a handbook pushed twice with other chunk strategies, injection strings, and the session's
models.

No trained cross-encoder exists offline: ``cross_encoder_path`` builds one from the bundled MiniLM
weights with a random (seeded, saved) head. Its scores are arbitrary but deterministic, which is
enough to prove that the rerank reorders candidates by the cross-encoder's score.

A plain module rather than conftest fixtures so the two test files share it without touching the
project-wide conftest.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from loader.index.apply import apply_config
from loader.ingest.sync import push

TENANT_A = {
    "printer.md": """---
title: Printer manual
tags: [support]
lang: en
published: 2019-03-01
---
# Printer manual

## Error codes

Error E1043 means the paper tray is empty. Refill the tray and press resume.

## Cleaning

Wipe the print head with a lint-free cloth once a month.
""",
    "refunds.md": """---
title: Refund policy
tags: [billing]
lang: en
published: 2025-06-01
---
# Refund policy

## Late deliveries

Orders delayed by more than 45 minutes past the promised time qualify for a full refund of the
order value, paid to the original payment method.
""",
    "remboursement.md": """---
title: Politique de remboursement
tags: [billing]
lang: fr
published: 2024-01-10
---
# Politique de remboursement

## Retards

Le client est rembourse si la livraison arrive en retard.
""",
    "security.md": """---
title: Account security
tags: [account]
lang: en
published: 2023-05-05
---
# Account security

## Passwords

Reset your password from the login page; the reset link expires after 30 minutes.
""",
}

TENANT_B = {
    "refunds.md": """---
title: Refund policy
tags: [billing]
lang: en
published: 2025-06-01
---
# Refund policy

## Late deliveries

Tenant B secret: orders delayed by more than 45 minutes are refunded in full.
""",
    "printer.md": """---
title: Printer manual
tags: [support]
lang: en
published: 2025-02-01
---
# Printer manual

## Error codes

Tenant B secret: error E1043 means the paper tray is empty.
""",
}

RETURNS = [
    "Returns are accepted within 30 days of delivery.",
    "Items must be unused and in their original packaging.",
    "Start a return from the order page in the app.",
    "A courier collects the parcel within two working days.",
    "The refund is issued once the warehouse inspects the item.",
]
SHIPPING = [
    "Standard shipping takes three to five working days.",
    "Express shipping arrives the next working day.",
    "Shipping is free for orders above fifty euros.",
]
HANDBOOK = {
    "handbook.md": "---\ntitle: Handbook\n---\n# Handbook\n\n## Returns\n\n"
    + " ".join(RETURNS)
    + "\n\n## Shipping\n\n"
    + " ".join(SHIPPING)
    + "\n"
}

INJECTIONS = [
    '"',
    '"}}',
    "{{tenant}}",
    "{{/tenant}}{{^tenant}}",
    "{{{tenant}}}",
    'A" OR "B',
    '"}}, {"match_all": {}}, {"term": {"x": "',
    '10, "query": {"match_all": {}}',
    "*",
    "\n\t\u0000\u2028",
]


def write(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def build_corpus(client, base_settings, root: Path, embedder):
    """Apply the configuration under a fresh alias and push the fixture corpus into it.

    Tenants: A and B (structure chunks), C (the handbook as parent-document chunks) and D (the
    handbook as sentence-window chunks).
    """
    alias = f"t-search-{uuid.uuid4().hex[:8]}"
    settings = base_settings.replace(index_name=alias)
    apply_config(settings, dimension=embedder.dimension, client=client)
    pushes = [
        (TENANT_A, "A", "kb-a", settings),
        (TENANT_B, "B", "kb-b", settings),
        (
            HANDBOOK,
            "C",
            "handbook-parent",
            settings.replace(chunk_strategy="parent-document", chunk_target_tokens=30),
        ),
        (HANDBOOK, "D", "handbook-window", settings.replace(chunk_strategy="sentence-window")),
    ]
    for files, tenant, collection, push_settings in pushes:
        report = push(
            write(root / collection, files),
            push_settings,
            collection=collection,
            tenant=tenant,
            client=client,
            embedder=embedder,
        )
        assert report.failed == 0, report
    return settings
