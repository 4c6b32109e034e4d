"""The benchmarks that need a cluster, each run end to end on tiny inputs against the session's
node (``CLUSTER_CASES`` of ``tests/benchmark_cases.py``), and none may leave an index behind.

Placeholders a case may use (each one a fixture below, made only when a case asks for it):

- ``{url}`` the node; ``{prefix}`` a name the test owns (what starts with it is deleted after);
  ``{tmp}`` the test's folder; ``{dataset}`` the tiny BEIR folder (named ``scifact``);
- ``{eval_prefix}``: the prefix of an index ``loader eval`` built of ``{dataset}`` with the
  default model (``<prefix>-scifact-structure``, tenant ``eval``), ``{eval_index}`` its alias;
  ``{bge_prefix}`` the same with bge-small-en-v1.5; ``{docs_prefix}`` one of ``docs/`` for
  the standalone questions of ``tests/fixtures/eval/conversations.jsonl``;
- ``{candidates}``: a folder holding ``learned_rerank_scifact.py``'s pickled candidates of
  ``{eval_prefix}`` (train and test), as its ``diagnose`` and ``headroom`` leave them;
- ``{model}``: a learned reranker ``loader learn`` kept, learned on ``{model_index}`` (tenant
  ``A``, ``tests/integration/train/test_learn.py``'s planted corpus).
"""

from __future__ import annotations

import json
import shutil
import uuid

import pytest

from loader.eval.configs import index_alias
from loader.eval.runner import evaluate
from loader.eval.tasks import load_task
from tests import benchmark_cases as cases
from tests.conftest import cleanup_owned
from tests.paths import FIXTURES, SAMPLE_DOCS


@pytest.fixture(scope="module")
def owned(client):
    """The prefix of every index this module's fixtures build; deleted when the module ends."""
    name = f"t-bench-{uuid.uuid4().hex[:8]}"
    yield name
    cleanup_owned(client, name)


@pytest.fixture
def url(opensearch_url):
    return opensearch_url


@pytest.fixture
def prefix(unique_name):
    return unique_name


@pytest.fixture
def tmp(tmp_path):
    return str(tmp_path)


@pytest.fixture(scope="module")
def tiny_beir(tmp_path_factory):
    return cases.write_tiny_beir(tmp_path_factory.mktemp("beir") / "scifact")


@pytest.fixture
def dataset(tiny_beir):
    return str(tiny_beir)


def _eval_index(settings, client, folder, prefix: str) -> str:
    """``prefix``'s eval index of ``folder``: pushed by ``loader eval`` (one bm25 run)."""
    evaluate(load_task(folder), settings, modes=("bm25",), index_prefix=prefix, client=client)
    return prefix


@pytest.fixture(scope="module")
def eval_prefix(base_settings, client, tiny_beir, owned):
    return _eval_index(base_settings, client, tiny_beir, f"{owned}-sfa")


@pytest.fixture
def eval_index(eval_prefix):
    return index_alias(eval_prefix, "scifact", "structure")


@pytest.fixture(scope="module")
def bge_prefix(base_settings, client, tiny_beir, owned):
    settings = base_settings.replace(embedding_model="bge-small-en-v1.5")
    return _eval_index(settings, client, tiny_beir, f"{owned}-sfb")


@pytest.fixture(scope="module")
def docs_prefix(base_settings, client, tmp_path_factory, owned):
    questions = tmp_path_factory.mktemp("docs-questions") / "standalone.jsonl"
    with (FIXTURES / "eval" / "conversations.jsonl").open(encoding="utf-8") as lines:
        records = [json.loads(line) for line in lines if line.strip()]
    questions.write_text(
        "".join(
            json.dumps(
                {
                    "id": r["id"],
                    "question": r["standalone"],
                    **{k: r[k] for k in ("source", "heading_path") if k in r},
                }
            )
            + "\n"
            for r in records
        ),  # fmt: skip
        encoding="utf-8",
    )
    task = load_task(questions, docs=SAMPLE_DOCS)
    prefix = f"{owned}-sfc"
    evaluate(task, base_settings, modes=("bm25",), index_prefix=prefix, client=client)
    return prefix


@pytest.fixture(scope="module")
def candidate_pickles(base_settings, eval_prefix, tiny_beir, tmp_path_factory):
    """learned_rerank_scifact.py's train and test candidates of ``eval_prefix``, searched by its
    own functions."""
    import argparse

    from benchmarks import learned_rerank_scifact as harness

    folder = tmp_path_factory.mktemp("candidates")
    args = argparse.Namespace(index_prefix=eval_prefix, cache_dir=str(folder))
    settings = base_settings.replace(query_log="off")
    for split in ("train", "test"):
        pairs = harness.judged(str(tiny_beir), split, settings, eval_prefix)
        harness.examples(pairs, settings, harness._cache(args, split))
    return folder


@pytest.fixture
def candidates(candidate_pickles, tmp_path):
    """A copy of the pickles: what a script adds beside them stays in this test."""
    folder = tmp_path / "candidates"
    shutil.copytree(candidate_pickles, folder)
    return str(folder)


@pytest.fixture(scope="module")
def model_index(base_settings, client, embedder, tmp_path_factory, owned):
    from loader.index.apply import apply_config
    from loader.ingest.sync import push
    from tests.integration.train.test_learn import write_corpus

    settings = base_settings.replace(index_name=f"{owned}-planted")
    apply_config(settings, dimension=embedder.dimension, client=client)
    folder = tmp_path_factory.mktemp("planted") / "docs"
    write_corpus(folder, "described")
    report = push(folder, settings, client=client, embedder=embedder, tenant="A")
    assert report.failed == 0
    client.indices.refresh(index=settings.index_name)
    return settings.index_name


@pytest.fixture(scope="module")
def model(base_settings, client, model_index, tmp_path_factory):
    from loader.train.learn import LearnRequest, learn
    from tests.integration.train.test_learn import chunk_ids, questions_file

    # Served in bm25, the mode it learns over: the guard judges it against what is served.
    settings = base_settings.replace(index_name=model_index, search_mode="bm25")
    folder = tmp_path_factory.mktemp("learned")
    source = questions_file(folder / "planted.jsonl", chunk_ids(client, settings, "A"), False)
    request = LearnRequest(sources=(source,), out=folder / "model", tenant="A", mode="bm25",
                           rounds=160, folds=3)  # fmt: skip  # test_learn.py's FAST
    result = learn(request, settings, client=client)
    assert result.adopted, result.reason
    return result.out  # the tenant's model folder, <out>/A


def _indices(client) -> set[str]:
    return {name for name in client.indices.get(index="*", expand_wildcards="all")}


@pytest.mark.parametrize("script", sorted(cases.CLUSTER_CASES))
def test_the_script_runs_on_a_tiny_input(script, request, client, tmp_path):
    runs = cases.CLUSTER_CASES[script]
    values = {name: request.getfixturevalue(name) for name in cases.placeholders(runs)}
    before = _indices(client)
    try:
        for run in runs:
            env, args = cases.fill(run, values)
            done = cases.run_script(script, args, cwd=tmp_path, env=env)
            assert done.returncode in {0, *cases.ALSO_FINE.get(script, ())}, (
                f"{script} {' '.join(args)}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
            )
            assert done.stdout.strip(), f"{script} printed nothing"
    finally:
        owner = values.get("prefix", "\0")
        left = sorted(
            name
            for name in _indices(client) - before
            if not name.startswith((".", owner))  # system indices; the test's own prefix
        )
        for name in left:
            client.indices.delete(index=name, ignore=[404])
    assert left == [], f"{script} left indices behind: {left}"
