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
  tenant, chunk by chunk as ``loader search`` does.

Nothing is copied: the folders and files are read where they are.

Example::

    source = read_source("datasets/scifact", split="train", tenant="acme", index_prefix="eval",
                         index_name="loader-chunks", chunk_strategy="structure")
    source.index, source.tenant, len(source.questions)   # ('eval-scifact-structure', 'eval', 809)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loader.errors import ConfigError, InputError

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

    def describe(self) -> dict[str, Any]:
        implicit = sum(question.implicit for question in self.questions)
        return {
            "path": str(self.path),
            "kind": self.kind,
            "index": self.index,
            "tenant": self.tenant,
            "questions": len(self.questions),
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
    a questions file in the index ``index_name`` serves.

    Raises:
        ConfigError: there is no such folder or file, it is not one of the two, or it holds no
            judged question (the message names it; exit code 2).
    """
    path = Path(path)
    if path.is_dir():
        return _beir_source(path, split, index_prefix, chunk_strategy)
    if path.is_file():
        return _questions_source(path, index_name, tenant)
    raise ConfigError(
        f"source {path}: there is no such folder or file (give a BEIR folder or a questions file)"
    )


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
    from loader.eval.judgments import read_judgment_file

    try:
        imported = read_judgment_file(path)
    except InputError as exc:
        raise ConfigError(f"source {path}: {exc}") from None
    if imported.format != "questions":
        raise ConfigError(
            f"source {path} is an {imported.format} file; `loader learn` reads questions files "
            "(`loader judgments export --format questions`) and BEIR folders"
        )
    from loader.eval.datasets import load_questions

    questions = []
    for number, line in enumerate(load_questions(path)):
        implicit = bool(line.metadata.get("implicit"))
        if number in imported.grades:
            grades, by = imported.grades[number], BY_CHUNK
        else:
            grades, by = {line.source.replace("\\", "/").removeprefix("./"): 1}, BY_DOCUMENT
        if any(grade > 0 for grade in grades.values()):
            questions.append(JudgedQuestion(line.id, line.question, grades, by, implicit))
    if not questions:
        raise ConfigError(f"source {path}: no question has a chunk graded above 0")
    return Source(path, "questions", index_name, tenant, questions)
