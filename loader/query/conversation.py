"""Conversations: the chat history a search may carry, and the no-model way to use it.

- ``check_history`` is the one check of a history (``SearchRequest`` runs it; ``loader serve``'s
  body model and ``loader search --history`` end up there): a list of ``{"role", "content"}``
  turns, roles ``user`` or ``assistant``, bounded in turns and characters;
- ``load_history`` reads a history file (a JSON list of turns) for ``loader search --history``;
- ``needs_context`` tells a follow-up that cannot stand alone ("and for UPI?", "what about
  partners?", "is it free?") from a question that can;
- ``ConcatRewriter`` (``rewrite = concat``) searches such a follow-up together with the last user
  question that stood alone, so follow-ups work on a machine with no chat model at all.

Example::

    history = load_history("conversation.json")
    ConcatRewriter().rewrite(history, "and for UPI?")
    # ['How long do refunds take for late deliveries? and for UPI?']
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from loader.errors import ConfigError
from loader.userfile import parse_failure, read_user_text

ROLES = ("user", "assistant")
# Turns kept in a request; a longer conversation is the caller's to trim (the rewriter sends only
# the latest few anyway).
MAX_HISTORY_TURNS = 50
# Characters of one turn: an assistant answer with its quoted context fits.
MAX_TURN_CHARS = 8000
# Follow-ups of at most this many words rarely stand alone ("and for UPI?", "why?").
SHORT_FOLLOW_UP_WORDS = 3

# A message led by one of these refers to something said before.
_LEADING_REFERENCE = re.compile(
    r"^\s*(?:and|also|or|but|so|then|what about|how about|same for|what if|"
    r"it|its|it's|they|them|their|this|that|these|those|there|he|she|his|her)\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"\w+")


def check_history(history: object) -> tuple[dict[str, str], ...]:
    """``history`` as a tuple of ``{"role", "content"}`` dicts, or a ``ConfigError`` naming the
    turn and field (``history[2].role must be one of user, assistant, got 'bot'``).

    ``None`` and an empty list are no history.
    """
    if history is None:
        return ()
    if isinstance(history, str | bytes | Mapping) or not isinstance(history, Sequence):
        raise ConfigError(
            f"history must be a list of {{role, content}} turns, got {type(history).__name__}"
        )
    if len(history) > MAX_HISTORY_TURNS:
        raise ConfigError(
            f"history has {len(history)} turns, more than the limit of {MAX_HISTORY_TURNS}; "
            "send the latest ones"
        )
    return tuple(_checked_turn(number, turn) for number, turn in enumerate(history))


def _checked_turn(number: int, turn: object) -> dict[str, str]:
    name = f"history[{number}]"
    if not isinstance(turn, Mapping):
        raise ConfigError(f"{name} must be an object with role and content, got {_kind(turn)}")
    extra = sorted(str(key) for key in turn if key not in ("role", "content"))
    if extra:
        raise ConfigError(f"{name} has unknown field(s) {', '.join(extra)}; give role and content")
    role, content = turn.get("role"), turn.get("content")
    if role not in ROLES:
        raise ConfigError(f"{name}.role must be one of {', '.join(ROLES)}, got {_kind(role)}")
    if not isinstance(content, str):
        raise ConfigError(f"{name}.content must be a string, got {_kind(content)}")
    if len(content) > MAX_TURN_CHARS:
        raise ConfigError(
            f"{name}.content has {len(content)} characters, more than the limit of {MAX_TURN_CHARS}"
        )
    return {"role": role, "content": content}


def _kind(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{type(value).__name__} {text[:37]}..."


def load_history(path: str | Path) -> tuple[dict[str, str], ...]:
    """The turns of a history file: a JSON list of ``{"role": "user"|"assistant", "content"}``.

    Raises:
        ConfigError: the file is missing, unreadable, not JSON or not such a list (the message
            names the file, and the turn at fault).
    """
    path = Path(path)
    text = read_user_text(path, "history file")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:  # ValueError: JSONDecodeError, a huge number
        reason = "nested too deeply" if isinstance(exc, RecursionError) else parse_failure(exc)
        raise ConfigError(f"history file {path} is not valid JSON ({reason})") from None
    try:
        return check_history(data)
    except ConfigError as exc:
        raise ConfigError(f"history file {path}: {exc}") from None


def needs_context(message: str) -> bool:
    """Whether ``message`` cannot be searched on its own: at most ``SHORT_FOLLOW_UP_WORDS``
    words, or led by a pronoun or a continuation (and, also, what about, how about ...).

    Example::

        needs_context("and for UPI?")                          # True
        needs_context("is it refunded?")                       # False: "it" does not lead
        needs_context("How long do UPI refunds take?")         # False
    """
    if len(_WORD.findall(message)) <= SHORT_FOLLOW_UP_WORDS:
        return True
    return bool(_LEADING_REFERENCE.match(message))


def last_standalone_question(history: Sequence[Mapping[str, str]]) -> str:
    """The latest user turn that stands on its own (``""`` when none does)."""
    for turn in reversed(history):
        if turn.get("role") == "user" and not needs_context(turn.get("content", "")):
            return " ".join(turn.get("content", "").split())
    return ""


class ConcatRewriter:
    """``rewrite = concat``: a follow-up that cannot stand alone is searched as the last
    standalone user question followed by the follow-up; any other message as it is.

    No model: BM25 and the embedding see the earlier topic ("refunds for late deliveries") and
    the new facet ("UPI") together. Its limit is that the earlier question's other facets stay in
    the query too (the rewriter cannot drop "late deliveries" when the user moved on).
    """

    def rewrite(self, history: Sequence[Mapping[str, str]], message: str) -> list[str]:
        if not needs_context(message):
            return [message]
        previous = last_standalone_question(history)
        return [f"{previous} {message.strip()}" if previous else message]

    def __repr__(self) -> str:
        return "ConcatRewriter()"
