"""Pushes into the test cluster while files and folders of the pushed folder are swapped for
links out of it, folders and FIFOs: no push aborts, nothing outside the folder is indexed."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from opensearchpy import helpers

from loader.index.apply import apply_config
from loader.ingest.sync import push
from tests.swapping import SECRET, file_swaps, folder_swaps, swapping


@pytest.fixture
def settings(base_settings, unique_name, embedder):
    settings = base_settings.replace(index_name=unique_name)
    apply_config(settings, dimension=embedder.dimension)
    return settings


def test_pushes_while_files_are_swapped_never_index_the_outside_nor_abort(
    client, settings, embedder, tmp_path: Path
) -> None:
    kb, outside = tmp_path / "kb", tmp_path / "outside"
    kb.mkdir()
    outside.mkdir()
    (kb / "guide.md").write_text("# Guide\n\nCouriers start at the hub.\n", encoding="utf-8")
    (outside / "secret.md").write_text(f"# Secret\n\n{SECRET}\n", encoding="utf-8")
    (outside / "note.md").write_text(f"# Note\n\n{SECRET}\n", encoding="utf-8")
    swaps = {kb / f"swap{n:02}.md": file_swaps(kb / f"swap{n:02}.md", outside / "secret.md")
             for n in range(10)}  # fmt: skip
    swaps |= {kb / f"sub{n:02}": folder_swaps(kb / f"sub{n:02}", outside) for n in range(10)}

    reports = []
    deadline = time.monotonic() + 60
    with swapping(swaps) as made:
        while len(reports) < 30 and time.monotonic() < deadline:
            reports.append(push(kb, settings, client=client, embedder=embedder))
    assert made[0] > 100 and len(reports) >= 5

    assert all(report.unchanged + report.added + report.updated >= 1 for report in reports)
    reasons = {item["reason"] for report in reports for item in report.skipped}
    assert not any(reason.startswith("unexpected") for reason in reasons), reasons
    client.indices.refresh(index=settings.index_name)
    contents = [
        hit["_source"]["content"]
        for hit in helpers.scan(client, index=settings.index_name, _source=["content"])
    ]
    assert any("Couriers start at the hub." in content for content in contents)
    assert not any(SECRET in content for content in contents)
