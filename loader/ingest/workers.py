"""Embedding a push's chunks in worker processes (``push_workers``, ``loader push --workers N``).

With one worker (or chunks for a single task) the push's own embedder embeds everything in
process. With N the texts go to a pool of N processes started with ``spawn``: a forked child
inherits the parent's onnxruntime or torch thread pools without their threads and may hang, and
CUDA cannot be forked at all. Each worker loads the model once, in its initializer, with an equal
share of the cores (onnxruntime's intra-op threads, ``torch.set_num_threads``), on ``device`` for
torch (N workers share one GPU).

Memory stays bounded: texts go out in tasks of a few embedding batches, at most
``TASKS_PER_WORKER`` per worker in flight, and come back as float32 arrays. Texts are sent
longest first, so each task's batches pad little and the last tasks to finish are short.

A worker that fails (a model that cannot load, a process that dies) raises ``ModelError`` in the
push, and the pool is shut down on every path. ``spawn`` imports the main module again in each
worker: a script that pushes with workers keeps its work under ``if __name__ == "__main__":``.

Example::

    vectors = embed_passages(embedder, settings.replace(push_workers=2), texts)
    vectors.shape      # (len(texts), embedder.dimension), in the texts' order
"""

from __future__ import annotations

import itertools
import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from loader.errors import ConfigError, LoaderError, ModelError
from loader.settings import Settings, settings_in_scope

if TYPE_CHECKING:  # the model module is imported where a model is loaded
    from loader.models.embedding import Embedder

log = logging.getLogger(__name__)

# Embedding batches per task: enough that a task's pickling is small next to its embedding.
BATCHES_PER_TASK = 4
# Tasks in flight per worker: one running, one waiting in its queue so it never idles.
TASKS_PER_WORKER = 2

Task = TypeVar("Task")


