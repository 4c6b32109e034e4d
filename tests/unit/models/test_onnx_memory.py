"""The ONNX sessions' memory bound: onnxruntime's CPU arena is shared by a session's concurrent
runs and keeps its high-water mark, so however many threads embed or rerank at once (serve's
40), at most ``RUNS_AT_ONCE`` runs of a session are in flight, and each thread still gets its own
vectors and scores."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from loader.models import onnx_embedding
from loader.models.embedding import get_embedder
from loader.models.rerank.cross_encoder import CrossEncoderReranker

THREADS = 16


class CountingSession:
    """The real session, counting the runs in flight; each run lingers a little, so runs that
    are allowed to overlap do."""

    def __init__(self, session) -> None:
        self.session = session
        self.lock = threading.Lock()
        self.in_flight = 0
        self.most = 0
        self.runs = 0

    def get_inputs(self):
        return self.session.get_inputs()

    def run(self, *args, **kwargs):
        with self.lock:
            self.in_flight += 1
            self.runs += 1
            self.most = max(self.most, self.in_flight)
        try:
            time.sleep(0.02)
            return self.session.run(*args, **kwargs)
        finally:
            with self.lock:
                self.in_flight -= 1


def test_threads_embedding_at_once_run_the_session_one_at_a_time(monkeypatch):
    encoder = get_embedder("all-MiniLM-L6-v2", backend="onnx").model
    texts = [f"question number {n} " + "about refunds " * (n * 7) for n in range(THREADS)]
    alone = [encoder.encode([text], 1)[0] for text in texts]
    counting = CountingSession(encoder.session)
    monkeypatch.setattr(encoder, "session", counting)
    start = threading.Barrier(THREADS)

    def embed(text: str) -> np.ndarray:
        start.wait()
        return encoder.encode([text], 1)[0]

    with ThreadPoolExecutor(THREADS) as pool:
        together = list(pool.map(embed, texts))
    assert counting.runs == THREADS
    assert counting.most == 1, f"{counting.most} runs of one session in flight at once"
    assert onnx_embedding.RUNS_AT_ONCE == 1
    assert np.allclose(np.stack(together), np.stack(alone), atol=1e-5)


def test_threads_reranking_at_once_run_the_onnx_cross_encoder_one_at_a_time(
    cross_encoder_path, tmp_path, monkeypatch
):
    reranker = CrossEncoderReranker(
        cross_encoder_path, backend="onnx", batch_size=2, cache_dir=tmp_path
    )
    passages = [f"passage {n}: refunds take {n} days " * (n + 1) for n in range(4)]
    questions = [f"how long do refunds take, case {n}?" for n in range(THREADS)]
    alone = [reranker.rerank(question, passages) for question in questions]
    counting = CountingSession(reranker._onnx.session)
    monkeypatch.setattr(reranker._onnx, "session", counting)
    start = threading.Barrier(THREADS)

    def rerank(question: str) -> list[float]:
        start.wait()
        return reranker.rerank(question, passages)

    with ThreadPoolExecutor(THREADS) as pool:
        together = list(pool.map(rerank, questions))
    assert counting.runs == THREADS * 2  # two batches of two passages each
    assert counting.most == 1, f"{counting.most} runs of one session in flight at once"
    assert np.allclose(together, alone, atol=1e-5)


def test_the_sessions_intra_op_threads_do_not_spin(cross_encoder_path, tmp_path):
    # One run at a time, spinning threads burn the cores the waiting runs need (NO_SPINNING).
    encoder = get_embedder("all-MiniLM-L6-v2", backend="onnx").model
    reranker = CrossEncoderReranker(cross_encoder_path, backend="onnx", cache_dir=tmp_path)
    for session in (encoder.session, reranker._onnx.session):
        options = session.get_session_options()
        assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
