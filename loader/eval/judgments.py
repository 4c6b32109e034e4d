"""The files a judged query set leaves as (``loader judgments export`` / ``import``); the sets and
grades themselves are ``loader.query.judgments``.

Formats:

- ``questions``: the JSONL file ``loader eval`` reads (``loader.eval.datasets.load_questions``):
  per question, the set's ``tenant`` (whose documents were graded: eval scores the question
  against them), ``source`` and ``heading_path`` of its best-graded chunk and ``judgments``, every
  graded chunk's ``chunk_id``, ``source``, ``heading_path`` and ``grade`` (the graded qrels of
  nDCG, ``graded_qrels``), with ``raters`` (name -> grade) when named raters gave it; a result
  several raters graded has one ``grade``, ``RESOLUTION`` (the mean rounded down), and its
  question says so (``"resolution"``); each grade's note (``"notes"``: rater -> note), and the
  question's ``information_need`` and ``cant_tell`` (chunk, rater, reason) when given;
  questions whose results were all graded 0 have no answer in the documents and are left out
  (the SRW formats have no field for notes);
- ``srw-query-set``: the Search Relevance Workbench's query set (``name``, ``description``,
  ``sampling: manual``, ``querySetQueries: [{"queryText": ...}]``);
- ``srw-judgments``: its imported judgments (``type: IMPORT_JUDGMENT``, ``judgmentRatings:
  [{"query", "ratings": [{"docId": <chunk id>, "rating": "2.000"}]}]``);
- ``quepid-csv``: Quepid's ratings file, ``query,docid,rating`` (``loader.eval.quepid``: its
  ratings on a scale of the file's own, 0-2 unless told).

Example::

    export(client, "loader-chunks", "acme", "week-49", "questions", "week-49.jsonl")
    import_file(client, "loader-chunks", "acme", "week-49-again", "week-49.jsonl")
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loader.errors import ConfigError, InputError
from loader.eval.datasets import grade_value
from loader.eval.quepid import TOP_GRADE, is_ratings_csv, ratings_csv, read_ratings_csv
from loader.query.judgments import (
    RESOLUTION,
    JudgingState,
    QuerySet,
    create_query_set,
    find_chunk,
    find_query_set,
    judging_state,
    save_grade,
)
from loader.text import first_surrogate
from loader.userfile import parse_failure, read_user_text

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

FORMATS = ("questions", "srw-query-set", "srw-judgments", "quepid-csv")


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
                    | _raters(state, number, g.chunk_id)
                    for g in graded
                ],
            }
            | _resolution(state, number)
            | _question_notes(state, number)
        )
    return lines


def _question_notes(state: JudgingState, number: int) -> dict[str, Any]:
    """The question's ``information_need`` and ``cant_tell`` (chunk, rater, reason), if any."""
    notes: dict[str, Any] = {}
    if state.needs.get(number):
        notes["information_need"] = state.needs[number]
    unsure = [
        {"chunk_id": chunk_id, "rater": rater, "reason": reason}
        for chunk_id, by_rater in sorted(state.cant_tell.get(number, {}).items())
        for rater, reason in sorted(by_rater.items())
    ]
    if unsure:
        notes["cant_tell"] = unsure
    return notes


def _raters(state: JudgingState, number: int, chunk_id: str) -> dict[str, Any]:
    """``{"raters": {name: grade}}`` of a result graded by named raters and ``{"notes": {name:
    note}}`` of the grades with a note, else nothing."""
    by_rater = state.ratings.get(number, {}).get(chunk_id, {})
    named = {rater: g.grade for rater, g in sorted(by_rater.items()) if rater}
    notes = {rater: g.note for rater, g in sorted(by_rater.items()) if g.note}
    return ({"raters": named} if named else {}) | ({"notes": notes} if notes else {})


