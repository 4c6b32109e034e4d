"""`loader adapt` on a real node: pairs mined from a tenant's indexed chunks (never another
tenant's), a model trained on them and kept only when it beats the stock model on the held-out
pairs; an adopted model is a new index version that pushes and searches. It reads the index,
never a questions or judgments file."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from loader.cli import cli
from loader.index.apply import apply_config
from loader.ingest.sync import push
from loader.models.artifacts import models_cache_root
from loader.train.adapt import PROVENANCE_FILE, read_chunks
from tests.paths import REPO

SAMPLE_DOCS = REPO / "docs"
# Two steps of eight pairs: these tests check what adapt does with a model, not how good it gets.
FAST = ["--epochs", "1", "--batch-size", "8", "--max-pairs", "16", "--max-tokens", "128", "--json"]


@pytest.fixture
def corpus(client, base_settings, unique_name, embedder, tmp_path):
    """The sample documents as tenant A, and tenant B's document about something else."""
    settings = base_settings.replace(index_name=unique_name)
    apply_config(settings, dimension=embedder.dimension, client=client)
    assert (
        push(tenant_a_docs(tmp_path), settings, client=client, embedder=embedder, tenant="A").failed
        == 0
    )
    other = tmp_path / "other"
    other.mkdir()
    (other / "printer.md").write_text(
        "# Printer manual\n\n## Error codes\n\nError E1043 means the paper tray is empty. Fill it "
        "and press the green button twice to resume the print job.\n",
        encoding="utf-8",
    )
    assert push(other, settings, client=client, embedder=embedder, tenant="B").failed == 0
    return settings


def tenant_a_docs(tmp_path: Path) -> Path:
    """The sample documents that name no tenant of their own (one is the partners' page)."""
    folder = tmp_path / "docs"
    if not folder.exists():
        folder.mkdir()
        for path in SAMPLE_DOCS.glob("*.md"):
            if "\ntenant:" not in path.read_text(encoding="utf-8"):
                shutil.copy(path, folder / path.name)
    return folder


def adapt(settings, out: Path, *args: str):
    return CliRunner().invoke(
        cli,
        ["adapt", "--out", str(out), "--url", settings.opensearch_url,
         "--index", settings.index_name, *FAST, *args],
    )  # fmt: skip


def staging_exports() -> set[str]:
    """The ONNX exports of adapt's staging folders in the model cache (87 MB each)."""
    return {path.name for path in models_cache_root().glob(".adapt-*")}


def test_an_adopted_model_is_a_new_version_that_pushes_and_searches(corpus, client, tmp_path):
    chunks = read_chunks(client, corpus, "A")
    assert chunks and {chunk.tenant for chunk in chunks} == {"A"}
    out = tmp_path / "adapted"
    before = staging_exports()
    # --min-gain -1: keep whatever it measures, so that the adopted path runs.
    done = adapt(corpus, out, "--tenant", "A", "--min-gain", "-1")
    assert done.exit_code == 0, done.output
    assert staging_exports() == before  # the staging model's export went with it
    result = json.loads(done.stdout)
    assert result["adopted"] is True and result["out"] == str(out)
    assert set(result["pairs"]) == {"heading", "title", "cloze"} and all(result["pairs"].values())
    assert result["held_out"] > 0 and result["trained_on"] > 0 and result["steps"] > 0
    assert 0 <= result["without_negatives"] <= result["trained_on"]
    provenance = json.loads((out / PROVENANCE_FILE).read_text(encoding="utf-8"))
    assert (provenance["tenant"], provenance["index"]) == ("A", corpus.index_name)
    assert provenance["stock_mrr"] == result["stock_mrr"]
    assert provenance["negative_margin"] == 0.05
    # MiniLM's own temperature and (no) instructions, what the options left open.
    assert provenance["instructions"] == {"query_prefix": "", "passage_prefix": "", "scale": 20.0}
    assert "E1043" not in (out / PROVENANCE_FILE).read_text(encoding="utf-8")

    adapted = corpus.replace(embedding_model=str(out))
    applied = CliRunner().invoke(
        cli, ["apply", "--url", corpus.opensearch_url, "--index", corpus.index_name],
        env={"LOADER_EMBEDDING_MODEL": str(out)},
    )  # fmt: skip
    assert applied.exit_code == 0, applied.output
    assert f"create index {corpus.index_name}-v2" in applied.output  # a model change: a version
    assert push(tenant_a_docs(tmp_path), adapted, client=client, tenant="A").failed == 0
    found = CliRunner().invoke(
        cli,
        ["search", "How long do refunds take for late deliveries?", "--tenant", "A", "--json",
         "--no-rerank", "--url", corpus.opensearch_url, "--index", corpus.index_name],
        env={"LOADER_EMBEDDING_MODEL": str(out)},
    )  # fmt: skip
    assert found.exit_code == 0, found.output
    hits = json.loads(found.stdout)["hits"]
    assert hits and hits[0]["source"] == "refund-policy.md"


