"""A fake chat model: a real HTTP server on 127.0.0.1 that speaks OpenAI's
``POST /v1/chat/completions`` and answers deterministically from a table of conversations.

The table is a conversations file (``tests/fixtures/eval/conversations.jsonl``): per record the
``history`` and the follow-up ``question``, and the replies a good model would give in each
``rewrite_mode`` -- ``standalone`` (the question written to stand alone), optional ``decompose``
(its parts), ``paraphrases`` (multi-query) and ``passage`` (HyDE). A request is matched by its
mode (the system message is one of ``loader.query.chat_model.MODE_PROMPTS``) and its user turns
(the conversation and the latest message, as the rewriter lays them out); an unknown one is
answered with the latest message as it is.

The model name chooses a failure: ``fail-500`` answers 500 with a body that echoes the request's
headers (as a careless proxy would), ``garbage`` 200 with a body that is not JSON, ``no-choices``
a JSON body without ``choices``, ``slow`` the right answer after ``--slow-seconds``. With
``--api-key-file`` a request without ``Authorization: Bearer <that key>`` gets 401. Every request
is written to the access log (``--access-log``, default stderr): method, path, status, model.

Run it (it prints ``listening on http://127.0.0.1:PORT/v1`` and stops by itself after
``--max-seconds``)::

    python -m tests.fake_llm --port 8765 --conversations tests/fixtures/eval/conversations.jsonl
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TextIO

from loader.query.chat_model import CONVERSATION_HEADER, LATEST_HEADER, MODE_PROMPTS

_USER_TURN = re.compile(r"^user: (.*)$", re.MULTILINE)


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


def conversation_key(previous_user_turns: list[str], latest: str) -> tuple[str, ...]:
    return (*(_norm(turn) for turn in previous_user_turns), _norm(latest))


def load_table(path: Path) -> dict[tuple[str, ...], dict[str, Any]]:
    """Conversation key -> the record (its replies per mode)."""
    table = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            users = [turn["content"] for turn in record["history"] if turn["role"] == "user"]
            table[conversation_key(users, record["question"])] = record
    return table


def mode_of(system: str) -> str:
    for mode, prompt in MODE_PROMPTS.items():
        if system.startswith(prompt.split("{")[0]):
            return mode
    return "standalone"


def reply_for(record: dict[str, Any] | None, mode: str, latest: str) -> str:
    """What a good model answers in ``mode`` (the latest message when the record is unknown)."""
    if record is None:
        return latest
    standalone = record["standalone"]
    if mode == "decompose":
        return "\n".join([standalone, *record.get("decompose", [])])
    if mode == "multi-query":
        return "\n".join([standalone, *record.get("paraphrases", [])])
    if mode == "hyde":
        return f"query: {standalone}\npassage: {record.get('passage', standalone)}"
    return standalone


def parse_prompt(body: dict[str, Any]) -> tuple[str, list[str], str]:
    """The mode, the earlier user turns and the latest message of a rewriter's request."""
    messages = body["messages"]
    system = next((m["content"] for m in messages if m["role"] == "system"), "")
    user = messages[-1]["content"]
    conversation, _, latest = user.partition(f"\n\n{LATEST_HEADER}\n")
    conversation = conversation.removeprefix(f"{CONVERSATION_HEADER}\n")
    return mode_of(system), _USER_TURN.findall(conversation), latest.strip()


class FakeChatModel:
    """The server; ``start()`` serves in a daemon thread, ``base_url`` is the API root."""

    def __init__(
        self,
        table: dict[tuple[str, ...], dict[str, Any]],
        *,
        port: int = 0,
        api_key: str = "",
        slow_seconds: float = 5.0,
        access_log: TextIO = sys.stderr,
    ) -> None:
        self.table, self.api_key, self.slow_seconds = table, api_key, slow_seconds
        self.access_log = access_log
        self.requests: list[dict[str, Any]] = []
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def start(self) -> FakeChatModel:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def answer(self, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, bytes]:
        """The status and body for one request."""
        if self.api_key and headers.get("Authorization") != f"Bearer {self.api_key}":
            return 401, json.dumps({"error": {"message": "invalid api key"}}).encode()
        model = body.get("model", "")
        if model == "fail-500":
            return 500, json.dumps({"error": "upstream failed", "request": headers}).encode()
        if model == "garbage":
            return 200, b"<html>upstream busy</html>"
        if model == "no-choices":
            return 200, json.dumps({"id": "x", "choices": []}).encode()
        if model == "slow":
            time.sleep(self.slow_seconds)
        mode, users, latest = parse_prompt(body)
        content = reply_for(self.table.get(conversation_key(users, latest)), mode, latest)
        completion = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
        }
        return 200, json.dumps(completion).encode()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length))
                except ValueError:
                    body = {}
                headers = dict(self.headers)
                server.requests.append({"path": self.path, "headers": headers, "body": body})
                if self.path != "/v1/chat/completions":
                    status, payload = 404, b'{"error": "not found"}'
                else:
                    status, payload = server.answer(headers, body)
                print(
                    f"{self.command} {self.path} {status} model={body.get('model', '')!r}",
                    file=server.access_log,
                    flush=True,
                )
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:  # the client gave up (its timeout): nothing to answer
                    pass

            def log_message(self, *args: Any) -> None:  # the access log above replaces it
                pass

        return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--conversations", type=Path, required=True)
    parser.add_argument("--api-key-file", type=Path, default=None)
    parser.add_argument("--slow-seconds", type=float, default=5.0)
    parser.add_argument("--max-seconds", type=float, default=900.0)
    parser.add_argument("--access-log", type=Path, default=None)
    args = parser.parse_args(argv)
    api_key = args.api_key_file.read_text(encoding="utf-8").strip() if args.api_key_file else ""
    log = args.access_log.open("a", encoding="utf-8") if args.access_log else sys.stderr
    server = FakeChatModel(
        load_table(args.conversations),
        port=args.port,
        api_key=api_key,
        slow_seconds=args.slow_seconds,
        access_log=log,
    ).start()
    print(f"listening on {server.base_url}", flush=True)
    time.sleep(args.max_seconds)  # bounded: it never outlives a forgotten test run for long
    server.close()


if __name__ == "__main__":
    main()
