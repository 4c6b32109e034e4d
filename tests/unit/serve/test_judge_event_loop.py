"""The judging page's writes (a grade, an information need, a snapshot taken or deleted, a file
imported) never hold serve's event loop while the cluster is slow: their cluster calls run in a
worker thread, as every other route's do. They once ran on the loop itself, so one grade waiting
on a paused cluster held every other request of the server (any tenant's search, ``/health``, a
static file) for as long as it waited.

The client here is no OpenSearch: it stands for a cluster that takes ``CLUSTER_SECONDS`` to time
out, which is all these tests need of one (they test the server's concurrency, not a cluster)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import opensearchpy
import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from loader.serve.app import create_app  # noqa: E402
from loader.serve.auth import Sessions, session_key  # noqa: E402
from loader.serve.judge_page import COOKIE  # noqa: E402
from loader.settings import Settings  # noqa: E402

KEY = "judge-loop-key-0123456789"
CLUSTER_SECONDS = 1.5


class TimingOutCluster:
    """Every call blocks its thread ``CLUSTER_SECONDS`` (as opensearch-py waits on a paused
    node), then times out."""

    def __getattr__(self, name: str) -> TimingOutCluster:
        return self

    def __call__(self, *args, **kwargs):
        time.sleep(CLUSTER_SECONDS)
        raise opensearchpy.ConnectionTimeout("TIMEOUT", "read timed out", None)


def _app(tmp_path: Path):
    keys = tmp_path / "keys.toml"
    keys.write_text(f'[keys]\n"{KEY}" = "A"\n', encoding="utf-8")
    keys.chmod(0o600)
    settings = Settings(api_keys_file=str(keys), query_log="ubi", rerank="off")
    app = create_app(settings, client=TimingOutCluster(), load_models=False)
    cookie = Sessions(session_key(keys)).issue("A", rater="key 1")
    token = Sessions(session_key(keys)).csrf(cookie)
    return app, {"X-CSRF-Token": token, "Cookie": f"{COOKIE}={cookie}"}


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/judge/sets/abc/0/grade", {"chunk_id": "c", "grade": 2}),
        ("POST", "/judge/sets/abc/0/need", {"need": "n"}),
        ("POST", "/judge/sets/abc/snapshots", {"label": "before the new model"}),
        ("DELETE", f"/judge/sets/abc/snapshots/{'0' * 20}", None),
        ("POST", "/judge/sets/import?name=n", {"question": "q"}),  # a questions file's line
        ("POST", "/judge/sets/abc/import", {"question": "q"}),
    ],
)
def test_a_write_waiting_on_the_cluster_holds_no_other_request(tmp_path, method, path, body):
    app, headers = _app(tmp_path)

    async def run() -> tuple[int, float, int, float]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            start = time.monotonic()

            async def timed(call):
                answer = await call
                return answer.status_code, time.monotonic() - start

            write = http.request(method, path, json=body, headers=headers)
            slow = asyncio.ensure_future(timed(write))
            await asyncio.sleep(0.2)  # the write is waiting on the cluster by now
            fast = await timed(http.get("/judge/static/judge.css"))
            return (*await slow, *fast)

    write_status, write_seconds, static_status, static_seconds = asyncio.run(run())
    assert write_status == 503  # the cluster did not answer in time: said so
    assert write_seconds >= CLUSTER_SECONDS
    assert static_status == 200
    assert static_seconds < CLUSTER_SECONDS, f"the {method} held the event loop"
