"""The body-read timeout without a server: ``BodyReadTimeout`` around a tiny ASGI app that reads
its whole body, fed by a ``receive`` that stalls, trickles or completes on a schedule."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

pytest.importorskip("fastapi")

import anyio  # noqa: E402

from loader.errors import ConfigError  # noqa: E402
from loader.serve.app import create_app  # noqa: E402
from loader.serve.body_timeout import BodyReadTimeout  # noqa: E402
from loader.settings import Settings  # noqa: E402

SCOPE = {"type": "http", "method": "POST", "path": "/search", "headers": []}


def scheduled(*parts: tuple[float, dict]):
    """A ``receive`` answering each ``(delay, message)`` after its delay, then silence."""
    pending = list(parts)

    async def receive() -> dict:
        if not pending:
            await anyio.sleep_forever()
        delay, message = pending.pop(0)
        await anyio.sleep(delay)
        return message

    return receive


def chunk(data: bytes, more: bool = True) -> dict:
    return {"type": "http.request", "body": data, "more_body": more}


def serve_once(receive, seconds: float, after_body: bool = False) -> tuple[list[dict], list[str]]:
    """The messages the app wrapped in ``BodyReadTimeout(seconds)`` sends, and what it did: read
    its body, answered, and (``after_body``) waited for the client to go away."""
    sent: list[dict] = []
    done: list[str] = []

    async def app(scope, receive, send) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        done.append(f"read {len(body)} bytes")
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})
        done.append("answered")
        if after_body:  # as a streaming answer listens for the client to leave
            done.append((await receive())["type"])

    async def send(message: dict) -> None:
        sent.append(message)

    async def bounded() -> None:  # a middleware that never answers fails, never hangs
        with anyio.fail_after(5):
            await BodyReadTimeout(app, seconds=seconds)(dict(SCOPE), receive, send)

    asyncio.run(bounded())
    return sent, done


def test_a_stalled_body_is_answered_408_and_its_connection_closed() -> None:
    started = time.monotonic()
    sent, done = serve_once(scheduled((0, chunk(b'{"question"'))), seconds=0.3)
    elapsed = time.monotonic() - started
    assert 0.25 < elapsed < 3, elapsed
    assert done == []  # the handling was cancelled, never answered
    start, body = sent
    assert start["status"] == 408
    assert (b"connection", b"close") in start["headers"]
    error = json.loads(body["body"])["error"]
    assert "stopped arriving" in error and "serve_body_timeout" in error and "0.3 s" in error


def test_a_body_that_keeps_arriving_is_never_cut() -> None:
    # Eight parts 0.15 s apart: 1.2 s in all, four times the timeout, no read stalls 0.3 s.
    parts = [(0.15, chunk(b"x" * 10)) for _ in range(7)] + [(0.15, chunk(b"y", more=False))]
    sent, done = serve_once(scheduled(*parts), seconds=0.3)
    assert done == ["read 71 bytes", "answered"]
    assert [m.get("status") for m in sent] == [200, None]


def test_reads_after_the_whole_body_are_not_timed() -> None:
    receive = scheduled((0, chunk(b"{}", more=False)), (0.6, {"type": "http.disconnect"}))
    sent, done = serve_once(receive, seconds=0.2, after_body=True)
    assert done == ["read 2 bytes", "answered", "http.disconnect"]
    assert sent[0]["status"] == 200


def test_every_request_of_the_app_is_read_through_it() -> None:
    app = create_app(Settings(serve_body_timeout=7.5), client=object(), load_models=False)
    outermost = app.user_middleware[0]
    assert outermost.cls is BodyReadTimeout and outermost.kwargs == {"seconds": 7.5}


@pytest.mark.parametrize("seconds", [0, -1.0, float("inf")])
def test_the_setting_must_be_a_positive_number_of_seconds(seconds: float) -> None:
    with pytest.raises(ConfigError, match="serve_body_timeout"):
        Settings(serve_body_timeout=seconds)