def embed_passages(
    embedder: Embedder, settings: Settings, texts: list[str], show_progress: bool = False
) -> np.ndarray:
    """Passage vectors of ``texts`` (one float32 row per text, in their order), embedded by
    ``settings.push_workers`` processes.

    One worker, or texts that fill only one task, use ``embedder`` in process (starting a worker
    costs seconds); otherwise each worker loads ``embedder_for(settings)`` itself, so the vectors
    are the same as in process (to float rounding).

    Raises:
        ConfigError: ``push_workers`` is below 1.
        ModelError: a worker could not load the model, failed on a batch, or died.
    """
    workers = require_workers(settings.push_workers)
    tasks = plan_tasks(texts, settings.embedding_batch_size * BATCHES_PER_TASK)
    processes = min(workers, len(tasks))
    if processes <= 1:
        return embedder.embed_passages(texts, show_progress=show_progress)
    threads = max(1, _cores() // processes)
    log.info(
        "embedding %d chunks in %d worker processes (threads per worker: %d)",
        len(texts),
        processes,
        threads,
    )
    vectors = np.zeros((len(texts), embedder.dimension), dtype=np.float32)
    bar = _progress_bar(len(texts)) if show_progress else None
    pool = ProcessPoolExecutor(
        max_workers=processes,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_worker,
        initargs=(_model_settings(settings), threads, os.getpid()),
    )
    try:
        submit = _submitter(pool, texts)
        for indices, task_vectors in run_bounded(submit, tasks, processes * TASKS_PER_WORKER):
            vectors[indices] = task_vectors
            if bar is not None:
                bar.update(len(indices))
    except BrokenProcessPool as exc:
        raise ModelError(
            f"an embedding worker process died ({exc}); push again with fewer --workers "
            "(each loads its own copy of the model)"
        ) from None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        if bar is not None:
            bar.close()
    return vectors


def require_workers(push_workers: int) -> int:
    """The ``push_workers`` setting, refused below 1 (a push checks it before reading any file).

    Raises:
        ConfigError: naming the setting and its flag.
    """
    if push_workers < 1:
        raise ConfigError(f"push_workers (--workers) must be at least 1, got {push_workers}")
    return push_workers


def plan_tasks(texts: list[str], size: int) -> list[list[int]]:
    """The indices of ``texts`` cut into tasks of at most ``size``, longest texts first (by
    characters: close enough to tokens to keep each batch's padding small)."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)
    return [order[start : start + size] for start in range(0, len(order), max(1, size))]


def run_bounded(
    submit: Callable[[Task], Future], tasks: Iterable[Task], limit: int
) -> Iterator[tuple[Task, Any]]:
    """Submit ``tasks``, never more than ``limit`` unfinished at once, and yield each task with
    its result as it finishes (not in order). A task's exception is raised here; the caller
    shuts its executor down."""
    remaining = iter(tasks)
    pending: dict[Future, Task] = {
        submit(task): task for task in itertools.islice(remaining, limit)
    }
    while pending:
        done, _ = wait(pending, return_when=FIRST_COMPLETED)
        for future in done:
            task = pending.pop(future)
            yield task, future.result()
            for following in itertools.islice(remaining, 1):
                pending[submit(following)] = following


def _submitter(pool: ProcessPoolExecutor, texts: list[str]) -> Callable[[list[int]], Future]:
    """Send a task's texts, not its indices: the worker needs nothing else."""
    return lambda indices: pool.submit(_embed_task, [texts[i] for i in indices])


def _model_settings(settings: Settings) -> Settings:
    """Only what the embedder needs (model and runtime settings): no credential crosses to a
    worker."""
    return Settings(
        **{name: getattr(settings, name) for name in settings_in_scope("model", "runtime")}
    )


def _cores() -> int:
    """The cores this process may run on (a container's or taskset's limit, not the host's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _progress_bar(total: int) -> Any:
    from tqdm.auto import tqdm

    return tqdm(desc="embedding", total=total, unit="chunk", leave=False)


# --- in the worker processes ---------------------------------------------------------------------

_worker_embedder: Embedder | None = None
_worker_failure: LoaderError | None = None


# How often a worker looks whether the push that started it is still there.
PARENT_POLL_SECONDS = 1.0


def exit_with_parent(parent: int) -> None:
    """End this process soon after ``parent`` (its pid) dies. A push killed with SIGKILL never
    shuts its pool down: its workers, re-parented, would go on holding a model and the cores."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _start_worker(settings: Settings, threads: int, parent: int) -> None:
    """Load the model once per worker. A failure is kept and raised by every task: an exception
    escaping an initializer only breaks the pool, and its message would be lost."""
    global _worker_embedder, _worker_failure
    exit_with_parent(parent)
    try:
        if settings.embedding_backend == "torch":
            import torch

            torch.set_num_threads(threads)  # process-wide: torch has no per-model count
        from loader.models.embedding import embedder_for

        embedder = embedder_for(settings, threads=threads)
        embedder.model  # noqa: B018 - load now, so that tasks only embed
        _worker_embedder = embedder
    except LoaderError as exc:  # same class, so the same exit code; the message says where
        _worker_failure = type(exc)(f"an embedding worker cannot load the model: {exc}")
    except Exception as exc:  # torch and onnxruntime raise many kinds; all mean "cannot load"
        _worker_failure = ModelError(
            f"an embedding worker cannot load {settings.embedding_model!r} "
            f"({settings.embedding_backend}): {type(exc).__name__}: {exc}"
        )


def _embed_task(texts: list[str]) -> np.ndarray:
    if _worker_failure is not None:
        raise _worker_failure
    assert _worker_embedder is not None
    try:
        return _worker_embedder.embed_passages(texts)
    except LoaderError:
        raise
    except Exception as exc:  # the runtime's own kinds; the push reports them as a model error
        raise ModelError(
            f"an embedding worker failed on {len(texts)} chunks: {type(exc).__name__}: {exc}"
        ) from None
