"""``rewrite = llm``: query rewriting by a chat model behind an OpenAI-compatible endpoint.

``OpenAICompatibleRewriter`` posts one ``/chat/completions`` request per message (standard
library only: no SDK for one POST) with the mode's instruction (``MODE_PROMPTS``) and the
conversation, and reads the reply:

- ``standalone``: one line, the message rewritten to stand alone;
- ``decompose``: the standalone question, then one query per thing asked ("refund time and fee
  for late UPI orders" -> "refund time for UPI", "fee for late orders"); the sub-queries are
  searched and fused, the rerank scores against the whole question;
- ``multi-query``: the standalone question and paraphrases, all searched and fused;
- ``hyde``: ``query:`` the standalone question (searched by BM25) and ``passage:`` a short made-up
  answer, whose embedding the vector side searches (HyDE: an answer looks more like the passage
  sought than a question does).

Any failure (HTTP error, timeout, refused connection, a redirect, a reply that is not a chat
completion, holds no query or holds the API key) gives ``failed_rewrite``: the message searched as
it is, with a warning. ``timeout`` bounds each wait and the answer's body as a whole (an endpoint
that trickled its answer held the search for as long as it liked). The API key is sent as a
bearer token, to the configured URL only (redirects are not followed: the key would go along),
and never logged, put in a warning, shown in a repr or searched: text from the endpoint (which
may echo the request) is scrubbed of it before it is logged, and a reply holding it is refused.

Example::

    rewriter = OpenAICompatibleRewriter("http://127.0.0.1:8000/v1", "qwen2.5", mode="decompose")
    rewriter.rewrite([], "refund time and fee for late UPI orders").queries
"""

from __future__ import annotations

import http.client
import json
import logging
import re
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence

from loader.errors import ConfigError
from loader.query.rewrite import Rewrite, failed_rewrite, parse_queries
from loader.redact import redact_url, scrub_secrets

log = logging.getLogger(__name__)

_COMMON = (
    "You rewrite the user's latest message for a document search engine. Resolve pronouns and "
    'references ("it", "that one", "and for UPI?") using the conversation, and keep names, '
    "numbers and order ids exactly."
)
# The instruction of each rewrite_mode (the system message).
MODE_PROMPTS = {
    "standalone": _COMMON
    + " Answer with the message rewritten as one standalone search question, on one line, with "
    "no other text.",
    "decompose": _COMMON
    + " On the first line, write the whole message as one standalone question. Then write one "
    "standalone search query per thing the message asks, one per line, at most {max_queries}. "
    "No numbering and no other text.",
    "multi-query": _COMMON
    + " On the first line, write the message as one standalone question. Then write up to "
    "{paraphrases} other phrasings of it, as the documentation might word it, one per line. No "
    "numbering and no other text.",
    "hyde": _COMMON
    + " Answer in two parts. A line starting with 'query:' and the message as one standalone "
    "question. Then a line starting with 'passage:' and a short passage of two to four "
    "sentences, as the documentation might say it, that answers the question; invent plausible "
    "details if you must.",
}
# How the conversation is laid out in the user message (one turn per line).
CONVERSATION_HEADER = "Conversation so far:"
LATEST_HEADER = "Latest message:"
# Characters of one earlier turn sent along; the rewriter needs the topic, not the whole answer.
TURN_CHARS = 1000
# Bytes of a reply read; a chat completion of a few queries is far smaller.
MAX_REPLY_BYTES = 1_000_000
# Characters of an error answer put in the warning (after the key is masked in more of it).
ERROR_DETAIL_CHARS = 300
# The shortest API key whose echo in a reply refuses the reply (shorter ones are placeholders).
MIN_ECHOED_KEY_CHARS = 12
_LABEL = re.compile(r"^\s*(query|passage)\s*:\s*", re.IGNORECASE)


