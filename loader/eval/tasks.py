"""What `loader eval` evaluates: an ``EvalTask`` of documents to push, queries and judgements.

Two kinds of task, read by ``load_task`` (the file formats themselves are read by
``loader.eval.datasets``):

- a BEIR folder: its corpus is pushed as one document per BEIR document (the BEIR id becomes the
  chunk's ``source``), and its ``qrels/<split>.tsv`` judges the hits;
- a questions file over a folder of your own documents: a hit is relevant when its chunk's
  ``source`` is the question's ``source`` file; questions that name a ``heading_path`` are also
  scored at section level (``section_*`` metrics: the chunk must also sit under that heading);
  a question with ``judgments`` (``loader judgments export``) is judged by their grades per
  source; a question with a ``history`` (earlier ``{role, content}`` turns) is a follow-up,
  searched with that conversation (so the ``rewrite`` setting decides what is searched).

Example::

    task = load_task("datasets/scifact", split="test", limit=50)
    task.queries[0].text, task.qrels[task.queries[0].id]
    task = load_task("questions.jsonl", docs="docs/")
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from loader.documents import PATH_SEPARATOR
from loader.errors import ConfigError, InputError
from loader.eval.datasets import Question, corpus_to_documents, load_beir, load_questions
from loader.query.conversation import check_history

if TYPE_CHECKING:
    from loader.documents import Document
    from loader.ingest.readers import Skipped

log = logging.getLogger(__name__)


@dataclass
class EvalQuery:
    """One query to search, with the expected section when the questions file names one, and
    the conversation before it when it is a follow-up."""

    id: str
    text: str
    source: str = ""
    heading_path: tuple[str, ...] = ()
    history: tuple[dict[str, str], ...] = ()
    answer: str = ""  # the reference answer, for context recall


@dataclass
class EvalTask:
    """What to evaluate: the documents to push, the queries, and their judgements.

    Attributes:
        name: the dataset's name (used in index aliases and the report).
        kind: ``beir`` or ``questions``.
        split: the BEIR split (``""`` for a questions file).
        documents: returns the documents (and unreadable files) to push, afresh on every call.
        queries: the queries, in file order.
        qrels: graded relevance per query id and document key (BEIR id or source file).
        document_count: number of documents (for the report).
    """

    name: str
    kind: str
    split: str
    documents: Callable[[], Iterable[Document | Skipped]]
    queries: list[EvalQuery]
    qrels: dict[str, dict[str, int]]
    document_count: int = 0


def load_task(
    dataset: str | Path,
    *,
    split: str = "test",
    docs: str | Path | None = None,
    limit: int | None = None,
    max_file_bytes: int = 10_000_000,
) -> EvalTask:
    """Read a BEIR folder, or a questions file with the folder of documents it asks about.

    Args:
        dataset: a BEIR folder, or a questions JSONL file (then ``docs`` is required).
        split: the BEIR qrels split.
        docs: the documents folder a questions file is about.
        limit: evaluate only the first ``limit`` queries (quick checks).
        max_file_bytes: files larger than this are skipped when reading ``docs``.

    Returns:
        The task.

    Raises:
        InputError: the dataset, the documents folder or a file in it is missing or malformed.
    """
    dataset = Path(dataset)
    if limit is not None and limit < 1:
        raise ConfigError(f"limit must be a positive whole number, got {limit}")
    if dataset.is_dir():
        if docs is not None:
            raise ConfigError(
                f"{dataset} is a BEIR folder; --docs is only for a questions file over your "
                "own documents"
            )
        return beir_task(dataset, split, limit)
    if not dataset.is_file():
        raise InputError(f"{dataset} is neither a BEIR folder nor a questions file")
    if docs is None:
        raise ConfigError(
            f"{dataset} is a questions file: give the folder of documents it asks about with "
            "--docs FOLDER"
        )
    return questions_task(dataset, Path(docs), limit, max_file_bytes)


def beir_task(folder: Path, split: str, limit: int | None = None) -> EvalTask:
    """The task of a BEIR folder: its corpus, the split's first ``limit`` judged queries."""
    data = load_beir(folder, split)
    corpus = data.corpus
    queries = [EvalQuery(qid, text) for qid, text in data.queries.items()][:limit]
    return EvalTask(
        name=data.name or folder.name,
        kind="beir",
        split=split,
        documents=lambda: corpus_to_documents(corpus),
        queries=queries,
        qrels={query.id: data.qrels[query.id] for query in queries},
        document_count=len(corpus),
    )


def questions_task(
    questions_file: Path, root: Path, limit: int | None = None, max_file_bytes: int = 10_000_000
) -> EvalTask:
    """The task of a questions file over the documents folder ``root``.

    Raises:
        ConfigError: ``root`` is not a folder (the same error as ``loader push``'s).
        InputError: the questions file is malformed.
    """
    from loader.ingest.readers import Skipped, is_within, iter_documents, require_folder

    require_folder(root)
    questions = load_questions(questions_file)[:limit]

    # Read once, here: the source check below and the push both need the documents, and a
    # second read of 28 PDFs cost two minutes.
    items = list(iter_documents(root, max_file_bytes))
    # The unreadable files and folders, and the files of types no reader handles: the push names
    # each that a question is judged on.
    sources, unreadable = set(), []
    for item in items:
        if isinstance(item, Skipped):
            unreadable.append(item.source)
        else:
            sources.add(item.source)
    for q in questions:
        source = _source_key(q.source)
        if source not in sources and not any(is_within(source, s) for s in unreadable):
            # a typo, a case, another folder
            log.warning(
                "%s: question %r names source %r, which is no document of %s: it scores 0",
                questions_file,
                q.id,
                q.source,
                root,
            )
    return EvalTask(
        name=root.resolve().name,
        kind="questions",
        split="",
        documents=lambda: iter(items),
        queries=[
            EvalQuery(
                q.id,
                q.question,
                _source_key(q.source),
                split_heading_path(q.heading_path),
                _history(questions_file, q.id, q.metadata.get("history")),
                answer=q.answer,
            )
            for q in questions
        ],
        qrels={q.id: _question_qrels(q) for q in questions},
        document_count=len(sources),
    )


def _question_qrels(question: Question) -> dict[str, int]:
    """The graded sources of a question: its ``judgments`` (``loader judgments export``: each
    source's best grade, so nDCG weighs an answer 2 above a partial 1), else its one source."""
    judged = question.metadata.get("judgments")
    if isinstance(judged, list):
        from loader.eval.judgments import graded_qrels

        qrels = graded_qrels(item for item in judged if isinstance(item, dict))
        if qrels:
            return qrels
    return {_source_key(question.source): 1}


def _history(questions_file: Path, qid: str, history: object) -> tuple[dict[str, str], ...]:
    try:
        return check_history(history)
    except ConfigError as exc:
        raise InputError(f"{questions_file}: question {qid!r}: {exc}") from None


def _source_key(source: str) -> str:
    # Pushed sources are relative paths with forward slashes: "./a/b.md" means "a/b.md".
    return source.replace("\\", "/").removeprefix("./")


def split_heading_path(text: str | Sequence[str]) -> tuple[str, ...]:
    """``"Refunds > UPI"`` or ``["Refunds", "UPI"]`` -> ``("Refunds", "UPI")`` (blank parts
    dropped)."""
    parts = text.split(PATH_SEPARATOR.strip()) if isinstance(text, str) else text
    return tuple(part.strip() for part in parts if part.strip())
