"""Query sets sampled from the query log and the grades given on the judging page: sampling and
storage (the formats they are exported in are ``loader.eval.judgments``).

Stored in ``<alias>-judgments`` (created by ``loader apply`` with ``query_log = "ubi"``): one
document per query set (``kind: query_set``), per graded result (``kind: grade``) and per skipped
question (``kind: skip``), each with its tenant. A query set's id is derived from its tenant and
name; every read and write checks the tenant before anything is written, and another tenant's set
is reported exactly as a missing one (``NotFoundError``, same message): a tenant that can compute
another's set id learns nothing of which names it uses. A set replaced under its name keeps its
id, and each grade, note, skip and need stays with the question it was given for.

Sampling (``sample_questions``, pure): ``frequent`` (most asked), ``random`` (seeded) and
``worst`` (no click or "answered" event, a follow-up by the same client within a minute, then the
lowest top score first), deduplicated after ``normalize_question``.

Example::

    qs = create_query_set(client, index_name, "acme", "week-49", strategy="worst", size=50)
    save_grade(client, index_name, "acme", qs.set_id, 0, chunk_id, 2)
    judging_state(client, index_name, "acme", qs.set_id).grades
"""

from __future__ import annotations

import contextlib
import hashlib
import random
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import opensearchpy

from loader.documents import PATH_SEPARATOR, joined_parts
from loader.errors import ConfigError, InputError, NotFoundError
from loader.query import grades
from loader.query.grades import GRADES, RESOLUTION, Grade, JudgingState, resolved_grade
from loader.query.query_log import normalize_question, now_iso, tenant_events, tenant_queries
from loader.text import replace_surrogates

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

__all__ = ["RESOLUTION", "Grade", "JudgingState", "resolved_grade"]  # kept importable from here

STRATEGIES = ("frequent", "random", "worst")
JUDGING_KINDS = ("grade", "skip", "cant_tell", "need")
FOLLOW_UP_SECONDS = 60
POSITIVE_ACTIONS = ("click", "answered")
MAX_SET_NAME_CHARS = 50  # the Search Relevance Workbench's limit on a query set's name


def judgments_index(alias: str) -> str:
    return f"{alias}-judgments"


def set_id_for(tenant: str, name: str) -> str:
    """The id of ``tenant``'s query set ``name``: escaped as document ids are (``joined_parts``),
    so tenant ``px\x1fpy``'s set ``kb`` and tenant ``px``'s set ``py\x1fkb`` are two sets."""
    return hashlib.sha256(joined_parts((tenant, name)).encode()).hexdigest()[:20]


def _doc_id(*parts: object) -> str:
    """The id of a grade or a skip, from its set, question and chunk, escaped likewise (a chunk
    id is the caller's text)."""
    return hashlib.sha256(joined_parts(tuple(map(str, parts))).encode()).hexdigest()


def grade_doc_id(set_id: str, question_index: int, chunk_id: str, rater: str) -> str:
    """The id of one rater's grade of a result: each rater's is a document of its own (a grade
    given without a rater keeps the id it always had)."""
    if not rater:
        return _doc_id(set_id, question_index, chunk_id)
    return _doc_id(set_id, question_index, chunk_id, "\x00rater", rater)


@dataclass
class QuerySet:
    """Sampled questions of one tenant."""

    set_id: str
    name: str
    tenant: str
    strategy: str
    questions: list[str]
    created: str = ""

    def to_source(self) -> dict[str, Any]:
        return {
            "kind": "query_set",
            "tenant": self.tenant,
            "query_set": self.set_id,
            "name": self.name,
            "strategy": self.strategy,
            "questions": self.questions,
            "timestamp": self.created or now_iso(),
        }


# --- sampling (pure) ----------------------------------------------------------------------------


