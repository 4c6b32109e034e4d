"""A conversation with the index: what ``loader chat`` keeps between turns.

``ChatSession`` holds the settings, the search options a user can change between turns (search
mode, ``k``, tenant, rewriting) and the conversation so far; ``ask`` searches one message as a
follow-up to the earlier ones (the ``rewrite`` settings decide how) and records it. Each change
is checked when it is made, so a bad ``:k 0`` is refused and the session goes on unchanged.

Example::

    session = ChatSession(settings, tenant="acme")
    session.ask("How long do card refunds take?")
    result = session.ask("and for UPI?")
    result.queries          # what was searched, e.g. ['How long do UPI refunds take?']
    session.set_rewrite("hyde")
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from loader.errors import ConfigError
from loader.query.conversation import MAX_HISTORY_TURNS, check_history
from loader.query.request import MAX_CANDIDATES, SearchRequest, check_depth, truncate_question
from loader.query.rewriters import rewriter_from_settings
from loader.query.search import search
from loader.settings import REWRITE_CHOICES, REWRITE_MODES, SEARCH_MODES, Settings
from loader.text import first_surrogate

if TYPE_CHECKING:
    from loader.query.result import SearchResult


@dataclass
class ChatSession:
    """One conversation: options and earlier turns.

    Attributes:
        settings: the settings searched with (``rewrite`` and ``rewrite_mode`` change with
            ``set_rewrite``).
        tenant: the tenant searched.
        mode: the search mode (``None``: the search_mode setting).
        k: results per turn (``None``: top_k).
        rerank: rerank or not (``None``: the rerank setting).
        history: the conversation so far, ``{role, content}`` turns, oldest first.
        client: the OpenSearch client, connected at the first turn.
    """

    settings: Settings
    tenant: str
    mode: str | None = None
    k: int | None = None
    rerank: bool | None = None
    history: list[dict[str, str]] = field(default_factory=list)
    client: Any = None

    def __post_init__(self) -> None:
        if self.k is not None:  # checked now, as search checks it: or every turn would fail
            check_depth("k", self.k)
        self.history = list(check_history(self.history))
        rewriter_from_settings(self.settings)  # unusable rewrite settings: refused up front

    def ask(self, message: str) -> SearchResult:
        """Search ``message`` as a follow-up to the conversation, then add it to the conversation.

        Raises:
            ConfigError: a blank or overlong message (the conversation is unchanged).
            ClusterError, ModelError, QueryError: as ``search`` raises them.
        """
        request = SearchRequest.from_settings(
            self.settings,
            message,
            tenant=self.tenant,
            mode=self.mode,
            k=self.k,
            rerank=self.rerank,
            history=self.history,
        )
        self.connect()
        result = search(request, self.settings, client=self.client)
        # As searched: a longer turn would make every later request's history too long.
        self.history.append({"role": "user", "content": truncate_question(message)})
        del self.history[:-MAX_HISTORY_TURNS]  # the latest turns; older ones no longer matter
        return result

    def connect(self) -> None:
        """Connect, unless connected, and make sure the cluster answers (before any model loads).

        Raises:
            ClusterError: the cluster does not answer, or not as OpenSearch.
        """
        if self.client is None:
            from loader.cluster.client import connect, require_cluster

            client = connect(self.settings)
            require_cluster(client, self.settings)
            self.client = client

    def set_mode(self, mode: str) -> str:
        """Search with ``mode`` from now on."""
        if mode not in SEARCH_MODES:
            raise ConfigError(f"mode {mode!r} is not one of {', '.join(SEARCH_MODES)}")
        self.mode = mode
        return f"search mode {mode}"

    def set_k(self, text: str) -> str:
        """Show ``text`` (a whole number from 1 to ``MAX_CANDIDATES``) results per turn from
        now on: checked now, not at the next turn."""
        # isdigit alone lets "²" through, which int() refuses.
        if not (text.isascii() and text.isdigit()) or int(text) < 1:
            raise ConfigError(f"k must be a positive whole number, got {text!r:.40}")
        if int(text) > MAX_CANDIDATES:
            raise ConfigError(f"k must be at most {MAX_CANDIDATES}, got {text}")
        self.k = int(text)
        return f"k {self.k}"

    def set_tenant(self, tenant: str) -> str:
        """Search ``tenant`` from now on."""
        if not tenant.strip():
            raise ConfigError("tenant is required: give the tenant to search")
        if first_surrogate(tenant) is not None:
            raise ConfigError("tenant is not valid UTF-8 text")
        self.tenant = tenant.strip()  # typed: surrounding spaces are the prompt's, not the name's
        return f"tenant {self.tenant!r}"

    def set_rewrite(self, value: str) -> str:
        """``off``, ``concat`` or ``llm``, or an llm mode (``standalone``, ``decompose``,
        ``multi-query``, ``hyde``, which also turns ``llm`` on).

        Raises:
            ConfigError: another value, or ``llm`` without a usable ``rewrite_url``.
        """
        if value in REWRITE_CHOICES:
            changed = self.settings.replace(rewrite=value)
        elif value in REWRITE_MODES:
            changed = self.settings.replace(rewrite="llm", rewrite_mode=value)
        else:
            raise ConfigError(
                f"rewrite {value!r} is not one of {', '.join(REWRITE_CHOICES + REWRITE_MODES)}"
            )
        rewriter_from_settings(changed)
        self.settings = changed
        return self.describe_rewrite()

    def describe_rewrite(self) -> str:
        settings = self.settings
        if settings.rewrite == "llm":
            return f"rewrite llm ({settings.rewrite_mode}, model {settings.rewrite_model!r})"
        return f"rewrite {settings.rewrite}"

    def reset(self) -> str:
        """Forget the conversation (the options stay)."""
        self.history.clear()
        return "conversation cleared"
