"""A test set from real questions: query sets sampled from the query log, the grades given on the
judging page, and the files they leave as (``loader judgments export`` / ``import``).

Stored in ``<alias>-judgments`` (created by ``loader apply`` with ``query_log = "ubi"``): one
document per query set (``kind: query_set``), per graded result (``kind: grade``) and per skipped
question (``kind: skip``), each with its tenant. A query set's id is derived from its tenant and
name; every read and write checks the tenant (``ForbiddenError`` for another tenant's, before
anything is written).

Sampling (``sample_questions``, pure): ``frequent`` (most asked), ``random`` (seeded) and
``worst`` (no click or "answered" event, a follow-up by the same client within a minute, then the
lowest top score first), deduplicated after ``normalize_question``.

Formats:

- ``questions``: the JSONL file ``loader eval`` reads (``loader.eval.datasets.load_questions``):
  per question, ``source`` and ``heading_path`` of its best-graded chunk and ``judgments``, every
  graded chunk's ``chunk_id``, ``source``, ``heading_path`` and ``grade`` (the graded qrels of
  nDCG); questions whose results were all graded 0 have no answer in the documents and are left
  out;
- ``srw-query-set``: the Search Relevance Workbench's query set (``name``, ``description``,
  ``sampling: manual``, ``querySetQueries: [{"queryText": ...}]``);
- ``srw-judgments``: its imported judgments (``type: IMPORT_JUDGMENT``, ``judgmentRatings:
  [{"query", "ratings": [{"docId": <chunk id>, "rating": "2.000"}]}]``).

Example::

    qs = create_query_set(client, settings, "acme", "week-49", strategy="worst", size=50)
    save_grade(client, settings, "acme", qs.set_id, 0, chunk_id, 2)
    export(client, settings, "acme", "week-49", "questions", "week-49.jsonl")
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import opensearchpy

from loader.documents import PATH_SEPARATOR
from loader.errors import ConfigError, ForbiddenError, InputError, NotFoundError
from loader.query.query_log import normalize_question, now_iso, tenant_events, tenant_queries
from loader.settings import Settings

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

STRATEGIES = ("frequent", "random", "worst")
FORMATS = ("questions", "srw-query-set", "srw-judgments")
GRADES = (0, 1, 2)
FOLLOW_UP_SECONDS = 60
POSITIVE_ACTIONS = ("click", "answered")
MAX_SET_NAME_CHARS = 50  # the Search Relevance Workbench's limit on a query set's name


def judgments_index(alias: str) -> str:
    return f"{alias}-judgments"


def set_id_for(tenant: str, name: str) -> str:
    return hashlib.sha256(f"{tenant}\x1f{name}".encode()).hexdigest()[:20]


def _doc_id(*parts: object) -> str:
    return hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()


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


@dataclass
class Grade:
    """One graded result: the chunk and where it sits, and its grade (0, 1, 2)."""

    question_index: int
    chunk_id: str
    grade: int
    source: str = ""
    heading_path: list[str] = field(default_factory=list)


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


def _check_index(client: OpenSearch, settings: Settings) -> str:
    index = judgments_index(settings.index_name)
    if not client.indices.exists(index=index):
        raise ConfigError(
            f'index {index!r} does not exist: set query_log = "ubi" and run `loader apply`'
        )
    return index


def create_query_set(
    client: OpenSearch,
    settings: Settings,
    tenant: str,
    name: str,
    *,
    strategy: str = "frequent",
    size: int = 50,
    seed: int = 0,
    questions: list[str] | None = None,
) -> QuerySet:
    """Sample ``size`` questions of ``tenant``'s log (or take ``questions``) into a query set
    named ``name`` (replacing one of that name, grades kept)."""
    if not name.strip() or len(name) > MAX_SET_NAME_CHARS:
        raise ConfigError(f"name: 1 to {MAX_SET_NAME_CHARS} characters")
    index = _check_index(client, settings)
    if questions is None:
        logged = tenant_queries(client, settings, tenant)
        events = tenant_events(client, settings, tenant)
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


def get_query_set(client: OpenSearch, settings: Settings, tenant: str, set_id: str) -> QuerySet:
    """The query set ``set_id`` of ``tenant``.

    Raises:
        NotFoundError: no such set. ForbiddenError: it is another tenant's.
    """
    index = _check_index(client, settings)
    try:
        source = client.get(index=index, id=f"set-{set_id}")["_source"]
    except opensearchpy.NotFoundError:
        raise NotFoundError(f"query set {set_id!r} does not exist") from None
    if source.get("tenant") != tenant:
        raise ForbiddenError(f"query set {set_id!r} is not a query set of this tenant")
    return QuerySet(
        set_id,
        source["name"],
        tenant,
        source["strategy"],
        source["questions"],
        source.get("timestamp", ""),
    )


def find_query_set(client: OpenSearch, settings: Settings, tenant: str, name: str) -> QuerySet:
    """The query set named ``name`` of ``tenant``."""
    return get_query_set(client, settings, tenant, set_id_for(tenant, name))


def list_query_sets(client: OpenSearch, settings: Settings, tenant: str) -> list[QuerySet]:
    index = _check_index(client, settings)
    client.indices.refresh(index=index)
    query = {"bool": {"filter": [{"term": {"kind": "query_set"}}, {"term": {"tenant": tenant}}]}}
    answer = client.search(index=index, body={"query": query, "size": 1000})
    sets = [
        QuerySet(s["query_set"], s["name"], tenant, s["strategy"], s["questions"], s["timestamp"])
        for s in (hit["_source"] for hit in answer["hits"]["hits"])
    ]
    return sorted(sets, key=lambda s: s.created, reverse=True)


def _chunk(client: OpenSearch, settings: Settings, tenant: str, chunk_id: str) -> dict[str, Any]:
    """The chunk ``chunk_id`` of ``tenant`` (its source, heading path)."""
    query = {"bool": {"filter": [{"term": {"chunk_id": chunk_id}}, {"term": {"tenant": tenant}}]}}
    answer = client.search(
        index=settings.index_name,
        body={"query": query, "size": 1, "_source": ["source", "heading_path", "title"]},
    )
    hits = answer["hits"]["hits"]
    if not hits:
        raise NotFoundError(f"chunk_id: no chunk {chunk_id!r} of this tenant")
    return hits[0]["_source"]


def save_grade(
    client: OpenSearch,
    settings: Settings,
    tenant: str,
    set_id: str,
    question_index: int,
    chunk_id: str,
    grade: int,
) -> Grade:
    """Grade one result of question ``question_index`` of the set (a later grade replaces it).

    Raises:
        ForbiddenError: the set is another tenant's (nothing written). NotFoundError: no such
        set, question or chunk of this tenant. ConfigError: a grade other than 0, 1, 2.
    """
    query_set = get_query_set(client, settings, tenant, set_id)
    if grade not in GRADES:
        raise ConfigError("grade: must be 0, 1 or 2")
    if not 0 <= question_index < len(query_set.questions):
        raise NotFoundError(f"question {question_index} is not in query set {set_id!r}")
    chunk = _chunk(client, settings, tenant, chunk_id)
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
        "timestamp": now_iso(),
    }
    client.index(
        index=judgments_index(settings.index_name),
        id=_doc_id(set_id, question_index, chunk_id),
        body=body,
        params={"refresh": "true"},
    )
    return Grade(question_index, chunk_id, grade, body["source"], heading)


def save_skip(
    client: OpenSearch, settings: Settings, tenant: str, set_id: str, question_index: int
) -> None:
    """Mark question ``question_index`` skipped: resuming passes it by."""
    query_set = get_query_set(client, settings, tenant, set_id)
    if not 0 <= question_index < len(query_set.questions):
        raise NotFoundError(f"question {question_index} is not in query set {set_id!r}")
    client.index(
        index=judgments_index(settings.index_name),
        id=_doc_id(set_id, question_index, "\x00skip"),
        body={
            "kind": "skip",
            "tenant": tenant,
            "query_set": set_id,
            "question_index": question_index,
            "timestamp": now_iso(),
        },
        params={"refresh": "true"},
    )


@dataclass
class JudgingState:
    """The grades and skips of one query set."""

    grades: dict[int, dict[str, Grade]] = field(default_factory=dict)  # index -> chunk -> grade
    skipped: set[int] = field(default_factory=set)

    def resume_at(self, count: int) -> int:
        """The first question neither graded nor skipped (``count`` when all are)."""
        for number in range(count):
            if number not in self.grades and number not in self.skipped:
                return number
        return count


def judging_state(client: OpenSearch, settings: Settings, tenant: str, set_id: str) -> JudgingState:
    get_query_set(client, settings, tenant, set_id)  # the tenant check
    query = {
        "bool": {
            "filter": [
                {"term": {"query_set": set_id}},
                {"term": {"tenant": tenant}},
                {"terms": {"kind": ["grade", "skip"]}},
            ]
        }
    }
    answer = client.search(
        index=judgments_index(settings.index_name), body={"query": query, "size": 10_000}
    )
    state = JudgingState()
    for hit in answer["hits"]["hits"]:
        s = hit["_source"]
        number = int(s.get("question_index", -1))
        if s["kind"] == "skip":
            state.skipped.add(number)
        else:
            grade = Grade(
                number,
                s["chunk_id"],
                int(s["grade"]),
                s.get("source", ""),
                list(s.get("heading_path") or []),
            )
            state.grades.setdefault(number, {})[grade.chunk_id] = grade
    return state


# --- formats ------------------------------------------------------------------------------------


def questions_lines(query_set: QuerySet, state: JudgingState) -> list[dict[str, Any]]:
    """The questions file of a judged set (see the module's docstring). Pure."""
    lines = []
    for number, question in enumerate(query_set.questions):
        graded = sorted(state.grades.get(number, {}).values(), key=lambda g: (-g.grade, g.chunk_id))
        if not graded or graded[0].grade == 0:
            continue
        best = graded[0]
        lines.append(
            {
                "id": f"q{number + 1}",
                "question": question,
                "source": best.source,
                "heading_path": list(best.heading_path),
                "judgments": [
                    {
                        "chunk_id": g.chunk_id,
                        "source": g.source,
                        "heading_path": list(g.heading_path),
                        "grade": g.grade,
                    }
                    for g in graded
                ],
            }
        )
    return lines


def srw_query_set(query_set: QuerySet) -> dict[str, Any]:
    """The Search Relevance Workbench query set (``PUT _plugins/_search_relevance/query_sets``)."""
    return {
        "name": query_set.name,
        "description": f"{len(query_set.questions)} questions of tenant {query_set.tenant} "
        f"sampled by loader ({query_set.strategy})",
        "sampling": "manual",
        "querySetQueries": [{"queryText": question} for question in query_set.questions],
    }


def srw_judgments(query_set: QuerySet, state: JudgingState) -> dict[str, Any]:
    """The Search Relevance Workbench's imported judgments (``PUT
    _plugins/_search_relevance/judgments``): the chunk id is the document id."""
    ratings = []
    for number, question in enumerate(query_set.questions):
        graded = sorted(state.grades.get(number, {}).values(), key=lambda g: g.chunk_id)
        if graded:
            ratings.append(
                {
                    "query": question,
                    "ratings": [{"docId": g.chunk_id, "rating": f"{g.grade:.3f}"} for g in graded],
                }
            )
    return {
        "name": query_set.name,
        "description": f"graded on loader's judging page, tenant {query_set.tenant}",
        "type": "IMPORT_JUDGMENT",
        "judgmentRatings": ratings,
    }


def export(
    client: OpenSearch,
    settings: Settings,
    tenant: str,
    name: str,
    format: str,
    path: str | Path,
) -> int:
    """Write query set ``name`` of ``tenant`` in ``format`` to ``path``; the number of questions
    (or of judged questions) written."""
    if format not in FORMATS:
        raise ConfigError(f"format: {format!r} is not one of {', '.join(FORMATS)}")
    query_set = find_query_set(client, settings, tenant, name)
    path = Path(path)
    if format == "srw-query-set":
        path.write_text(json.dumps(srw_query_set(query_set), ensure_ascii=False, indent=2) + "\n")
        return len(query_set.questions)
    state = judging_state(client, settings, tenant, query_set.set_id)
    if format == "srw-judgments":
        body = srw_judgments(query_set, state)
        path.write_text(json.dumps(body, ensure_ascii=False, indent=2) + "\n")
        return len(body["judgmentRatings"])
    lines = questions_lines(query_set, state)
    if not lines:
        raise InputError(f"query set {name!r} has no question graded 1 or 2: nothing to export")
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
    return len(lines)


@dataclass
class Imported:
    """What a file holds: the questions, and grades per question (chunk id -> grade)."""

    format: str
    questions: list[str]
    grades: dict[int, dict[str, int]] = field(default_factory=dict)


def read_judgment_file(path: str | Path) -> Imported:
    """Read a questions file, an SRW query set or SRW judgments (told apart by their content).

    Raises:
        InputError: the file is none of them (the message names the file and the line).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror})") from None
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict) and "querySetQueries" in whole:
        queries = whole["querySetQueries"]
        if not isinstance(queries, list) or not all(
            isinstance(q, dict) and isinstance(q.get("queryText"), str) for q in queries
        ):
            raise InputError(f'{path}: querySetQueries must be a list of {{"queryText": ...}}')
        return Imported("srw-query-set", [q["queryText"] for q in queries])
    if isinstance(whole, dict) and "judgmentRatings" in whole:
        imported = Imported("srw-judgments", [])
        for number, entry in enumerate(_list(whole["judgmentRatings"], path)):
            if not isinstance(entry, dict) or not isinstance(entry.get("query"), str):
                raise InputError(f'{path}: judgmentRatings[{number}] has no "query"')
            imported.questions.append(entry["query"])
            grades = imported.grades.setdefault(number, {})
            for rating in _list(entry.get("ratings"), path):
                grades[str(rating["docId"])] = _grade(rating.get("rating"), path, number)
        return imported
    from loader.eval.datasets import load_questions

    questions = load_questions(path)  # InputError naming the line
    imported = Imported("questions", [q.question for q in questions])
    for number, q in enumerate(questions):
        for judged in q.metadata.get("judgments") or []:
            if isinstance(judged, dict) and judged.get("chunk_id"):
                imported.grades.setdefault(number, {})[str(judged["chunk_id"])] = _grade(
                    judged.get("grade"), path, number
                )
    return imported


def _list(value: object, path: Path) -> list[Any]:
    if not isinstance(value, list):
        raise InputError(f"{path}: expected a list, got {type(value).__name__}")
    return value


def _grade(value: object, path: Path, number: int) -> int:
    try:
        grade = round(float(value))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InputError(f"{path}: question {number + 1}: rating {value!r} is no number") from None
    if grade not in GRADES:
        raise InputError(f"{path}: question {number + 1}: rating {value!r} is not 0, 1 or 2")
    return grade


def import_file(
    client: OpenSearch, settings: Settings, tenant: str, name: str, path: str | Path
) -> tuple[QuerySet, int]:
    """Read ``path`` into query set ``name`` of ``tenant``, with its grades (chunks of this
    tenant only); the set and the number of grades stored."""
    imported = read_judgment_file(path)
    query_set = create_query_set(
        client, settings, tenant, name, strategy="imported", questions=imported.questions
    )
    stored = 0
    for number, grades in imported.grades.items():
        for chunk_id, grade in grades.items():
            save_grade(client, settings, tenant, query_set.set_id, number, chunk_id, grade)
            stored += 1
    return query_set, stored


def graded_qrels(judgments: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Source -> its best grade, of a questions line's ``judgments`` (grades above 0). Pure."""
    qrels: dict[str, int] = {}
    for judged in judgments:
        grade = int(judged.get("grade") or 0)
        source = str(judged.get("source") or "").replace("\\", "/").removeprefix("./")
        if grade > 0 and source:
            qrels[source] = max(grade, qrels.get(source, 0))
    return qrels
