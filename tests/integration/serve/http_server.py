"""A uvicorn server of an app in a daemon thread on 127.0.0.1, and a tiny http.client caller, for
the tests of ``loader serve`` (test_serve.py, test_serve_security.py, test_abuse.py).

A plain module rather than conftest fixtures so the test files share it without touching the
project-wide conftest.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import threading
import time

import pytest

uvicorn = pytest.importorskip("uvicorn")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """A uvicorn server of an app in a daemon thread, on 127.0.0.1.

    Args:
        app: the ASGI app.
        log_level: uvicorn's; ``"info"`` turns its access log on.
    """

    def __init__(self, app, log_level: str = "warning") -> None:
        self.port = free_port()
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level=log_level, access_log=True
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Server:
        self.thread.start()
        deadline = time.monotonic() + 120  # the models load at startup
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc_info) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    def raw(self, method: str, path: str, body=None, headers=None) -> tuple[int, str]:
        """The status and the body's text."""
        status, _headers, text = self.full(method, path, headers, body)
        return status, text

    def full(
        self, method: str, path: str, headers=None, body=None
    ) -> tuple[int, dict[str, str], str]:
        """The status, the headers (names lower-cased) and the body's text."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            if isinstance(body, dict | list):
                body = json.dumps(body)
            all_headers = {"Content-Type": "application/json", **(headers or {})}
            connection.request(method, path, body=body, headers=all_headers)
            response = connection.getresponse()
            answered = {name.lower(): value for name, value in response.getheaders()}
            return response.status, answered, response.read().decode("utf-8", "replace")
        finally:
            connection.close()

    def request(self, method: str, path: str, body=None, headers=None) -> tuple[int, dict]:
        """The status and the body as JSON."""
        status, text = self.raw(method, path, body, headers)
        return status, json.loads(text or "null")


def signed_in(server: Server, key: str) -> tuple[str, str]:
    """A judging-page session of ``key`` over plain HTTP: its cookie and the page's token."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        body = f"key={key}"
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        connection.request("POST", "/judge/login", body=body, headers=headers)
        response = connection.getresponse()
        response.read()
        assert response.status == 303
        cookie = response.getheader("set-cookie").split(";")[0]
        connection.request("GET", "/judge", headers={"Cookie": cookie})
        page = connection.getresponse().read().decode()
    finally:
        connection.close()
    return cookie, re.search(r'name="csrf-token" content="([^"]+)"', page).group(1)