def _seconds(timestamp: str) -> float:
    import datetime as dt

    return dt.datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def sample_questions(
    queries: list[dict[str, Any]],
    events: list[dict[str, Any]],
    size: int,
    strategy: str,
    seed: int = 0,
) -> list[str]:
    """``size`` distinct questions of the logged ``queries`` (``ubi_queries`` sources). Pure.

    Each question is returned as most often spelled; two questions are the same when their
    ``normalize_question`` forms are. ``events`` (``ubi_events`` sources) are read by ``worst``.
    """
    if strategy not in STRATEGIES:
        raise ConfigError(f"strategy: {strategy!r} is not one of {', '.join(STRATEGIES)}")
    if size < 1:
        raise ConfigError("size: must be at least 1")
    ordered = sorted(queries, key=lambda q: q.get("timestamp", ""))
    spellings: dict[str, Counter[str]] = {}
    last_seen: dict[str, int] = {}
    counts: Counter[str] = Counter()
    for number, query in enumerate(ordered):
        text = str(query.get("user_query") or "")
        key = normalize_question(text)
        if not key:
            continue
        spellings.setdefault(key, Counter())[text] += 1
        last_seen[text] = number
        counts[key] += 1
    # Each question as most often spelled (the most recent of equally frequent spellings).
    latest = {
        key: max(forms, key=lambda text: (forms[text], last_seen[text]))
        for key, forms in spellings.items()
    }
    keys = list(latest)
    if strategy == "frequent":
        keys.sort(key=lambda k: (-counts[k], k))
    elif strategy == "random":
        keys.sort()
        random.Random(seed).shuffle(keys)
    else:
        keys = _worst_first(ordered, events)
    return [latest[key] for key in keys[:size]]


def _worst_first(ordered: list[dict[str, Any]], events: list[dict[str, Any]]) -> list[str]:
    """Normalised questions, worst first: no positive event, followed up within a minute by the
    same client, then the lowest top score."""
    positive = {e.get("query_id") for e in events if e.get("action_name") in POSITIVE_ACTIONS}
    badness: dict[str, tuple[int, int, float]] = {}
    for number, query in enumerate(ordered):
        key = normalize_question(str(query.get("user_query") or ""))
        if not key:
            continue
        attributes = query.get("query_attributes") or {}
        followed = 0
        client_id = query.get("client_id") or ""
        for later in ordered[number + 1 :]:
            if (later.get("client_id") or "") != client_id:
                continue
            gap = _seconds(later["timestamp"]) - _seconds(query["timestamp"])
            followed = int(0 <= gap <= FOLLOW_UP_SECONDS)
            break
        score = (
            int(query.get("query_id") not in positive),
            followed,
            -float(attributes.get("top_score") or 0.0),
        )
        badness[key] = max(badness.get(key, score), score)
    return sorted(badness, key=lambda k: (tuple(-v for v in badness[k]), k))


# --- storage ------------------------------------------------------------------------------------


def _check_index(client: OpenSearch, index_name: str) -> str:
    index = judgments_index(index_name)
    if not client.indices.exists(index=index):
        raise ConfigError(
            f'index {index!r} does not exist: set query_log = "ubi" and run `loader apply`'
        )
    return index


def check_set_name(name: str) -> str:
    """``name`` when it may name a query set (1 to ``MAX_SET_NAME_CHARS`` characters).

    Raises:
        ConfigError: naming ``name``.
    """
    if not name.strip() or len(name) > MAX_SET_NAME_CHARS:
        raise ConfigError(f"name: 1 to {MAX_SET_NAME_CHARS} characters")
    return name


def create_query_set(
    client: OpenSearch,
    index_name: str,
    tenant: str,
    name: str,
    *,
    strategy: str = "frequent",
    size: int = 50,
    seed: int = 0,
    questions: list[str] | None = None,
) -> QuerySet:
    """Sample ``size`` questions of ``tenant``'s log (or take ``questions``) into a query set
    named ``name`` (replacing one of that name, its grades kept with their questions)."""
    check_set_name(name)
    index = _check_index(client, index_name)
    if questions is None:
        logged = tenant_queries(client, index_name, tenant)
        events = tenant_events(client, index_name, tenant)
        questions = sample_questions(logged, events, size, strategy, seed)
        if not questions:
            raise InputError(f"tenant {tenant!r} has no logged questions to sample")
    query_set = QuerySet(set_id_for(tenant, name), name, tenant, strategy, list(questions))
    query_set.created = now_iso()
    client.index(
        index=index,
        id=f"set-{query_set.set_id}",
        body=query_set.to_source(),
        params={"refresh": "true"},
    )
    return query_set


