"""Query rewriting: turn a chat turn ("what about for UPI?") into standalone search queries.

A rewriter is anything with ``rewrite(history, message) -> list[str]`` (the ``QueryRewriter``
protocol). ``IdentityRewriter`` searches the message as it is. ``OpenAICompatibleRewriter`` asks a
chat model behind any OpenAI-compatible ``/chat/completions`` endpoint (OpenAI, vLLM, Ollama,
llama.cpp server, ...) for one to N standalone queries, using only the standard library.

A rewriter never fails the search: on any error it logs a warning and returns ``[message]``.
``standalone_queries`` is the search's rewrite stage: it runs the rewriter (if any) and bounds its
answer (deduplicated, each query cut to ``MAX_QUESTION_CHARS``, at most ``MAX_QUERIES``).

Example::

    rewriter = OpenAICompatibleRewriter("http://127.0.0.1:8000/v1", model="qwen2.5-7b-instruct")
    rewriter.rewrite(
        [{"role": "user", "content": "How do refunds for late orders work?"},
         {"role": "assistant", "content": "Orders over 45 minutes late are refunded ..."}],
        "what about for UPI?",
    )
    # ['refund time for late orders paid by UPI']
"""

from __future__ import annotations

import json
import logging
import re
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from loader.query.request import truncate_question

log = logging.getLogger(__name__)

# Queries from a rewriter that are searched; more would multiply the latency for little gain.
MAX_QUERIES = 5

SYSTEM_PROMPT = (
    "You rewrite the user's latest message into standalone search queries for a document search "
    "engine. Resolve pronouns and references using the conversation, keep names, numbers and "
    "order ids exactly, and split a message that asks several things into one query per thing. "
    "Answer with the queries only, one per line, at most {max_queries}, with no numbering and no "
    "other text."
)
# "1. ", "2) ", "- ", "* ", "Query 1: " before a query; "3.5 inch" keeps its number.
_LIST_MARKER = re.compile(r"^\s*(?:(?:[-*\u2022]|\d+[.)])\s+|query\s*\d*\s*:\s*)", re.IGNORECASE)


@runtime_checkable
class QueryRewriter(Protocol):
    """Something that turns the latest chat message into one or more search queries."""

    def rewrite(self, history: Sequence[dict[str, str]], message: str) -> list[str]:
        """Standalone queries for ``message``, given earlier turns ``[{"role", "content"}]``."""
        ...


class IdentityRewriter:
    """Searches the message as it is."""

    def rewrite(self, history: Sequence[dict[str, str]], message: str) -> list[str]:
        return [message]


def standalone_queries(
    rewriter: QueryRewriter | None, history: Sequence[dict[str, str]], question: str
) -> list[str]:
    """The rewriter's standalone queries (deduplicated, each cut, at most ``MAX_QUERIES``), or
    ``[question]`` without a rewriter or when it returned none."""
    if rewriter is None:
        return [question]
    rewritten = rewriter.rewrite(list(history or []), question)
    queries: list[str] = []
    for query in rewritten or []:
        query = truncate_question(str(query).strip())
        if query and query.lower() not in (q.lower() for q in queries):
            queries.append(query)
    if not queries:
        log.warning("the rewriter returned no query; searching the question as it is")
        return [question]
    if len(queries) > MAX_QUERIES:
        log.warning(
            "the rewriter returned %d queries; searching the first %d", len(queries), MAX_QUERIES
        )
    return queries[:MAX_QUERIES]


def parse_queries(reply: str, max_queries: int) -> list[str]:
    """Queries from a model's reply: one per line, list markers and quotes stripped, deduplicated.

    Example::

        parse_queries("1. refund UPI\\n- \\"late order refund\\"\\n", 3)
        # ['refund UPI', 'late order refund']
    """
    queries: list[str] = []
    for line in reply.splitlines():
        query = _LIST_MARKER.sub("", line).strip().strip("\"'`").strip()
        if query and query.lower() not in (q.lower() for q in queries):
            queries.append(query)
    return queries[:max_queries]


class OpenAICompatibleRewriter:
    """Rewrites through an OpenAI-compatible chat-completions endpoint.

    Args:
        base_url: the API root, e.g. ``https://api.openai.com/v1`` or ``http://127.0.0.1:8000/v1``;
            requests go to ``{base_url}/chat/completions``.
        model: model name sent in the request.
        api_key: sent as a bearer token; never logged nor put in an exception message.
        timeout: seconds to wait for the reply.
        max_queries: most queries to return.
        history_turns: most earlier turns sent along (the latest ones).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 10.0,
        max_queries: int = 3,
        history_turns: int = 6,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self._api_key = api_key or ""
        self.timeout = timeout
        self.max_queries = max_queries
        self.history_turns = history_turns

    def __repr__(self) -> str:  # the key stays out of reprs and so out of log lines
        key = "****" if self._api_key else ""
        return f"OpenAICompatibleRewriter(url={self.url!r}, model={self.model!r}, api_key={key!r})"

    def _redact(self, text: str) -> str:
        return text.replace(self._api_key, "****") if self._api_key else text

    def _messages(self, history: Sequence[dict[str, str]], message: str) -> list[dict[str, str]]:
        turns = [
            f"{turn.get('role', 'user')}: {turn.get('content', '')}"
            for turn in list(history)[-self.history_turns :]
        ]
        conversation = "\n".join(turns) if turns else "(none)"
        return [
            {"role": "system", "content": SYSTEM_PROMPT.format(max_queries=self.max_queries)},
            {
                "role": "user",
                "content": f"Conversation so far:\n{conversation}\n\nLatest message:\n{message}",
            },
        ]

    def rewrite(self, history: Sequence[dict[str, str]], message: str) -> list[str]:
        """One to ``max_queries`` standalone queries; ``[message]`` if anything goes wrong."""
        if not message.strip():
            return [message]
        body = json.dumps(
            {"model": self.model, "messages": self._messages(history, message), "temperature": 0}
        ).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                reply = json.loads(response.read().decode("utf-8"))
            content = reply["choices"][0]["message"]["content"]
            queries = parse_queries(str(content or ""), self.max_queries)
        except urllib.error.HTTPError as exc:
            detail = exc.read(300).decode("utf-8", "replace") if exc.fp else ""
            self._warn(f"HTTP {exc.code} {exc.reason}: {detail}")
            return [message]
        except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
            # OSError covers URLError, refused connections and timeouts; ValueError bad JSON.
            self._warn(f"{type(exc).__name__}: {exc}")
            return [message]
        if not queries:
            self._warn("the reply held no query")
            return [message]
        log.debug("rewrote %r into %r", message, queries)
        return queries

    def _warn(self, reason: str) -> None:
        log.warning(
            "query rewrite through %s failed (%s); searching the message as it is",
            self.url,
            self._redact(reason),
        )
