"""Evaluation data in standard formats: BEIR folders and questions files in, TREC runs out.

- ``load_beir`` reads a BEIR folder (``corpus.jsonl[.gz]``, ``queries.jsonl``,
  ``qrels/<split>.tsv``) into a ``Dataset``; ``corpus_to_documents`` turns its corpus into
  ``Document`` objects that the chunkers and the push accept.
- ``load_questions`` reads a questions file written for your own documents: one JSON object per
  line, ``{"question": ..., "source": "refunds.md", "heading_path": "...", "answer": "..."}``,
  with the ``tenant`` whose documents they are when ``loader judgments export`` wrote it.
- ``write_trec_run`` / ``read_trec_run`` store ranked results as ``qid Q0 docid rank score tag``
  lines, which trec_eval, pytrec_eval, ranx and pyserini read.

Malformed input raises ``InputError`` naming the file and the line.
"""

from __future__ import annotations

import gzip
import json
import logging
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loader.documents import Block, Document, Section
from loader.errors import InputError
from loader.query.grades import GRADES
from loader.settings import tenant_problem
from loader.userfile import parse_failure

log = logging.getLogger(__name__)

_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


@dataclass
class Dataset:
    """A BEIR collection restricted to one split's judged queries."""

    corpus: dict[str, dict[str, str]]  # doc id -> {"title": ..., "text": ...}
    queries: dict[str, str]  # query id -> text
    qrels: dict[str, dict[str, int]]  # query id -> doc id -> graded relevance
    name: str = ""
    split: str = "test"


@dataclass
class Question:
    """One question of a questions file, with where its answer lives."""

    id: str
    question: str
    source: str  # the document holding the answer, as pushed (e.g. "refunds.md")
    # optional: "Refunds > Late deliveries", or its parts as a list in the file
    heading_path: str | tuple[str, ...] = ""
    answer: str = ""  # optional reference answer
    tenant: str = ""  # optional: whose documents (``loader judgments export`` names it)
    metadata: dict[str, Any] = field(default_factory=dict)  # any other fields of the line


# utf-8-sig: UTF-8, with the byte order mark an editor on Windows puts first read as nothing
# (else it is part of the first id, or the first line is no JSON).
DATASET_ENCODING = "utf-8-sig"


def _open_text(path: Path):
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding=DATASET_ENCODING)
    return path.open(encoding=DATASET_ENCODING)