def get_query_set(client: OpenSearch, index_name: str, tenant: str, set_id: str) -> QuerySet:
    """The query set ``set_id`` of ``tenant``.

    Raises:
        NotFoundError: no such set, or another tenant's: the same message for both, after the
            same one request, so that the answer tells nothing of other tenants' sets.
    """
    index = _check_index(client, index_name)
    try:
        source = client.get(index=index, id=f"set-{set_id}")["_source"]
    except opensearchpy.NotFoundError:
        source = None
    if source is None or source.get("tenant") != tenant:
        raise NotFoundError(f"query set {set_id!r} does not exist")
    return QuerySet(
        set_id,
        source["name"],
        tenant,
        source["strategy"],
        source["questions"],
        source.get("timestamp", ""),
    )


def find_query_set(client: OpenSearch, index_name: str, tenant: str, name: str) -> QuerySet:
    """The query set named ``name`` of ``tenant``."""
    return get_query_set(client, index_name, tenant, set_id_for(tenant, name))


def list_query_sets(client: OpenSearch, index_name: str, tenant: str) -> list[QuerySet]:
    index = _check_index(client, index_name)
    client.indices.refresh(index=index)
    query = {"bool": {"filter": [{"term": {"kind": "query_set"}}, {"term": {"tenant": tenant}}]}}
    answer = client.search(index=index, body={"query": query, "size": 1000})
    sets = [
        QuerySet(s["query_set"], s["name"], tenant, s["strategy"], s["questions"], s["timestamp"])
        for s in (hit["_source"] for hit in answer["hits"]["hits"])
    ]
    return sorted(sets, key=lambda s: s.created, reverse=True)


def find_chunk(client: OpenSearch, index_name: str, tenant: str, chunk_id: str) -> dict[str, Any]:
    """The chunk ``chunk_id`` of ``tenant`` (its source, heading path)."""
    query = {"bool": {"filter": [{"term": {"chunk_id": chunk_id}}, {"term": {"tenant": tenant}}]}}
    answer = client.search(
        index=index_name,
        body={"query": query, "size": 1, "_source": ["source", "heading_path", "title"]},
    )
    hits = answer["hits"]["hits"]
    if not hits:
        raise NotFoundError(f"chunk_id: no chunk {chunk_id!r} of this tenant")
    return hits[0]["_source"]


def save_grade(
    client: OpenSearch,
    index_name: str,
    tenant: str,
    set_id: str,
    question_index: int,
    chunk_id: str,
    grade: int,
    rater: str = "",
    note: str = "",
) -> Grade:
    """Grade one result of question ``question_index`` of the set as ``rater`` (a later grade
    of the same rater replaces it; another rater's is kept beside it).

    Raises:
        NotFoundError: no such set, question or chunk of this tenant (another tenant's set is
        no set of this one; nothing is written). ConfigError: a grade other than 0, 1, 2.
    """
    query_set = get_query_set(client, index_name, tenant, set_id)
    if grade not in GRADES:
        raise ConfigError("grade: must be 0, 1 or 2")
    if not 0 <= question_index < len(query_set.questions):
        raise NotFoundError(f"question {question_index} is not in query set {set_id!r}")
    chunk = find_chunk(client, index_name, tenant, chunk_id)
    heading = [p for p in str(chunk.get("heading_path") or "").split(PATH_SEPARATOR) if p]
    body = {
        "kind": "grade",
        "tenant": tenant,
        "query_set": set_id,
        "question_index": question_index,
        "question": query_set.questions[question_index],
        "chunk_id": chunk_id,
        "grade": grade,
        "source": chunk.get("source", ""),
        "heading_path": heading,
        "rater": rater,
        "note": note,
        "timestamp": now_iso(),
    }
    client.index(
        index=judgments_index(index_name),
        id=grade_doc_id(set_id, question_index, chunk_id, rater),
        body=body,
        params={"refresh": "true"},
    )
    return Grade(question_index, chunk_id, grade, body["source"], heading, rater, note)