def test_too_few_pairs_and_bad_options_are_refused_before_training(corpus, tmp_path):
    few = adapt(corpus, tmp_path / "b", "--tenant", "B")  # one short document
    assert few.exit_code == 2 and "too few to adapt on" in few.output
    bad = adapt(corpus, tmp_path / "c", "--held-out", "1.5")
    assert bad.exit_code == 2 and "--held-out must be between 0 and 1" in bad.output
    for mix in ("0", "1.5"):
        bad = adapt(corpus, tmp_path / "c", "--mix", mix)
        assert bad.exit_code == 2 and "--mix must be in (0, 1]" in bad.output
    bad = adapt(corpus, tmp_path / "c", "--negative-margin", "1")
    assert bad.exit_code == 2 and "--negative-margin must be in [0, 1)" in bad.output
    missing = adapt(corpus.replace(index_name=f"{corpus.index_name}-none"), tmp_path / "d")
    assert missing.exit_code == 5, missing.output  # the index does not fit: run apply, push
    assert "does not exist" in missing.output and "`loader apply`" in missing.output


def beir_from_sample_docs(folder: Path) -> Path:
    """A BEIR folder whose documents are the sample documents' sections (enough to train on),
    with a questions file and qrels that adapt must never read."""
    folder.mkdir()
    documents = []
    for path in sorted(SAMPLE_DOCS.glob("*.md")):
        text = path.read_text(encoding="utf-8").split("\n## ")[1:]
        for number, section in enumerate(text):
            heading, _, body = section.partition("\n")
            documents.append({"_id": f"{path.stem}-{number}", "title": heading, "text": body})
    lines = "".join(json.dumps(document) + "\n" for document in documents)
    (folder / "corpus.jsonl").write_text(lines, encoding="utf-8")
    question = {"_id": "q1", "text": "How long do refunds take?"}
    (folder / "queries.jsonl").write_text(json.dumps(question) + "\n", encoding="utf-8")
    (folder / "qrels").mkdir()
    qrels = f"query-id\tcorpus-id\tscore\nq1\t{documents[0]['_id']}\t1\n"
    (folder / "qrels" / "test.tsv").write_text(qrels, encoding="utf-8")
    return folder


def test_adapt_reads_no_questions_and_writes_no_model_that_is_not_better(
    base_settings, unique_name, tmp_path
):
    """A BEIR dataset's eval index (the sample docs' sections as documents: another shape than
    SciFact's abstracts) is adapted on while an audit hook records every file the process opens:
    nothing under the dataset's folder, so no questions and no qrels file. The training is made
    harmful (a learning rate 250 times the default): the default guard measures it
    below the stock model, refuses it and writes nothing."""
    dataset = beir_from_sample_docs(tmp_path / "sections")
    pushed = CliRunner().invoke(
        cli,
        ["eval", str(dataset), "--mode", "bm25", "--no-rerank", "--no-chart", "--url",
         base_settings.opensearch_url, "--index-prefix", unique_name, "--out-dir",
         str(tmp_path / "results")],
    )  # fmt: skip
    assert pushed.exit_code == 0, pushed.output
    opened: list[str] = []
    watching = [True]

    def record(event: str, args: tuple) -> None:
        if watching[0] and event == "open" and isinstance(args[0], (str, bytes, Path)):
            opened.append(str(args[0]))

    before = staging_exports()
    sys.addaudithook(record)  # an audit hook cannot be removed: it stops recording below
    try:
        done = CliRunner().invoke(
            cli,
            ["adapt", "--out", str(tmp_path / "adapted"), "--tenant", "eval", "--url",
             base_settings.opensearch_url, "--index", f"{unique_name}-sections-structure",
             "--learning-rate", "5e-3", "--epochs", "1", "--batch-size", "8", "--max-pairs", "48",
             "--max-tokens", "128", "--json"],
        )  # fmt: skip
    finally:
        watching[0] = False
    assert done.exit_code == 0, done.output
    result = json.loads(done.stdout)
    assert result["pairs"]["title"] > 10 and result["steps"] > 0
    assert result["adopted"] is False and result["out"] is None
    assert result["adapted_mrr"] < result["stock_mrr"] and result["gain_lower_bound"] < 0
    assert "not surely better than the stock model by more than 0.0" in result["reason"]
    assert not (tmp_path / "adapted").exists()
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".adapt-")] == []
    assert staging_exports() == before  # nor its ONNX export in the model cache
    assert any("safetensors" in path for path in opened), "the hook saw the model load"
    assert [path for path in opened if str(dataset) in path] == []
