"""What a rater writes beside the grades (stored in ``<alias>-judgments`` with the grades,
``loader.query.judgments``): a question's information need (one per question, any rater may
change it) and "can't tell" with its reason, which takes the place of the rater's grade of that
result (the same document: a later grade, or a clear, replaces it). A grade's own note is saved
with the grade (``save_grade``'s ``note``).

Example::

    save_need(client, index_name, "acme", set_id, 0, "a refund's timing for a late order")
    save_cant_tell(client, index_name, "acme", set_id, 0, chunk_id, "the policy is cut off",
                   rater="alice")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loader.errors import ConfigError, NotFoundError
from loader.query.judgments import (
    _doc_id,
    find_chunk,
    get_query_set,
    grade_doc_id,
    judgments_index,
)
from loader.query.query_log import now_iso
from loader.text import first_surrogate

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

MAX_NEED_CHARS = 2000
MAX_NOTE_CHARS = 1000


def check_note(note: str, name: str, limit: int = MAX_NOTE_CHARS) -> str:
    """``note`` stripped, at most ``limit`` characters, and UTF-8 (no lone surrogate: stored,
    it failed every later reading of the question, its page and the export).

    Raises:
        ConfigError: a longer one, or one holding a lone surrogate, naming ``name``.
    """
    note = note.strip()
    if len(note) > limit:
        raise ConfigError(f"{name}: at most {limit} characters")
    if first_surrogate(note):
        raise ConfigError(f"{name}: holds a lone surrogate (a broken escape such as \\ud800)")
    return note


def _question(client: OpenSearch, index_name: str, tenant: str, set_id: str, number: int) -> str:
    query_set = get_query_set(client, index_name, tenant, set_id)
    if not 0 <= number < len(query_set.questions):
        raise NotFoundError(f"question {number} is not in query set {set_id!r}")
    return query_set.questions[number]


def save_need(
    client: OpenSearch, index_name: str, tenant: str, set_id: str, number: int, need: str
) -> str:
    """Set the information need of question ``number`` (what the asker wants to know)."""
    need = check_note(need, "need", MAX_NEED_CHARS)
    question = _question(client, index_name, tenant, set_id, number)
    client.index(
        index=judgments_index(index_name),
        id=_doc_id(set_id, number, "\x00need"),
        body={
            "kind": "need",
            "tenant": tenant,
            "query_set": set_id,
            "question_index": number,
            "question": question,  # see grades.current_number
            "need": need,
            "timestamp": now_iso(),
        },
        params={"refresh": "true"},
    )
    return need


def save_cant_tell(
    client: OpenSearch,
    index_name: str,
    tenant: str,
    set_id: str,
    number: int,
    chunk_id: str,
    reason: str,
    rater: str = "",
) -> str:
    """``rater`` cannot tell whether the result answers question ``number``, and says why: in
    place of the rater's grade of it (which it replaces).

    Raises:
        ConfigError: no reason, or a longer one than ``MAX_NOTE_CHARS``.
        NotFoundError: no such set, question or chunk of this tenant (nothing is written).
    """
    reason = check_note(reason, "reason")
    if not reason:
        raise ConfigError("reason: say why you cannot tell (the row's note)")
    question = _question(client, index_name, tenant, set_id, number)
    find_chunk(client, index_name, tenant, chunk_id)
    client.index(
        index=judgments_index(index_name),
        id=grade_doc_id(set_id, number, chunk_id, rater),
        body={
            "kind": "cant_tell",
            "tenant": tenant,
            "query_set": set_id,
            "question_index": number,
            "question": question,
            "chunk_id": chunk_id,
            "rater": rater,
            "note": reason,
            "timestamp": now_iso(),
        },
        params={"refresh": "true"},
    )
    return reason
