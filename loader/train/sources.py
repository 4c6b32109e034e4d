"""The judged questions ``loader learn`` trains from, read from its sources.

A source is either

- a BEIR folder: the questions of ``qrels/<split>.tsv`` (``--split train``), graded by document,
  searched in the index ``loader eval`` built for the folder (``<prefix>-<dataset>-<strategy>``,
  ``loader.eval.configs.index_alias``) as its tenant (``loader.eval.indexes.EVAL_TENANT``) and
  as ``loader eval`` searches (each document at its best chunk), so the model learns from the
  candidates it will rerank there; or
- a questions file (``loader judgments export --format questions``; or the click model's, each line
  with ``"implicit": true``): each line's ``judgments`` grade chunks by ``chunk_id``; a line
  without them grades its ``source`` document 1. Searched in the configured index as the asked
  tenant, chunk by chunk as ``loader search`` does. It is read once, as ``loader judgments
  import`` reads one (a regular file of at most 20 MB), and every line is checked before anything
  is searched: a bad line is a ConfigError naming the file and the line (exit code 2), and so is
  a line whose ``tenant`` is not the asked one. Identical lines are one question
  (``DistinctQuestions``).

Nothing is copied: the folders and files are read where they are.

Example::

    source = read_source("datasets/scifact", split="train", tenant="acme", index_prefix="eval",
                         index_name="loader-chunks", chunk_strategy="structure")
    source.index, source.tenant, len(source.questions)   # ('eval-scifact-structure', 'eval', 809)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loader.errors import ConfigError, InputError

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

    from loader.eval.judgments import QuestionsLine
    from loader.settings import Settings

# How a question is graded: by chunk (its judged chunk ids) or by document (its source).
BY_CHUNK, BY_DOCUMENT = "chunk", "document"


@dataclass(frozen=True)
class JudgedQuestion:
    """One question and its grades.

    Attributes:
        id: the question's id in its source.
        text: the question.
        grades: chunk id (``by == "chunk"``) or source (``"document"``) -> grade (0-2).
        by: what ``grades`` are keyed by.
        implicit: derived from clicks, not judged by a person (weighed ``--implicit-weight``).
    """

    id: str
    text: str
    grades: Mapping[str, int]
    by: str = BY_DOCUMENT
    implicit: bool = False

    def relevant(self) -> dict[str, int]:
        return {key: grade for key, grade in self.grades.items() if grade > 0}


@dataclass
class Source:
    """The questions of one source, and where they are searched."""

    path: Path
    kind: str  # "beir" or "questions"
    index: str
    tenant: str
    questions: list[JudgedQuestion] = field(default_factory=list)
    # Searched as `loader eval` searches (each document at its best chunk: a BEIR folder), or
    # as `loader search` does (chunk by chunk: a questions file over one's own documents).
    one_per_document: bool = False
    merged: int = 0  # lines identical to an earlier one, read as one question

    def describe(self) -> dict[str, Any]:
        implicit = sum(question.implicit for question in self.questions)
        return {
            "path": str(self.path),
            "kind": self.kind,
            "index": self.index,
            "tenant": self.tenant,
            "questions": len(self.questions),
            "identical_merged": self.merged,
            "implicit": implicit,
            "one_per_document": self.one_per_document,
        }


def read_source(
    path: str | Path,
    *,
    split: str,
    tenant: str,
    index_prefix: str,
    index_name: str,
    chunk_strategy: str,
) -> Source:
    """The judged questions of a BEIR folder or a questions file (see the module): a BEIR folder
    is searched in the index eval built for it (``index_prefix``, its name, ``chunk_strategy``),
    a questions file in the index ``index_name`` serves, as ``tenant``.

    Raises:
        ConfigError: there is no such folder or file, it is not one of the two, or it holds no
            judged question; a questions file's line is malformed, names another tenant than
            ``tenant`` or reuses another line's id for another question (the message names the
            file and the line; exit code 2).
    """
    path = Path(path)
    if path.is_dir():
        return _beir_source(path, split, index_prefix, chunk_strategy)
    if not path.exists() and not path.is_symlink():
        raise ConfigError(
            f"source {path}: there is no such folder or file (give a BEIR folder or a questions "
            "file)"
        )
    return _questions_source(path, index_name, tenant)


def _beir_source(folder: Path, split: str, index_prefix: str, chunk_strategy: str) -> Source:
    from loader.eval.configs import index_alias
    from loader.eval.datasets import load_beir
    from loader.eval.indexes import EVAL_TENANT

    try:
        data = load_beir(folder, split)
    except InputError as exc:
        raise ConfigError(f"source {folder}: {exc}") from None
    name = data.name or folder.name
    questions = [
        JudgedQuestion(qid, text, dict(data.qrels.get(qid, {})), BY_DOCUMENT)
        for qid, text in data.queries.items()
        if any(grade > 0 for grade in data.qrels.get(qid, {}).values())
    ]
    if not questions:
        raise ConfigError(f"source {folder}: no question of qrels/{split}.tsv is judged relevant")
    alias = index_alias(index_prefix, name, chunk_strategy)
    return Source(folder, "beir", alias, EVAL_TENANT, questions, one_per_document=True)


def _questions_source(path: Path, index_name: str, tenant: str) -> Source:
    """A questions file, read once as `loader judgments import` reads one (``loader.userfile``:
    a regular file of at most ``MAX_USER_FILE_BYTES``; a FIFO or ``/dev/zero`` is refused, not
    read), each line checked (``loader.eval.judgments.questions_lines_of``), then its own fields."""
    from loader.eval.judgments import judgment_format, questions_lines_of
    from loader.userfile import read_user_text

    text = read_user_text(path, "questions file")
    kind, _ = judgment_format(text)
    if kind != "questions":
        raise ConfigError(
            f"source {path} is an {kind} file; `loader learn` reads questions files "
            "(`loader judgments export --format questions`) and BEIR folders"
        )
    distinct = DistinctQuestions(f"questions file {path}", tenant)
    for line in questions_lines_of(text, distinct.name):
        distinct.add(line)
    if not distinct.lines:
        raise ConfigError(f"questions file {path} holds no question")
    questions = [question for question in distinct.questions() if question.relevant()]
    if not questions:
        raise ConfigError(f"source {path}: no question has a chunk graded above 0")
    return Source(path, "questions", index_name, tenant, questions, merged=distinct.merged)


class DistinctQuestions:
    """The questions of a questions file's lines, each once: a line identical to an earlier one
    (the same question graded the same) is merged into it and counted in ``merged``, as a
    question searched twice teaches the model nothing new and costs a search.

    Each line's own fields are checked here (``question`` and ``judgments`` were checked by
    ``questions_lines_of``): ``id`` (default ``q<line>``), ``source``, ``tenant`` (``tenant``
    when it is there: a line of another tenant's is refused, never searched as this one),
    ``implicit``.
    """

    def __init__(self, name: str, tenant: str) -> None:
        self.name = name  # "questions file <path>", first in every message
        self.tenant = tenant
        self.lines = 0
        self.merged = 0
        self._questions: list[JudgedQuestion] = []
        self._places: dict[tuple[Any, ...], int] = {}  # a question's content -> its place
        # An id a line gives -> its first line and its question's place: numbers, not the
        # content, so 600,000 lines of one question hold its text once. A default id (q<line>)
        # is another line's only if that line gives it.
        self._by_id: dict[str, tuple[int, int]] = {}

    def add(self, line: QuestionsLine) -> None:
        """Raises ConfigError naming the file, the line and the field."""
        self.lines += 1
        question = self._question(line)
        content = (question.text, question.by, tuple(sorted(question.grades.items())))
        place = self._places.setdefault(content, len(self._questions))
        if line.record.get("id") is not None:
            first, first_place = self._by_id.setdefault(question.id, (line.number, place))
            if first_place != place:
                raise ConfigError(
                    f"{self.name}: line {line.number}: question id {question.id!r} is also line "
                    f"{first}'s, with another question or other grades; give each its own id"
                )
        if place == len(self._questions):
            self._questions.append(question)
            return
        self.merged += 1
        earlier = self._questions[place]
        if earlier.implicit and not question.implicit:  # a person's grade outweighs a click's
            self._questions[place] = replace(earlier, implicit=False)

    def questions(self) -> list[JudgedQuestion]:
        return list(self._questions)

    def _question(self, line: QuestionsLine) -> JudgedQuestion:
        from loader.eval.judgments import checked_text

        where = f"line {line.number}"
        record = line.record
        qid = (
            f"q{line.number}"
            if record.get("id") is None
            else checked_text(record, "id", self.name, where)
        )
        source = checked_text(record, "source", self.name, where)
        self._check_tenant(record.get("tenant"), line.number)
        implicit = record.get("implicit", False)
        if not isinstance(implicit, bool):
            raise ConfigError(
                f"{self.name}: {where}: implicit must be true or false, got {implicit!r:.40}"
            )
        if line.grades:
            return JudgedQuestion(qid, line.question, dict(line.grades), BY_CHUNK, implicit)
        graded = {source.replace("\\", "/").removeprefix("./"): 1}
        return JudgedQuestion(qid, line.question, graded, BY_DOCUMENT, implicit)

    def _check_tenant(self, named: object, number: int) -> None:
        """A line's ``tenant`` (``loader judgments export`` writes it) must be the one its
        questions are searched as: another's questions graded that tenant's chunks, and searched
        as this one they would teach the model from the wrong documents."""
        if named is None:
            return
        from loader.settings import tenant_problem

        problem = "must be a name" if not isinstance(named, str) else tenant_problem(named)
        if problem:
            raise ConfigError(f"{self.name}: line {number}: tenant {named!r:.60} {problem}")
        if named != self.tenant:
            raise ConfigError(
                f"{self.name}: line {number}: the question is of tenant {named!r} (its line says "
                f"so), not of --tenant {self.tenant!r}; give --tenant {named!r}, or a file of "
                f"tenant {self.tenant!r}'s questions"
            )


def check_indices(sources: list[Source], settings: Settings, client: OpenSearch) -> None:
    """Every source's index must exist: a BEIR folder's is the one `loader eval` built.

    Raises:
        ConfigError: naming the index, the source and the fix (exit code 2).
    """
    from loader.cluster.client import cluster_errors

    for source in sources:
        with cluster_errors(settings, f"looking for index {source.index!r}"):
            found = client.indices.exists(index=source.index)
        if found:
            continue
        if source.kind == "beir":
            raise ConfigError(
                f"source {source.path}: index {source.index!r} does not exist; run `loader eval "
                f"{source.path}` with the same --index-prefix and chunk_strategy first"
            )
        raise ConfigError(
            f"source {source.path}: index {source.index!r} does not exist; give --index, or "
            "`loader apply` and `loader push` first"
        )