def _read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each non-blank line of a JSONL (optionally gzipped) file."""
    try:
        with _open_text(path) as lines:
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
                except ValueError as exc:  # a number past Python's int-string limit
                    raise InputError(
                        f"{path}:{number}: not valid JSON ({parse_failure(exc)})"
                    ) from None
                except RecursionError:
                    raise InputError(
                        f"{path}:{number}: not valid JSON (nested too deeply)"
                    ) from None
                if not isinstance(record, dict):
                    raise InputError(f"{path}:{number}: expected a JSON object per line")
                yield number, record
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {path}: {exc}") from exc


def _required(record: Mapping[str, Any], key: str, path: Path, number: int) -> str:
    value = record.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise InputError(f"{path}:{number}: missing {key!r}")
    return str(value)


def _corpus_path(folder: Path) -> Path:
    for name in ("corpus.jsonl", "corpus.jsonl.gz"):
        if (folder / name).is_file():
            return folder / name
    raise InputError(f"{folder} has no corpus.jsonl or corpus.jsonl.gz; is it a BEIR folder?")


def load_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """Read a BEIR qrels TSV (``query-id, corpus-id, score`` with a header line).

    The first line is the header unless its last column is a number (then it is a judgment:
    some qrels files have no header). Graded scores are kept as they are; a repeated pair keeps
    its last score.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"qrels file {path} does not exist")
    qrels: dict[str, dict[str, int]] = {}
    try:
        with path.open(encoding=DATASET_ENCODING) as lines:
            for number, line in enumerate(lines, start=1):
                fields = line.rstrip("\n\r").split("\t")
                if number == 1 and not _is_number(fields[-1]):
                    # The header line ("score"); a first line whose score is a number is a
                    # judgment, checked like any other (a float score is refused, not skipped).
                    continue
                if not line.strip():
                    continue
                if len(fields) != 3 or not _is_int(fields[2]):
                    raise InputError(
                        f"{path}:{number}: expected 'query-id<TAB>corpus-id<TAB>integer score', "
                        f"got {line.strip()!r}"
                    )
                qid, doc_id, score = fields
                qrels.setdefault(qid, {})[doc_id] = int(score)
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {path}: {exc}") from exc
    return qrels


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def load_beir(folder: str | Path, split: str = "test") -> Dataset:
    """Read a BEIR folder, keeping the queries judged in ``qrels/<split>.tsv``.

    Args:
        folder: holds ``corpus.jsonl`` (or ``corpus.jsonl.gz``), ``queries.jsonl`` and ``qrels/``.
        split: name of the qrels file (``test``, ``dev``, ``train``).

    Returns:
        The dataset; ``qrels`` and ``queries`` cover the same query ids. Judged documents the
        corpus lacks are kept (``loader.eval.tasks`` counts them against the corpus).

    Raises:
        InputError: a file is missing or malformed, or a judged query has no text.

    Example::

        data = load_beir("datasets/scifact")
        len(data.corpus), len(data.queries)   # (5183, 300)
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"BEIR folder {folder} does not exist")
    corpus_path = _corpus_path(folder)
    corpus: dict[str, dict[str, str]] = {}
    first_line: dict[str, int] = {}
    for number, record in _read_jsonl(corpus_path):
        doc_id = _required(record, "_id", corpus_path, number)
        _refuse_repeat(doc_id, "document", corpus_path, number, first_line)
        corpus[doc_id] = {
            "title": str(record.get("title") or ""),
            "text": str(record.get("text") or ""),
        }

    qrels = load_qrels(folder / "qrels" / f"{split}.tsv")

    queries_path = folder / "queries.jsonl"
    if not queries_path.is_file():
        raise InputError(f"{folder} has no queries.jsonl")
    queries: dict[str, str] = {}
    first_line = {}
    for number, record in _read_jsonl(queries_path):
        qid = _required(record, "_id", queries_path, number)
        _refuse_repeat(qid, "query", queries_path, number, first_line)
        if qid in qrels:  # keep only the split's judged queries
            _check_query_id(qid, queries_path, number)
            queries[qid] = _required(record, "text", queries_path, number)

    missing = [qid for qid in qrels if qid not in queries]
    if missing:
        raise InputError(
            f"{len(missing)} queries judged in qrels/{split}.tsv are not in {queries_path} "
            f"(first: {missing[0]!r})"
        )
    log.info(
        "loaded %s: %d documents, %d %s queries", folder.name, len(corpus), len(queries), split
    )
    return Dataset(corpus=corpus, queries=queries, qrels=qrels, name=folder.name, split=split)


def _refuse_repeat(
    item_id: str, what: str, path: Path, number: int, first_line: dict[str, int]
) -> None:
    """Refuse an id already read from ``path`` (a second one would silently replace the first)."""
    if item_id in first_line:
        raise InputError(
            f"{path}:{number}: {what} id {item_id!r} is used twice (first on line "
            f"{first_line[item_id]})"
        )
    first_line[item_id] = number


def _check_query_id(qid: str, path: Path, number: int) -> None:
    """Refuse, when the dataset is read, a query id that ``write_trec_run`` could not write."""
    if not _is_trec_token(qid):
        raise InputError(
            f"{path}:{number}: query id {qid!r} cannot be written to a TREC run (empty or "
            "contains whitespace); rename it"
        )


def corpus_to_documents(corpus: Mapping[str, Mapping[str, str]]) -> list[Document]:
    """One ``Document`` per BEIR document, so BEIR data goes through the same chunkers and push.

    The document id becomes the source (and the title when there is none); blank lines split the
    text into paragraph blocks of a single untitled section.
    """
    documents = []
    for doc_id, fields in corpus.items():
        text = fields.get("text") or ""
        paragraphs = [part.strip() for part in _PARAGRAPH_BREAK.split(text) if part.strip()]
        blocks = [Block("paragraph", paragraph) for paragraph in paragraphs]
        documents.append(
            Document(
                source=doc_id,
                title=fields.get("title") or doc_id,
                sections=[Section(heading_path=(), blocks=blocks)],
            )
        )
    return documents


def _heading_path(value: Any, path: Path, number: int) -> str | tuple[str, ...]:
    """A questions file's ``heading_path``: a string, or a list of strings (its parts)."""
    if isinstance(value, list):
        if not all(isinstance(part, str) for part in value):
            raise InputError(f"{path}:{number}: heading_path must be a string or a list of strings")
        return tuple(value)
    return str(value or "")


def grade_value(value: object) -> int | None:
    """A grade 0, 1 or 2 from a number or a numeric string (the Workbench writes ``"2.000"``),
    rounded; ``None`` when ``value`` is none of them."""
    if not isinstance(value, int | float | str) or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return round(number) if math.isfinite(number) and round(number) in GRADES else None