def clear_grade(
    client: OpenSearch,
    index_name: str,
    tenant: str,
    set_id: str,
    question_index: int,
    chunk_id: str,
    rater: str = "",
) -> None:
    """Take ``rater``'s grade of one result of question ``question_index`` back to ungraded:
    its document is deleted (a result never graded is already ungraded).

    Raises:
        NotFoundError: no such set or question of this tenant (nothing is deleted).
    """
    query_set = get_query_set(client, index_name, tenant, set_id)
    if not 0 <= question_index < len(query_set.questions):
        raise NotFoundError(f"question {question_index} is not in query set {set_id!r}")
    # Its own document, and one given before the set was replaced, for this question elsewhere.
    places = grades.question_places(query_set.questions)
    kinds = ("grade", "cant_tell")
    for stored in _judging_documents(client, index_name, tenant, set_id, kinds, chunk_id):
        number = grades.current_number(stored, query_set.questions, places)
        if number == question_index and str(stored.get("rater") or "") == rater:
            with contextlib.suppress(opensearchpy.NotFoundError):  # cleared meanwhile
                client.delete(
                    index=judgments_index(index_name),
                    id=stored["_id"],
                    params={"refresh": "true"},
                )


def save_skip(
    client: OpenSearch, index_name: str, tenant: str, set_id: str, question_index: int
) -> None:
    """Mark question ``question_index`` skipped: resuming passes it by."""
    query_set = get_query_set(client, index_name, tenant, set_id)
    if not 0 <= question_index < len(query_set.questions):
        raise NotFoundError(f"question {question_index} is not in query set {set_id!r}")
    client.index(
        index=judgments_index(index_name),
        id=_doc_id(set_id, question_index, "\x00skip"),
        body={
            "kind": "skip",
            "tenant": tenant,
            "query_set": set_id,
            "question_index": question_index,
            "question": query_set.questions[question_index],  # see grades.current_number
            "timestamp": now_iso(),
        },
        params={"refresh": "true"},
    )


def judging_state(client: OpenSearch, index_name: str, tenant: str, set_id: str) -> JudgingState:
    """The set's grades, notes, skips and needs, each on the question it was given for as the
    set is now (``grades.current_number``: a set replaced under its name keeps its id)."""
    query_set = get_query_set(client, index_name, tenant, set_id)  # the tenant check
    placed = []
    places = grades.question_places(query_set.questions)
    for stored in _judging_documents(client, index_name, tenant, set_id, JUDGING_KINDS):
        number = grades.current_number(stored, query_set.questions, places)
        if number is not None:
            written = str(stored.get("timestamp"))
            placed.append((grades.in_place(stored, number), written, number, stored))
    # A document written for its question itself is the later word on it, then the newest.
    placed.sort(key=lambda item: item[:2])
    state = JudgingState()
    results: dict[tuple[int, str, str], dict[str, Any]] = {}  # a grade or a note, per rater
    for _, _, number, s in placed:
        if s["kind"] == "skip":
            state.skipped.add(number)
        elif s["kind"] == "need":
            state.needs[number] = replace_surrogates(str(s.get("need") or ""))
        else:
            results[(number, s["chunk_id"], str(s.get("rater") or ""))] = s
    for (number, chunk_id, rater), s in results.items():
        if s["kind"] == "cant_tell":
            chunks = state.cant_tell.setdefault(number, {})
            chunks.setdefault(chunk_id, {})[rater] = replace_surrogates(str(s.get("note")))
            continue
        state.add(
            Grade(
                number,
                chunk_id,
                int(s["grade"]),
                s.get("source", ""),
                list(s.get("heading_path") or []),
                rater,
                replace_surrogates(str(s.get("note") or "")),
            )
        )
    return state


def _judging_documents(
    client: OpenSearch,
    index_name: str,
    tenant: str,
    set_id: str,
    kinds: tuple[str, ...],
    chunk_id: str | None = None,
) -> list[dict[str, Any]]:
    """The set's stored documents of ``kinds`` (of one result, given ``chunk_id``) with ``_id``."""
    filters: list[dict[str, Any]] = [
        {"term": {"query_set": set_id}},
        {"term": {"tenant": tenant}},
        {"terms": {"kind": list(kinds)}},
    ]
    if chunk_id is not None:
        filters.append({"term": {"chunk_id": chunk_id}})
    body = {"query": {"bool": {"filter": filters}}, "size": 10_000}
    answer = client.search(index=judgments_index(index_name), body=body)
    return [hit["_source"] | {"_id": hit["_id"]} for hit in answer["hits"]["hits"]]
