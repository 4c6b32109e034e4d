"""The body-read timeout of ``loader serve``: a request whose body stops arriving (headers with
``Content-Length: 1000``, 10 bytes of body, then silence) is answered 408 Request Timeout and its
connection closed once no byte of the body has come for ``serve_body_timeout`` seconds.

uvicorn has no such timeout: without it the connection and the request's task wait until the
client goes away, and enough such clients (slowloris) hold every socket the server may open.

The timeout is per stalled read, not a deadline for the whole body: an upload that keeps
arriving, however slowly, is never cut, and the body is small anyway (``MAX_BODY_BYTES``,
refused on its declared length before a byte is read). Once the body is complete, reads are no
longer timed: a later ``receive`` only waits for the client to go away, which a streaming answer
listens for as long as it streams.

The middleware answers the 408 itself (``{"error": ...}``, with ``Connection: close``, on which
uvicorn closes the connection: the rest of the body is never read) and cancels the request's
handling, wherever it was reading the body (FastAPI's body parsing, a route's
``request.body()``). An exception raised from ``receive`` instead would reach the routes
wrapped in the ``ExceptionGroup`` of ``BaseHTTPMiddleware``'s task group, and be answered as a
body that does not parse (422) or as the server's failure (500).

Example::

    app.add_middleware(BodyReadTimeout, seconds=settings.serve_body_timeout)
"""

from __future__ import annotations

import anyio
import anyio.lowlevel
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from loader.serve.responses import error_response


def stalled_body_message(seconds: float) -> str:
    """The 408's message: what happened, the setting, and what to send."""
    return (
        f"the request body stopped arriving: no byte of it came for {seconds:g} s (the server's "
        "serve_body_timeout); send the whole body the Content-Length declares"
    )


class BodyReadTimeout:
    """ASGI middleware: a request whose body stalls for ``seconds`` is answered 408, its
    connection closed and its handling cancelled."""

    def __init__(self, app: ASGIApp, seconds: float) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = answered = body_complete = False

        async def send_unless_answered(message: Message) -> None:
            nonlocal started
            if answered:  # the 408 went out; nothing of the cancelled handling follows it
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        async def receive_in_time() -> Message:
            nonlocal answered, body_complete
            if body_complete:
                return await receive()
            with anyio.move_on_after(self.seconds):
                message = await receive()
                body_complete = message["type"] != "http.request" or not message.get(
                    "more_body", False
                )
                return message
            if not started:  # else the answer is under way: closing it is all there is to do
                refusal = error_response(
                    408, stalled_body_message(self.seconds), headers={"Connection": "close"}
                )
                await refusal(scope, receive, send)
            answered = True
            handling.cancel()
            await anyio.lowlevel.checkpoint()  # the cancellation lands here
            raise AssertionError("cancelled")  # pragma: no cover (never reached)

        with anyio.CancelScope() as handling:
            await self.app(scope, receive_in_time, send_unless_answered)
