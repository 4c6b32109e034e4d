"""`loader push --workers 2` against the test cluster: the same report, the same chunks and the
same vectors (to float rounding) as `--workers 1`, asserted from what the index returns."""

from __future__ import annotations

import json
import logging
import shutil

import numpy as np
from click.testing import CliRunner
from opensearchpy import helpers

from loader.cli import cli
from loader.index.apply import apply_config
from loader.models.readers import reader_settings
from tests.paths import SAMPLE_DOCS

# Batches of 2 chunks make tasks of 8: the sample folder's chunks fill both workers.
SMALL_BATCHES = {"LOADER_EMBEDDING_BATCH_SIZE": "2"}
COUNTS = ("added", "updated", "unchanged", "deleted", "failed", "chunks", "chunks_written")
COUNTS += ("chunks_deleted", "embedded", "reused_vectors")


def indexed(client, alias: str) -> dict[str, dict]:
    """chunk id -> content hash, source and vector, straight from the index."""
    hits = helpers.scan(
        client, index=alias, query={"_source": ["content_hash", "source", "embedding"]}
    )
    return {hit["_id"]: hit["_source"] for hit in hits}


def test_two_workers_index_what_one_does(
    client, base_settings, unique_name, embedder, tmp_path, caplog
):
    caplog.set_level(logging.INFO, logger="loader.ingest.workers")
    folder = tmp_path / "helpdesk"
    folder.mkdir()
    for path in SAMPLE_DOCS.glob("*.md"):
        shutil.copy(path, folder / path.name)
    reports, chunks = {}, {}
    for workers in (1, 2):
        alias = f"{unique_name}-w{workers}"
        apply_config(base_settings.replace(index_name=alias), dimension=embedder.dimension)
        result = CliRunner().invoke(
            cli,
            ["push", str(folder), "--json", "--workers", str(workers)]
            + ["--url", base_settings.opensearch_url, "--index", alias],
            env=SMALL_BATCHES,
        )
        assert result.exit_code == 0, result.output
        reports[workers] = json.loads(result.stdout)
        chunks[workers] = indexed(client, alias)

    one, two = reports[1], reports[2]
    assert one["embedded"] == one["chunks"] > 16  # more than two tasks: both workers embedded
    started = [r.getMessage() for r in caplog.records]  # one line per reader
    assert len(started) == (1 if reader_settings(base_settings) is None else 2), started
    for line in started:
        assert line.startswith(f"embedding {one['chunks']} chunks in 2 worker processes")
    assert {key: two[key] for key in COUNTS} == {key: one[key] for key in COUNTS}
    assert set(chunks[2]) == set(chunks[1]) and len(chunks[1]) == one["chunks"]
    for chunk_id, chunk in chunks[1].items():
        other = chunks[2][chunk_id]
        assert (other["content_hash"], other["source"]) == (chunk["content_hash"], chunk["source"])
        assert float(np.dot(other["embedding"], chunk["embedding"])) >= 0.9999
