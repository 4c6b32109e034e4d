"""Query rewriting: turn a chat turn ("what about for UPI?") into standalone search queries.

A rewriter is anything with ``rewrite(history, message)`` (the ``QueryRewriter`` protocol) that
returns the queries to search, or a ``Rewrite`` when it has more to say (the question to rerank
against, a HyDE passage, warnings). Three come with the package, chosen by the ``rewrite``
setting through ``loader.query.rewriters.rewriter_from_settings``, the one place a rewriter is
built from settings:

- ``off``: none; the message is searched as it is (``IdentityRewriter`` does the same on purpose);
- ``concat``: ``loader.query.conversation.ConcatRewriter``, no model: a follow-up that cannot stand
  alone is searched with the last standalone user question;
- ``llm``: ``OpenAICompatibleRewriter``, a chat model behind any OpenAI-compatible
  ``/chat/completions`` endpoint (OpenAI, vLLM, Ollama, llama.cpp server ...), standard library
  only, in one of the ``rewrite_mode`` modes (``MODE_PROMPTS``): ``standalone`` (one query),
  ``decompose`` (one query per thing asked), ``multi-query`` (the question and paraphrases) or
  ``hyde`` (the question for BM25, a hypothetical answer whose embedding the vector side searches).

A rewriter never fails the search: on any error the message is searched as it is and the
``Rewrite`` carries a warning (``SearchResult.warnings``) without the endpoint's URL, answer or
key; the log has the URL and the reason. ``rewrite_question`` is the search's rewrite stage: it
runs the rewriter and bounds its answer (deduplicated, each query cut to ``MAX_QUESTION_CHARS``,
at most ``MAX_QUERIES``).

Example::

    rewriter = OpenAICompatibleRewriter("http://127.0.0.1:8000/v1", model="qwen2.5-7b-instruct")
    rewriter.rewrite(
        [{"role": "user", "content": "How do refunds for late orders work?"}],
        "what about for UPI?",
    ).queries
    # ['How long do refunds for late orders paid by UPI take?']
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from loader.query.request import truncate_question

log = logging.getLogger(__name__)

# Queries from a rewriter that are searched; more would multiply the latency for little gain.
MAX_QUERIES = 5
# "1. ", "2) ", "- ", "* ", "Query 1: " before a query; "3.5 inch" keeps its number.
_LIST_MARKER = re.compile(r"^\s*(?:(?:[-*\u2022]|\d+[.)])\s+|query\s*\d*\s*:\s*)", re.IGNORECASE)


@dataclass(frozen=True)
class Rewrite:
    """What the rewrite stage searches.

    Attributes:
        queries: searched by BM25 and, without ``hypothetical``, embedded for the vector side;
            several are fused by RRF.
        standalone: the message rewritten to stand alone; the rerank scores against it.
        hypothetical: HyDE: a made-up answer, embedded for the vector side instead of the queries.
        warnings: what went wrong (the message was then searched as it is), safe to show anyone.
    """

    queries: list[str]
    standalone: str = ""
    hypothetical: str = ""
    warnings: tuple[str, ...] = ()

    @property
    def vector_texts(self) -> list[str] | None:
        """The text embedded per query when it is not the query itself (HyDE), else ``None``."""
        return [self.hypothetical] * len(self.queries) if self.hypothetical else None


def failed_rewrite(message: str, reason: str) -> Rewrite:
    """The message searched as it is, with a warning saying why."""
    return Rewrite([message], message, warnings=(f"{reason}; searched the message as it is",))


@runtime_checkable
class QueryRewriter(Protocol):
    """Something that turns the latest chat message into one or more search queries."""

    def rewrite(self, history: Sequence[Mapping[str, str]], message: str) -> list[str] | Rewrite:
        """Queries for ``message`` (or a ``Rewrite``), given earlier turns ``[{role, content}]``."""
        ...


class IdentityRewriter:
    """Searches the message as it is (whatever the ``rewrite`` setting says)."""

    def rewrite(self, history: Sequence[Mapping[str, str]], message: str) -> list[str]:
        return [message]


def _bounded(texts: Sequence[object]) -> list[str]:
    queries: list[str] = []
    for text in texts:
        query = truncate_question(" ".join(str(text).split()))
        if query and query.lower() not in (q.lower() for q in queries):
            queries.append(query)
    return queries


def rewrite_question(
    rewriter: QueryRewriter | None, history: Sequence[Mapping[str, str]], question: str
) -> Rewrite:
    """The search's rewrite stage: the rewriter's answer, bounded (deduplicated, each query cut,
    at most ``MAX_QUERIES``), or ``question`` as it is without a rewriter or when it gave none.

    Example::

        rewrite_question(None, [], "refunds").queries          # ['refunds']
    """
    if rewriter is None:
        return Rewrite([question], question)
    answer = rewriter.rewrite(list(history or ()), question)
    rewrite = answer if isinstance(answer, Rewrite) else Rewrite(list(answer or []))
    queries = _bounded(rewrite.queries)
    if not queries:
        log.warning("the rewriter returned no query; searching the question as it is")
        return failed_rewrite(question, "the query rewriter returned no query")
    if len(queries) > MAX_QUERIES:
        log.warning(
            "the rewriter returned %d queries; searching the first %d", len(queries), MAX_QUERIES
        )
    standalone = (_bounded([rewrite.standalone]) or queries)[0]
    hypothetical = truncate_question(rewrite.hypothetical.strip())
    return Rewrite(queries[:MAX_QUERIES], standalone, hypothetical, tuple(rewrite.warnings))


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