class OpenAICompatibleRewriter:
    """Rewrites through an OpenAI-compatible chat-completions endpoint.

    Args:
        base_url: the API root, e.g. ``https://api.openai.com/v1`` or ``http://127.0.0.1:8000/v1``;
            requests go to ``{base_url}/chat/completions``.
        model: model name sent in the request.
        api_key: sent as a bearer token; never logged nor put in a warning or message.
        timeout: seconds to wait for the endpoint (connecting, each read) and for the whole
            answer's body.
        max_queries: most queries to return (decompose, multi-query).
        history_turns: most earlier turns sent along (the latest ones).
        mode: one of ``MODE_PROMPTS``.

    Raises:
        ConfigError: an unknown ``mode``.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 10.0,
        max_queries: int = 3,
        history_turns: int = 6,
        mode: str = "standalone",
    ) -> None:
        if mode not in MODE_PROMPTS:
            raise ConfigError(
                f"rewrite_mode must be one of {', '.join(MODE_PROMPTS)}, got {mode!r}"
            )
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self._api_key = api_key or ""
        self.timeout = timeout
        self.max_queries = max_queries
        self.history_turns = history_turns
        self.mode = mode

    def __repr__(self) -> str:  # the key stays out of reprs and so out of log lines
        key = "****" if self._api_key else ""
        return (
            f"OpenAICompatibleRewriter(url={redact_url(self.url)!r}, model={self.model!r}, "
            f"mode={self.mode!r}, api_key={key!r})"
        )

    def messages(self, history: Sequence[Mapping[str, str]], message: str) -> list[dict[str, str]]:
        """The chat messages sent for ``message``: the mode's instruction, then the conversation
        (one turn per line, the latest ``history_turns``) and the latest message."""
        instruction = MODE_PROMPTS[self.mode].format(
            max_queries=self.max_queries, paraphrases=max(self.max_queries - 1, 1)
        )
        turns = [
            f"{turn.get('role', 'user')}: {' '.join(turn.get('content', '').split())[:TURN_CHARS]}"
            for turn in list(history)[-self.history_turns :]
        ]
        conversation = "\n".join(turns) if turns else "(none)"
        latest = " ".join(message.split())
        return [
            {"role": "system", "content": instruction},
            {
                "role": "user",
                "content": f"{CONVERSATION_HEADER}\n{conversation}\n\n{LATEST_HEADER}\n{latest}",
            },
        ]

    def rewrite(self, history: Sequence[Mapping[str, str]], message: str) -> Rewrite:
        """The mode's queries for ``message``; ``message`` as it is, with a warning, if anything
        goes wrong."""
        if not message.strip():
            return Rewrite([message], message)
        try:
            reply = self._complete(self.messages(history, message))
        except urllib.error.HTTPError as exc:
            # Read more than is shown: the key is masked first, so a cut never splits it.
            detail = exc.read(10 * ERROR_DETAIL_CHARS).decode("utf-8", "replace") if exc.fp else ""
            reason = f"HTTP {exc.code}"
            if exc.code < 400:
                reason += " (redirects are not followed)"
            return self._failed(message, reason, f"HTTP {exc.code} {exc.reason}: {detail}")
        except (OSError, http.client.HTTPException) as exc:  # URLError, timeouts, resets
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, TimeoutError):
                return self._failed(message, f"no answer within {self.timeout:g} s", str(exc))
            return self._failed(
                message, "cannot reach the rewriter", f"{type(exc).__name__}: {exc}"
            )
        except (ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError) as exc:
            # ValueError: not JSON (or not UTF-8); RecursionError: JSON nested too deeply for the
            # parser; the others: JSON of another shape.
            return self._failed(
                message, "the reply is not a chat completion", f"{type(exc).__name__}: {exc}"
            )
        # Only a real key: a placeholder such as "ollama" may well be a word of a good answer.
        if len(self._api_key) >= MIN_ECHOED_KEY_CHARS and self._api_key in reply:
            # An endpoint echoing the request: its "queries" would show and search the key.
            return self._failed(message, "the reply holds the API key", "")
        rewrite = self._parse(reply)
        if not rewrite.queries:
            return self._failed(message, "the reply held no query", repr(reply[:200]))
        log.debug("rewrote %r (%s) into %r", message, self.mode, rewrite)
        return rewrite

    def _complete(self, messages: list[dict[str, str]]) -> str:
        """The text of the model's reply (``choices[0].message.content``)."""
        body = json.dumps({"model": self.model, "messages": messages, "temperature": 0})
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(
            self.url, data=body.encode("utf-8"), headers=headers, method="POST"
        )
        with _OPENER.open(request, timeout=self.timeout) as response:
            # From the headers on: the model's thinking before them is bounded by the timeout
            # of the wait itself, the body as a whole by this.
            deadline = time.monotonic() + self.timeout
            reply = json.loads(_read_until(response, deadline).decode("utf-8"))
        content = reply["choices"][0]["message"]["content"]
        if not isinstance(content, str):
            raise TypeError(f"message content is {type(content).__name__}, not text")
        return content

    def _parse(self, reply: str) -> Rewrite:
        """The reply read as the mode asked: queries, the standalone question, a passage."""
        if self.mode == "hyde":
            query, passage = _hyde_parts(reply)
            queries = parse_queries(query, 1)
            return Rewrite(queries, queries[0] if queries else "", passage)
        lines = parse_queries(reply, self.max_queries + 1)
        if not lines:
            return Rewrite([])
        if self.mode == "standalone":
            return Rewrite(lines[:1], lines[0])
        if self.mode == "decompose":  # the whole question, then its parts
            return Rewrite(lines[1:] or lines[:1], lines[0])
        return Rewrite(lines[: self.max_queries], lines[0])  # multi-query

    def _failed(self, message: str, reason: str, detail: str) -> Rewrite:
        log.warning(
            "query rewrite through %s failed (%s); searching the message as it is",
            redact_url(self.url),
            (scrub_secrets(detail, [self._api_key]) if self._api_key else detail)[
                :ERROR_DETAIL_CHARS
            ],
        )
        return failed_rewrite(message, f"query rewrite failed ({reason})")


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A 3xx is an answer, not a new address: following it would send the key to that host."""

    def redirect_request(self, *_args: object, **_kwargs: object) -> None:
        return None  # urllib then raises the 3xx as an HTTPError


_OPENER = urllib.request.build_opener(_NoRedirects)


def _read_until(response: http.client.HTTPResponse, deadline: float) -> bytes:
    """The answer's body, at most ``MAX_REPLY_BYTES``, read until ``deadline`` (a monotonic
    time). Each read returns what has arrived and waits at most the socket's timeout for more, so
    a body trickled in byte by byte is given up one wait after the deadline at the latest.

    Raises:
        TimeoutError: the deadline passed before the body was complete.
    """
    parts, size = [], 0
    while size < MAX_REPLY_BYTES:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the answer did not arrive within the timeout")
        part = response.read1(MAX_REPLY_BYTES - size)  # what has arrived, not a full buffer
        if not part:
            break
        parts.append(part)
        size += len(part)
    return b"".join(parts)


def _hyde_parts(reply: str) -> tuple[str, str]:
    """The ``query:`` line and the ``passage:`` text of a HyDE reply; unlabelled, the first line
    and the rest."""
    lines = [line for line in reply.splitlines() if line.strip()]
    labelled = [_LABEL.match(line) for line in lines]
    if not any(match and match[1].lower() == "passage" for match in labelled):
        return (lines[0] if lines else ""), " ".join(lines[1:])
    query, passage, target = "", [], ""
    for line, match in zip(lines, labelled, strict=True):
        if match:
            target, line = match[1].lower(), line[match.end() :]
        if target == "passage":
            passage.append(line.strip())
        elif not query:
            query = line.strip()
    return query, " ".join(part for part in passage if part)
