"""Every script under ``benchmarks/`` with the arguments of its smoke run (issue #52, item 6).

A benchmark is code: a signature it calls can change under it. Each script is run end to end, as
``python benchmarks/<script> <args>``, on a tiny BEIR folder written into the test's temporary
folder (``write_tiny_beir``), with tiny sizes, and must exit 0 within ``TIMEOUT`` seconds.

- ``LOCAL_CASES`` need no cluster (``tests/unit/test_benchmarks.py``);
- ``CLUSTER_CASES`` run against the session's node (``tests/integration/test_benchmarks.py``);
  they create indices only under the ``{prefix}`` they are given, which the test deletes;
- ``RUN_BY`` names the modules that have no command of their own and the script that runs them.

``tests/unit/test_benchmarks.py`` fails when a script is in none of the three, so a new script
cannot go without its smoke run. To add one, add a line: ``"script.py": [(arg, ...), ...]``, one
tuple per run (in order). An argument holds ``{name}`` placeholders filled in by the test: a
run's leading ``NAME=value`` arguments are environment variables, as in a shell. The
placeholders each test knows are listed in its module docstring.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.paths import REPO

BENCHMARKS = REPO / "benchmarks"
TIMEOUT = 240  # seconds any one run may take (on a busy machine; they take 2-30 s when quiet)

Run = tuple[str, ...]

LOCAL_CASES: dict[str, list[Run]] = {
    "bench_embedding.py": [
        ("{dataset}", "--passages", "6", "--queries", "2", "--models", "all-MiniLM-L6-v2",
         "--rounds", "1", "--batch-size", "4"),
    ],
    "bench_onnx_ab.py": [
        ("{dataset}", "{onnx}", "{onnx_copy}", "--passages", "8", "--rounds", "2"),
    ],
    "house_measures.py": [(), ("--json",)],
    # 0.3 MB: over the 256 KB a Markdown body is parsed at once below, so windows are read.
    "bench_markdown_memory.py": [("--mb", "0.3", "--shapes", "table4,paragraph,mix")],
}  # fmt: skip

_HARNESS = ("--url", "{url}", "--dataset", "{dataset}")
# 20 boosting rounds, not 300: the learned-rerank scripts train ~100 small models each.
_LEARNED = (*_HARNESS, "--index-prefix", "{eval_prefix}", "--cache-dir", "{tmp}", "--rounds", "20")
_WHY = (
    *_HARNESS,
    "--cache-dir",
    "{candidates}",
    "--why-cache-dir",
    "{tmp}/why",
    "--index-prefixes",
    "{eval_prefix},{bge_prefix}",
    "--rounds",
    "20",
    "--sizes",
    "5,9",
)

CLUSTER_CASES: dict[str, list[Run]] = {
    "bench_bulk_load.py": [(*_HARNESS, "--limit", "12", "--repeat", "1")],
    "bench_learned_rerank.py": [
        ("--url", "{url}", "--model", "{model}", "--index", "{model_index}", "--tenant", "A",
         "--rounds", "1", "--limit", "3"),
    ],
    "bench_load.py": [
        ("--target", "one={url}", "--shards", "1", "--replicas", "0", "--dataset", "{dataset}",
         "--limit", "0", "--requests", "3", "--threads", "2"),
    ],
    "bench_push.py": [(*_HARNESS, "--limit", "12")],
    "bench_scale.py": [
        (*_HARNESS, "--sizes", "40", "--queries", "2", "--warmup", "1", "--recall-queries", "2",
         "--exact-check", "1", "--ef-sweep", "100", "--bulk-threads", "1",
         "--index-prefix", "{prefix}", "--plot", "{tmp}/scale.png", "--json", "{tmp}/scale.json"),
    ],
    "bench_search.py": [
        (*_HARNESS, "--index", "{eval_index}", "--tenant", "eval", "--count", "2",
         "--candidates", "10"),
    ],
    "bench_serve_memory.py": [
        # The default reranker, learned: one model per tenant, written as `loader learn` does.
        ("--url", "{url}", "--requests", "40", "--concurrency", "4", "--every", "20",
         "--max-growth", "1000", "--max-seconds", "120"),
    ],
    "bench_startup.py": [("OPENSEARCH_URL={url}", "LOADER_INDEX_NAME={eval_index}", "--runs", "1")],
    "bench_text_templates.py": [(*_HARNESS, "--docs", "6", "--queries", "2")],
    "bm25_proximity.py": [
        ("OPENSEARCH_URL={url}", "{dataset}", "--index", "{eval_index}", "--depth", "10"),
    ],
    "eval_scifact.py": [
        (*_HARNESS, "--index-prefix", "{prefix}", "--out-dir", "{tmp}/eval", "--limit", "3",
         "--candidates", "10"),
    ],
    "fusion_ceiling.py": [
        ("OPENSEARCH_URL={url}", "{dataset}", "--index", "{eval_index}", "--depth", "10",
         "--output", "{tmp}/grid.json"),
    ],
    # The cached candidates of the tiny folder's 12 train claims: 4 set apart, 2 batches of 4.
    "judge_next_scifact.py": [
        (*_HARNESS, "--index-prefix", "{eval_prefix}", "--cache-dir", "{candidates}",
         "--rounds", "20", "--seeds", "1", "--batch", "4", "--max-claims", "8",
         "--held-out", "4", "--folds", "2", "--out", "{tmp}/judge_next.json"),
    ],
    "learned_guard_scifact.py": [
        ("choose", *_LEARNED, "--sizes", "8", "--seeds", "1", "--fold-choices", "2,3",
         "--out", "{tmp}/choose.json"),
        ("score", "--fold-choices", "2,3", "--runs-from", "{tmp}/choose.json"),
        ("curve", *_LEARNED, "--sizes", "8", "--seeds", "1", "--folds", "2"),
    ],
    "learned_rerank_ablation.py": [
        (*_HARNESS, "--index-prefix", "{eval_prefix}", "--cache-dir", "{candidates}",
         "--rounds", "20", "--out", "{tmp}/ablation.json"),
    ],
    "learned_readers_scifact.py": [
        ("choose", *_LEARNED, "--folds", "2"),
        ("learn", *_LEARNED, "--model-dir", "{tmp}/readers", "--mode", "hybrid-rrf",
         "--out", "{tmp}/learn.json"),
        ("second-stage", *_LEARNED),
        ("test", *_LEARNED, "--learn-result", "{tmp}/learn.json"),
    ],
    "learned_rerank_scifact.py": [
        ("collect", *_LEARNED),
        ("headroom", *_LEARNED),
        ("curve", *_LEARNED, "--sizes", "10", "--seeds", "1", "--model-dir", "{tmp}/models"),
        ("diagnose", *_LEARNED),
        ("final", *_LEARNED, "--out", "{tmp}/final.json"),
        ("carry-over", *_LEARNED, "--model", "{model}", "--docs-prefix", "{docs_prefix}"),
    ],
    "learned_rerank_why.py": [
        ("LOADER_EMBEDDING_MODEL=bge-small-en-v1.5", "sfb-candidates", *_WHY),
        ("all", *_WHY, "--out", "{tmp}/why.json"),
    ],
    "probe_hostile.py": [
        ("--url", "{url}", "--quick", "--rounds", "1", "--races", "1", "--race-files", "20"),
    ],
    "train_reranker.py": [
        (*_HARNESS, "--index", "{eval_index}", "--tenant", "eval", "--out", "{tmp}/reranker",
         "--epochs", "1", "--candidates", "5", "--negatives", "1", "--max-tokens", "64"),
    ],
    "tune_scifact.py": [
        (*_HARNESS, "--index-prefix", "{prefix}", "--budget", "2", "--limit", "4",
         "--space", "candidates=10,20", "--out", "{tmp}/tune.json"),
    ],
}  # fmt: skip

# Modules without a command of their own -> the script whose smoke run runs them.
RUN_BY: dict[str, str] = {
    "probe_surfaces.py": "probe_hostile.py",
    "scale_corpus.py": "bench_scale.py",
    "scale_measure.py": "bench_scale.py",
    "scale_report.py": "bench_scale.py",
}

# Exit codes other than 0 a script may end with on the tiny data (and what they mean there).
ALSO_FINE: dict[str, set[int]] = {"eval_scifact.py": {1}}  # 1: SciFact's targets missed


def scripts() -> list[str]:
    """The scripts of ``benchmarks/``, by file name."""
    return sorted(path.name for path in BENCHMARKS.glob("*.py") if path.name != "__init__.py")


def fill(run: Run, values: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """(environment, arguments) of a run, its ``{name}`` placeholders filled from ``values``."""
    env: dict[str, str] = {}
    args = [part.format(**values) for part in run]
    while args and "=" in args[0] and args[0].split("=", 1)[0].isupper():
        name, value = args.pop(0).split("=", 1)
        env[name] = value
    return env, args


def placeholders(runs: Sequence[Run]) -> set[str]:
    """The ``{name}`` placeholders the runs use."""
    import string

    return {
        name
        for run in runs
        for part in run
        for _text, name, _spec, _conversion in string.Formatter().parse(part)
        if name
    }


def run_script(
    script: str, args: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``python benchmarks/<script> <args>`` from ``cwd`` (never the repository: a script that
    writes into its working folder writes into the test's), without the caller's loader or cluster
    settings unless ``env`` gives them."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith(("OPENSEARCH_", "LOADER_"))}
    return subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args],
        cwd=cwd,
        env={
            **kept,
            "PYTHONPATH": str(REPO),
            "HF_HUB_OFFLINE": "1",
            # LightGBM's OpenMP threads otherwise spin while they wait: on a shared machine that
            # was five times the CPU of the tiny models' training itself.
            "OMP_WAIT_POLICY": "PASSIVE",
            **(env or {}),
        },
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


# --- the tiny BEIR folder ------------------------------------------------------------------------

TOPICS = 18
TRAIN_TOPICS = 12  # the first 12 topics' questions are judged in train, the other 6 in test
_SYLLABLES = ("ka", "lo", "mi", "ne", "su", "ta", "vo", "ri", "pe", "du", "go", "zi", "ba", "fe")


def _word(rng: random.Random) -> str:
    return "".join(rng.sample(_SYLLABLES, 3))


def write_tiny_beir(folder: Path) -> Path:
    """A SciFact-shaped BEIR folder (``corpus.jsonl.gz``, ``queries.jsonl``, ``qrels/train.tsv``
    and ``qrels/test.tsv``) of 36 short abstracts: per topic, the document that answers its
    question (grade 1) and one that shares a word of it but does not, so neither BM25 nor the
    vectors are perfect. Seeded: the same folder every time."""
    rng = random.Random(52)
    (folder / "qrels").mkdir(parents=True)
    documents, queries, qrels = [], [], {"train": [], "test": []}
    for topic in range(TOPICS):
        subject, cause, place = _word(rng), _word(rng), _word(rng)
        documents.append({
            "_id": f"d{topic}a",
            "title": f"The {subject} of {place}",
            "text": f"We measured how {cause} changes the {subject}. The {subject} rose in "
            f"every {place} sample. Treating {cause} lowered it again. These results held "
            "in a second cohort.",
        })  # fmt: skip
        documents.append({
            "_id": f"d{topic}b",
            "title": f"A survey of {place}",
            "text": f"The {place} region was surveyed for {subject} twice. No effect was "
            f"seen in the {place} controls. Funding came from a {_word(rng)} grant. The data "
            "are public.",
        })  # fmt: skip
        queries.append({"_id": f"q{topic}", "text": f"{cause} raises the {subject} in {place}"})
        split = "train" if topic < TRAIN_TOPICS else "test"
        qrels[split].append(f"q{topic}\td{topic}a\t1")
    with gzip.open(folder / "corpus.jsonl.gz", "wt", encoding="utf-8") as corpus:
        corpus.writelines(json.dumps(document) + "\n" for document in documents)
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps(query) + "\n" for query in queries), encoding="utf-8"
    )
    for split, rows in qrels.items():
        text = "query-id\tcorpus-id\tscore\n" + "".join(row + "\n" for row in rows)
        (folder / "qrels" / f"{split}.tsv").write_text(text, encoding="utf-8")
    return folder
