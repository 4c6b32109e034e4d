"""Embedding a push's chunks in worker processes: the same vectors in the same order as in
process, at most a bounded number of tasks in flight, clear errors, the pool always shut down.

Starting a spawn pool costs seconds on two busy cores: the module starts one for the vectors and
one for the failing model, no more."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from click.testing import CliRunner

from loader.cli import cli
from loader.errors import ConfigError, ModelError
from loader.ingest.workers import embed_passages, plan_tasks, run_bounded
from loader.models.embedding import embedder_for
from loader.settings import Settings
from tests.paths import REPO, SAMPLE_DOCS

PARAGRAPHS = [
    paragraph
    for path in sorted(SAMPLE_DOCS.glob("*.md"))
    for paragraph in path.read_text(encoding="utf-8").split("\n\n")
    if paragraph.strip()
]
# 50 texts of one to seven consecutive paragraphs (a heading alone to past the model's 256
# tokens), in no order of length; each starts at another paragraph, so no two are the same.
TEXTS = ["\n\n".join(PARAGRAPHS[i : i + 1 + (i * 5) % 7]) for i in range(50)]


@pytest.fixture(scope="module")
def settings() -> Settings:
    return Settings()


@pytest.fixture(scope="module")
def in_process(settings) -> np.ndarray:
    return embed_passages(embedder_for(settings), settings, TEXTS)


@pytest.fixture(scope="module")
def two_workers(settings) -> np.ndarray:
    # Batches of 4 texts, tasks of 16: 50 texts make 4 tasks, so both workers start and work.
    workers = settings.replace(push_workers=2, embedding_batch_size=4)
    vectors = embed_passages(embedder_for(settings), workers, TEXTS)
    assert not multiprocessing.active_children()  # the pool is shut down
    return vectors


def test_two_workers_give_the_vectors_of_one_in_the_same_order(in_process, two_workers):
    assert two_workers.dtype == np.float32
    assert two_workers.shape == in_process.shape == (len(TEXTS), 384)
    similarity = two_workers @ in_process.T  # unit vectors: cosines
    assert np.diag(similarity).min() >= 0.9999
    # Same order: each row is nearer its own text's in-process vector than any other text's.
    for row in range(len(TEXTS)):
        assert similarity[row, row] > np.delete(similarity[row], row).max()


def test_a_worker_that_cannot_load_its_model_raises_a_model_error():
    broken = Settings(embedding_model="/nonexistent/model", push_workers=2, embedding_batch_size=4)
    started = time.perf_counter()
    with pytest.raises(
        ModelError, match="an embedding worker cannot load the model: .*/nonexistent/model"
    ):
        # The push's own embedder is fine: only the workers load the broken model.
        embed_passages(embedder_for(Settings()), broken, TEXTS)
    assert time.perf_counter() - started < 120  # an error, not a hang
    assert not multiprocessing.active_children()


def test_fewer_texts_than_two_tasks_stay_in_process(settings):
    # One task's worth: no pool (starting one costs more than embedding), same vectors.
    embedder = embedder_for(settings)
    vectors = embed_passages(embedder, settings.replace(push_workers=4), TEXTS[:5])
    assert np.allclose(vectors, embedder.embed_passages(TEXTS[:5]), atol=1e-6)


@pytest.mark.parametrize("workers", [0, -3])
def test_a_worker_count_below_one_is_refused(settings, workers):
    with pytest.raises(
        ConfigError, match=rf"push_workers \(--workers\) must be at least 1, got {workers}"
    ):
        embed_passages(embedder_for(settings), settings.replace(push_workers=workers), TEXTS)


def test_push_refuses_workers_below_one_naming_the_flag(tmp_path):
    result = CliRunner().invoke(cli, ["push", str(tmp_path), "--workers", "0"])
    assert result.exit_code == 2
    assert "Invalid value for '--workers': 0 is not in the range x>=1." in result.output


def test_push_refuses_a_setting_below_one_before_reading_files(tmp_path):
    (tmp_path / "a.md").write_text("# A\n\nText.\n", encoding="utf-8")
    result = CliRunner().invoke(
        cli, ["push", str(tmp_path), "--dry-run"], env={"LOADER_PUSH_WORKERS": "0"}
    )
    assert result.exit_code == 2
    assert result.output == "Error: push_workers (--workers) must be at least 1, got 0\n"


def test_tasks_hold_every_text_once_longest_first():
    texts = ["a" * n for n in (3, 10, 1, 7, 7, 2, 9)]
    tasks = plan_tasks(texts, 3)
    assert [len(task) for task in tasks] == [3, 3, 1]
    assert sorted(i for task in tasks for i in task) == list(range(len(texts)))
    lengths = [len(texts[i]) for task in tasks for i in task]
    assert lengths == sorted(lengths, reverse=True)
    assert plan_tasks([], 3) == []


def test_no_more_tasks_in_flight_than_the_limit():
    unfinished = 0
    most = 0
    lock = threading.Lock()

    def work(task: int) -> int:
        time.sleep(0.01 * (task % 3))  # finish out of order
        return task * task

    with ThreadPoolExecutor(max_workers=8) as pool:

        def submit(task: int):
            nonlocal unfinished, most
            with lock:
                unfinished += 1
                most = max(most, unfinished)
            return pool.submit(work, task)

        results = {}
        for task, result in run_bounded(submit, range(20), limit=3):
            with lock:
                unfinished -= 1
            results[task] = result
    assert results == {task: task * task for task in range(20)}
    assert most == 3  # reached, never passed


def test_a_failing_task_raises_in_the_caller():
    def work(task: int) -> int:
        if task == 4:
            raise ModelError("task 4 failed")
        return task

    with ThreadPoolExecutor(max_workers=2) as pool, pytest.raises(ModelError, match="task 4"):
        list(run_bounded(lambda task: pool.submit(work, task), range(10), limit=2))


def test_a_workers_share_of_the_cores_reaches_onnxruntime(settings):
    session = embedder_for(settings, threads=1).model.session
    assert session.get_session_options().intra_op_num_threads == 1


ORPHAN_SCRIPT = """
import multiprocessing, os, sys, time
from loader.ingest import workers

def child(parent):
    workers.exit_with_parent(parent)
    time.sleep(60)

if __name__ == "__main__":
    process = multiprocessing.get_context("spawn").Process(target=child, args=(os.getpid(),))
    process.start()
    print(process.pid, flush=True)
    time.sleep(1.5)  # the child is up and watching
    os.kill(os.getpid(), 9)  # what SIGKILL of a push does: no shutdown, no cleanup
"""


def test_a_worker_ends_soon_after_the_push_that_started_it_is_killed(tmp_path):
    script = tmp_path / "orphan.py"
    script.write_text(ORPHAN_SCRIPT, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    child = int(done.stdout.split()[0])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(child):
        time.sleep(0.2)
    assert not _alive(child), f"worker {child} outlived its parent"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().split(") ")[-1][0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False