def _resolution(state: JudgingState, number: int) -> dict[str, Any]:
    """``{"resolution": RESOLUTION}`` when a result of question ``number`` has several raters'
    grades (its ``grade`` is then resolved by that rule), else nothing."""
    several = any(len(r) > 1 for r in state.ratings.get(number, {}).values())
    return {"resolution": RESOLUTION} if several else {}


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
    several = any(len(r) > 1 for chunks in state.ratings.values() for r in chunks.values())
    resolved = f"; a result several raters graded: {RESOLUTION}" if several else ""
    return {
        "name": query_set.name,
        "description": f"graded on loader's judging page, tenant {query_set.tenant}{resolved}",
        "type": "IMPORT_JUDGMENT",
        "judgmentRatings": ratings,
    }


def export(
    client: OpenSearch,
    index_name: str,
    tenant: str,
    name: str,
    format: str,
    path: str | Path,
    rating_scale: int = TOP_GRADE,
) -> int:
    """Write query set ``name`` of ``tenant`` (of the index ``index_name`` serves) in ``format``
    to ``path`` (``exported``); the number of questions (or of judged questions) written."""
    check_export(format, rating_scale)
    query_set = find_query_set(client, index_name, tenant, name)
    graded = format != "srw-query-set"  # the only format without grades
    state = judging_state(client, index_name, tenant, query_set.set_id) if graded else None
    text, count = exported(query_set, state, format, rating_scale)
    Path(path).write_text(text, encoding="utf-8")
    return count


def check_export(format: str, rating_scale: int = TOP_GRADE, what: str = "") -> None:
    """Refuse an unknown format, or a rating scale for a format without one (it would be
    ignored); ``what`` says which file, when one was read.

    Raises:
        ConfigError: naming ``format`` or ``--rating-scale``.
    """
    if format not in FORMATS:
        raise ConfigError(f"format: {format!r} is not one of {', '.join(FORMATS)}")
    if rating_scale != TOP_GRADE and format != "quepid-csv":
        raise ConfigError(f"--rating-scale applies to quepid-csv only{what}")


def exported(
    query_set: QuerySet,
    state: JudgingState | None,
    format: str,
    rating_scale: int = TOP_GRADE,
) -> tuple[str, int]:
    """The text of ``query_set`` with its grades (``state``; ``None`` for ``srw-query-set``) in
    ``format``, and how many questions (or judged questions) it holds. ``rating_scale`` is the
    top rating of ``quepid-csv`` (Quepid's nDCG scorer: 3). Pure.

    Raises:
        ConfigError: an unknown format, a scale for a format without one.
        InputError: a ``questions`` export of a set with no question graded 1 or 2.
    """
    check_export(format, rating_scale)
    if format == "srw-query-set":
        body, count = srw_query_set(query_set), len(query_set.questions)
        return json.dumps(body, ensure_ascii=False, indent=2) + "\n", count
    state = state or JudgingState()
    if format == "srw-judgments":
        body = srw_judgments(query_set, state)
        return json.dumps(body, ensure_ascii=False, indent=2) + "\n", len(body["judgmentRatings"])
    if format == "quepid-csv":
        graded = [
            (question, {chunk_id: g.grade for chunk_id, g in state.grades[number].items()})
            for number, question in enumerate(query_set.questions)
            if state.grades.get(number)
        ]
        return ratings_csv(graded, rating_scale), len(graded)
    lines = questions_lines(query_set, state)
    if not lines:
        raise InputError(
            f"query set {query_set.name!r} has no question graded 1 or 2: nothing to export"
        )
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), len(lines)


