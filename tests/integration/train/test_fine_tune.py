"""`loader fine-tune` against the test cluster, on the tiny BEIR fixture: the examples are mined
from the eval index the way the docstring says, the model is trained and saved with its
provenance, and bad requests are refused before any work.

The fixture's train split judges a single question, so these tests learn from its test split
and name another split as the one eval measures (--test-split train)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from loader.cli import cli
from loader.eval.configs import EvalConfig
from loader.eval.indexes import EvalIndexes
from loader.eval.tasks import load_task
from loader.models.embedding import embedder_for
from loader.train.finetune import PROVENANCE_FILE, mine_examples
from tests.paths import FIXTURES

TINY_BEIR = FIXTURES / "eval" / "tiny-beir"
# What each document's text starts with (its chunks carry the title as their heading).
OPENINGS = {
    "bees": "Honeybee navigation",
    "lava": "Volcanic eruptions",
    "bread": "Sourdough baking",
    "keeper": "Lighthouse keepers",
}


def test_examples_come_from_the_eval_index(base_settings, client, unique_name):
    task = load_task(TINY_BEIR, split="test")
    indexes = EvalIndexes(task, base_settings, client, unique_name)
    settings = indexes.prepare(EvalConfig(base_settings.chunk_strategy, "vector"))
    mined = mine_examples(task, settings, client, embedder_for(settings), 10, negatives=2)
    assert (mined.questions, mined.skipped) == (4, 0)
    # q4 judges two documents: one example each.
    assert sorted(e.question for e in mined.examples) == sorted(
        [
            "waggle dance of honeybees",
            "basaltic lava from shield volcanoes",
            "wild yeast in a sourdough starter",
            "lighthouse",
            "lighthouse",
        ]
    )
    by_question = {e.question: e for e in mined.examples}
    for question, doc in [
        ("waggle dance of honeybees", "bees"),
        ("basaltic lava from shield volcanoes", "lava"),
        ("wild yeast in a sourdough starter", "bread"),
    ]:
        example = by_question[question]
        assert OPENINGS[doc] in example.positive  # a chunk of the judged document, as indexed
        assert len(example.negatives) == 2
        # Hard negatives are chunks of documents the question does not judge relevant.
        assert not any(OPENINGS[doc] in negative for negative in example.negatives)


def test_fine_tune_trains_and_saves_the_model_with_its_provenance(
    base_settings, unique_name, tmp_path
):
    out = tmp_path / "tuned"
    args = ["fine-tune", str(TINY_BEIR), "--out", str(out), "--split", "test"]
    args += ["--test-split", "train", "--epochs", "2", "--batch-size", "4"]
    args += ["--index-prefix", unique_name, "--url", base_settings.opensearch_url, "--json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["examples"] == 5 and summary["steps"] == 4  # 2 epochs of 2 batches
    provenance = json.loads((out / PROVENANCE_FILE).read_text(encoding="utf-8"))
    assert provenance["base_model"] == base_settings.embedding_model
    assert provenance["split"] == "test" and provenance["examples"] == 5
    assert provenance["mined_from"] == f"{unique_name}-tiny-beir-structure"
    tuned = base_settings.replace(embedding_model=str(out), embedding_backend="torch")
    vectors = embedder_for(tuned).embed_passages(["x"])
    assert vectors.shape == (1, 384)


def test_bad_requests_are_refused_before_any_work(base_settings, unique_name, tmp_path):
    common = ["--index-prefix", unique_name, "--url", base_settings.opensearch_url]
    measured = CliRunner().invoke(
        cli, ["fine-tune", str(TINY_BEIR), "--out", str(tmp_path / "a"), "--split", "test", *common]
    )
    assert measured.exit_code == 2 and "--split test" in measured.output
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "keep.txt").write_text("mine", encoding="utf-8")
    refused = CliRunner().invoke(cli, ["fine-tune", str(TINY_BEIR), "--out", str(taken), *common])
    assert refused.exit_code == 2 and "--out" in refused.output
    assert [p.name for p in taken.iterdir()] == ["keep.txt"]
    assert not (tmp_path / "a").exists()
