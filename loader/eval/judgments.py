"""The files a judged query set leaves as (``loader judgments export`` / ``import``); the sets and
grades themselves are ``loader.query.judgments``.

Formats:

- ``questions``: the JSONL file ``loader eval`` reads (``loader.eval.datasets.load_questions``):
  per question, the set's ``tenant`` (whose documents were graded: eval scores the question
  against them), ``source`` and ``heading_path`` of its best-graded chunk and ``judgments``, every
  graded chunk's ``chunk_id``, ``source``, ``heading_path`` and ``grade`` (the graded qrels of
  nDCG, ``graded_qrels``); questions whose results were all graded 0 have no answer in the
  documents and are left out;
- ``srw-query-set``: the Search Relevance Workbench's query set (``name``, ``description``,
  ``sampling: manual``, ``querySetQueries: [{"queryText": ...}]``);
- ``srw-judgments``: its imported judgments (``type: IMPORT_JUDGMENT``, ``judgmentRatings:
  [{"query", "ratings": [{"docId": <chunk id>, "rating": "2.000"}]}]``).

Example::

    export(client, settings, "acme", "week-49", "questions", "week-49.jsonl")
    import_file(client, settings, "acme", "week-49-again", "week-49.jsonl")
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loader.errors import ConfigError, InputError
from loader.query.judgments import (
    GRADES,
    JudgingState,
    QuerySet,
    create_query_set,
    find_chunk,
    find_query_set,
    judging_state,
    save_grade,
)
from loader.settings import Settings

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

FORMATS = ("questions", "srw-query-set", "srw-judgments")


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
                "tenant": query_set.tenant,
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
    """Read ``path`` into query set ``name`` of ``tenant``, with its grades; the set and the
    number of grades stored.

    Raises:
        NotFoundError: a graded chunk is no chunk of ``tenant`` (nothing is written).
    """
    imported = read_judgment_file(path)
    for grades in imported.grades.values():  # every chunk checked before anything is written
        for chunk_id in grades:
            find_chunk(client, settings, tenant, chunk_id)
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