@dataclass
class Imported:
    """What a file holds: the questions, and grades per question (chunk id -> grade)."""

    format: str
    questions: list[str]
    grades: dict[int, dict[str, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class QuestionsLine:
    """One line of a questions file: its number, its object, its ``question`` and the grades
    of its ``judgments`` (chunk id -> grade; empty when it has none), each checked."""

    number: int
    record: dict[str, Any]
    question: str
    grades: dict[str, int]


def read_judgment_file(path: str | Path, rating_scale: int = TOP_GRADE) -> Imported:
    """``read_judgment_text`` of the file ``path``, read as every file a user names is
    (``loader.userfile``: a regular file of at most ``MAX_USER_FILE_BYTES``, so a FIFO or
    ``/dev/zero`` is refused, not waited on; a ``ConfigError`` naming the file)."""
    text = read_user_text(path, "judgments file")
    return read_judgment_text(text, f"judgments file {path}", rating_scale)


def read_judgment_text(text: str, name: str, rating_scale: int = TOP_GRADE) -> Imported:
    """What the text of a questions file, an SRW query set, SRW judgments or a Quepid ratings
    CSV holds (told apart by their content; ``rating_scale`` is the CSV's top rating), every
    field checked; ``name`` names it in messages (``judgments file x.csv``). Pure.

    Raises:
        ConfigError: naming ``name`` and the line (questions, CSV) or the JSON path
            (``judgmentRatings[0].ratings[2].docId``) of what is wrong.
    """
    kind, whole = judgment_format(text)
    check_export(kind, rating_scale, f" ({name} is {kind})")
    if kind == "quepid-csv":
        return Imported(kind, *read_ratings_csv(text, name, rating_scale))
    if kind == "srw-query-set":
        return _srw_query_set(whole, name)
    if kind == "srw-judgments":
        return _srw_judgments(whole, name)
    imported = Imported("questions", [])
    for line in questions_lines_of(text, name):
        if line.grades:
            imported.grades[len(imported.questions)] = line.grades
        imported.questions.append(line.question)
    _some(imported.questions, name)
    return imported


def judgment_format(text: str) -> tuple[str, Any]:
    """Which of ``FORMATS`` the text of a judgments file is, and its JSON when it is one
    document (an SRW file); a questions file is JSON lines. Pure."""
    if is_ratings_csv(text):
        return "quepid-csv", None
    try:
        whole = json.loads(text)
    except (ValueError, RecursionError):  # a questions file (JSONL), or no JSON: read by line
        whole = None
    if isinstance(whole, dict) and "querySetQueries" in whole:
        return "srw-query-set", whole
    if isinstance(whole, dict) and "judgmentRatings" in whole:
        return "srw-judgments", whole
    return "questions", None


def _srw_query_set(whole: dict[str, Any], name: str) -> Imported:
    texts = []
    for number, query in enumerate(_list(whole["querySetQueries"], name, "querySetQueries")):
        where = f"querySetQueries[{number}]"
        texts.append(checked_text(_object(query, name, where), "queryText", name, where))
    return Imported("srw-query-set", _some(texts, name))


def _srw_judgments(whole: dict[str, Any], name: str) -> Imported:
    imported = Imported("srw-judgments", [])
    for number, entry in enumerate(_list(whole["judgmentRatings"], name, "judgmentRatings")):
        where = f"judgmentRatings[{number}]"
        imported.questions.append(checked_text(_object(entry, name, where), "query", name, where))
        grades = imported.grades.setdefault(number, {})
        for rated, rating in enumerate(_list(entry.get("ratings"), name, f"{where}.ratings")):
            at = f"{where}.ratings[{rated}]"
            rating = _object(rating, name, at)
            grades[checked_text(rating, "docId", name, at)] = _grade(rating.get("rating"), name, at)
    _some(imported.questions, name)
    return imported


def questions_lines_of(text: str, name: str) -> Iterator[QuestionsLine]:
    """Each non-blank line of a questions file's ``text``, checked: a JSON object with a
    ``question`` and valid ``judgments``. Lines end at ``\\n`` only, so a ``\\r`` is the line's
    own (JSON whitespace, or a control character JSON refuses), never a break. Pure.

    Raises:
        ConfigError: ``"<name>: line 3: not valid JSON (...)"``, a field of the wrong type.
    """
    for line_number, line in enumerate(_lines(text), start=1):
        if not line.strip():
            continue
        where = f"line {line_number}"
        try:
            record = json.loads(line)
        except (ValueError, RecursionError) as exc:
            reason = "nested too deeply" if isinstance(exc, RecursionError) else parse_failure(exc)
            raise ConfigError(f"{name}: {where}: not valid JSON ({reason})") from None
        record = _object(record, name, where)
        question = checked_text(record, "question", name, where)
        grades: dict[str, int] = {}
        judgments = record.get("judgments")
        for judged, entry in enumerate(
            [] if judgments is None else _list(judgments, name, f"{where}: judgments")
        ):
            at = f"{where}: judgments[{judged}]"
            entry = _object(entry, name, at)
            grades[checked_text(entry, "chunk_id", name, at)] = _grade(entry.get("grade"), name, at)
        yield QuestionsLine(line_number, record, question, grades)


def _lines(text: str) -> Iterator[str]:
    """``text.split("\\n")``, one line at a time: a 20 MB file of short lines is 600,000 of them."""
    start = 0
    while start <= len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        yield text[start:end]
        start = end + 1


def _some(questions: list[str], name: str) -> list[str]:
    if not questions:
        raise ConfigError(f"{name} holds no question")
    return questions


def _list(value: object, name: str, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise ConfigError(f"{name}: {where} must be a list, got {_kind(value)}")
    return value


def _object(value: object, name: str, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{name}: {where} must be an object, got {_kind(value)}")
    return value


def checked_text(record: dict[str, Any], key: str, name: str, where: str) -> str:
    """``record[key]``, a non-empty string; ``name`` is the file (``judgments file x.jsonl``),
    ``where`` the record's JSON path, or ``line N``.

    Raises:
        ConfigError: naming the file, the line or path and the field.
    """
    value = record.get(key)
    field = f"{where}: {key}" if where.startswith("line ") else f"{where}.{key}"
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{name}: {field} must be a non-empty string, got {_kind(value)}")
    char = first_surrogate(value)
    if char is not None:  # a broken escape ("\ud800"): no UTF-8 carries it into the index
        raise ConfigError(
            f"{name}: {field} holds the lone surrogate U+{ord(char):04X} (a broken escape), "
            "which is no text"
        )
    return value


def _grade(value: object, name: str, where: str) -> int:
    """A grade 0, 1 or 2 from a number or a numeric string (SRW writes ``"2.000"``), rounded."""
    grade = grade_value(value)
    if grade is None:
        raise ConfigError(f"{name}: {where}: rating {_kind(value)} is not 0, 1 or 2")
    return grade


def _kind(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{type(value).__name__} {text[:37]}..."


def import_file(
    client: OpenSearch, index_name: str, tenant: str, name: str, path: str | Path
) -> tuple[QuerySet, int]:
    """Read ``path`` into query set ``name`` of ``tenant``, with its grades; the set and the
    number of grades stored (raises as ``read_judgment_file`` and ``store_imported``)."""
    return store_imported(client, index_name, tenant, name, read_judgment_file(path))


def store_imported(
    client: OpenSearch, index_name: str, tenant: str, name: str, imported: Imported
) -> tuple[QuerySet, int]:
    """``import_file`` of a file already read (the CLI reads it before it connects, so that a
    bad file is refused without a cluster): a ``NotFoundError`` when a graded chunk is no chunk
    of ``tenant``, checked before anything is written (a set of that name is replaced, its
    grades kept)."""
    for grades in imported.grades.values():  # every chunk checked before anything is written
        for chunk_id in grades:
            find_chunk(client, index_name, tenant, chunk_id)
    query_set = create_query_set(
        client, index_name, tenant, name, strategy="imported", questions=imported.questions
    )
    stored = 0
    for number, grades in imported.grades.items():
        for chunk_id, grade in grades.items():
            save_grade(client, index_name, tenant, query_set.set_id, number, chunk_id, grade)
            stored += 1
    return query_set, stored


def graded_qrels(judgments: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Source -> its best grade, of a questions line's ``judgments`` (grades above 0). Pure."""
    qrels: dict[str, int] = {}
    for judged in judgments:
        grade = grade_value(judged.get("grade")) or 0
        source = str(judged.get("source") or "").replace("\\", "/").removeprefix("./")
        if grade > 0 and source:
            qrels[source] = max(grade, qrels.get(source, 0))
    return qrels