def _check_grades(judgments: Any, path: Path, number: int) -> None:
    """A questions line's ``judgments`` grades (``loader judgments export``), checked when read:
    a grade eval cannot judge by is refused naming the line, not met half-way through a run."""
    for position, judged in enumerate(judgments if isinstance(judgments, list) else []):
        grade = judged.get("grade") if isinstance(judged, dict) else None
        if grade is not None and grade_value(grade) is None:
            raise InputError(
                f"{path}:{number}: judgments[{position}]: grade {repr(grade)[:40]} is not 0, 1 or 2"
            )


_QUESTION_FIELDS = {"id", "question", "source", "heading_path", "answer", "tenant"}


def _tenant(value: Any, path: Path, number: int) -> str:
    """A questions line's ``tenant``: absent, or a name a push could have filed documents under."""
    if value is None:
        return ""
    problem = "must be a name" if not isinstance(value, str) else tenant_problem(value)
    if problem:
        raise InputError(f"{path}:{number}: tenant {value!r:.60} {problem}")
    return value


def load_questions(path: str | Path) -> list[Question]:
    """Read a questions file: one JSON object per line.

    Each line needs ``question`` and ``source`` (the document that answers it, as pushed);
    ``heading_path``, ``answer``, ``tenant`` (whose documents) and ``id`` are optional (the id
    defaults to ``q<line>``). Other keys are kept in ``metadata``.

    Example line::

        {"question": "How long do UPI refunds take?", "source": "refunds.md",
         "heading_path": "Refunds > UPI", "answer": "Within 48 hours of approval."}
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"questions file {path} does not exist")
    questions: list[Question] = []
    seen_ids: set[str] = set()
    for number, record in _read_jsonl(path):
        qid = str(record.get("id") or f"q{number}")
        if qid in seen_ids:
            raise InputError(f"{path}:{number}: question id {qid!r} is used twice")
        seen_ids.add(qid)
        _check_query_id(qid, path, number)
        _check_grades(record.get("judgments"), path, number)
        questions.append(
            Question(
                id=qid,
                question=_required(record, "question", path, number),
                source=_required(record, "source", path, number),
                heading_path=_heading_path(record.get("heading_path"), path, number),
                answer=str(record.get("answer") or ""),
                tenant=_tenant(record.get("tenant"), path, number),
                metadata={k: v for k, v in record.items() if k not in _QUESTION_FIELDS},
            )
        )
    if not questions:
        raise InputError(f"questions file {path} has no questions")
    return questions


def write_trec_run(
    run_with_scores: Mapping[str, Sequence[tuple[str, float]]],
    path: str | Path,
    tag: str = "loader",
) -> None:
    """Write ``qid Q0 docid rank score tag`` lines; ranks are 1-based positions in each list.

    Args:
        run_with_scores: ``(doc_id, score)`` pairs per query id, best first.
        path: output file (its folder is created).
        tag: run name in the last column.

    Raises:
        InputError: an id or the tag contains whitespace, which the format cannot hold.
    """
    path = Path(path)
    for name in (tag, *run_with_scores):
        _check_token(name, "tag" if name is tag else "query id")
    lines = []
    for qid, ranked in run_with_scores.items():
        for rank, (doc_id, score) in enumerate(ranked, start=1):
            _check_token(doc_id, "document id")
            lines.append(f"{qid} Q0 {doc_id} {rank} {float(score):.6f} {tag}\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines), encoding="utf-8")


def _is_trec_token(value: str) -> bool:
    """Whether ``value`` can be one column of a TREC run line: not empty, no whitespace."""
    return bool(value) and not any(char.isspace() for char in value)


def _check_token(value: str, what: str) -> None:
    if not _is_trec_token(value):
        raise InputError(
            f"{what} {value!r} cannot be written to a TREC run (empty or contains whitespace); "
            "rename it or map it to an id without spaces"
        )


def read_trec_run(path: str | Path) -> dict[str, list[tuple[str, float]]]:
    """Read a TREC run file into ``(doc_id, score)`` pairs per query, best score first.

    Like trec_eval, the order comes from the score; equal scores keep their rank order.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"run file {path} does not exist")
    entries: dict[str, list[tuple[float, int, str]]] = {}
    try:
        with path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                fields = line.split()
                try:
                    qid, _q0, doc_id, rank, score = fields[:5]
                    if len(fields) != 6:
                        raise ValueError
                    entry = (-float(score), int(rank), doc_id)
                except ValueError:
                    raise InputError(
                        f"{path}:{number}: expected 'qid Q0 docid rank score tag', "
                        f"got {line.strip()!r}"
                    ) from None
                entries.setdefault(qid, []).append(entry)
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {path}: {exc}") from exc
    return {
        qid: [(doc_id, -neg_score) for neg_score, _rank, doc_id in sorted(ranked)]
        for qid, ranked in entries.items()
    }
