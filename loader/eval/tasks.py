"""What `loader eval` evaluates: an ``EvalTask`` of documents to push, queries and judgements.

Two kinds of task, read by ``load_task`` (the file formats themselves are read by
``loader.eval.datasets``):

- a BEIR folder: its corpus is pushed as one document per BEIR document (the BEIR id becomes the
  chunk's ``source``), and its ``qrels/<split>.tsv`` judges the hits;
- a questions file over a folder of your own documents: a hit is relevant when its chunk's
  ``source`` is the question's ``source`` file; the documents are one tenant's, pushed and
  searched under it: ``--tenant``, else the ``tenant`` the file's lines name (``loader judgments
  export`` writes it), else the ``tenant`` setting; a file whose front matter names another tenant
  is left out, as a push for that tenant leaves it; questions that name a ``heading_path`` are also
  scored at section level (``section_*`` metrics: the chunk must also sit under that heading);
  a question with ``judgments`` (``loader judgments export``) is judged by their grades per
  source; a question with a ``history`` (earlier ``{role, content}`` turns) is a follow-up,
  searched with that conversation (so the ``rewrite`` setting decides what is searched).

Either way the judged documents are counted against the corpus that will be indexed
(``check_judged_documents``): more than half of them missing is an error, some a warning naming
them -- scoring questions against documents that are not there measures nothing but a silent 0.

Example::

    task = load_task("datasets/scifact", split="test", limit=50)
    task.queries[0].text, task.qrels[task.queries[0].id]
    task = load_task("questions.jsonl", docs="docs/")
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
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

# Tenant of a BEIR corpus's documents in the eval index: the corpus names none.
EVAL_TENANT = "eval"
# More than this share of the judged documents missing from the indexed corpus is an error: the
# figures would measure what is missing, not the search.
MAX_MISSING_SHARE = 0.5
# Missing documents named in the message; the others are counted.
MISSING_SHOWN = 5


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
        tenant: whose documents these are: they are pushed and searched under it.
        read_seconds: the time ``load_task`` took to read the dataset and the documents (part of
            the report's ``seconds``: a folder of PDFs takes minutes).
        warnings: what a reader of the figures must know (judged documents that are missing).
    """

    name: str
    kind: str
    split: str
    documents: Callable[[], Iterable[Document | Skipped]]
    queries: list[EvalQuery]
    qrels: dict[str, dict[str, int]]
    document_count: int = 0
    tenant: str = EVAL_TENANT
    read_seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)


def load_task(
    dataset: str | Path,
    *,
    split: str = "test",
    docs: str | Path | None = None,
    limit: int | None = None,
    max_file_bytes: int = 10_000_000,
    tenant: str | None = None,
    default_tenant: str | None = None,
) -> EvalTask:
    """Read a BEIR folder, or a questions file with the folder of documents it asks about.

    Args:
        dataset: a BEIR folder, or a questions JSONL file (then ``docs`` is required).
        split: the BEIR qrels split.
        docs: the documents folder a questions file is about.
        limit: evaluate only the first ``limit`` queries (quick checks).
        max_file_bytes: files larger than this are skipped when reading ``docs``.
        tenant: whose documents a questions file is judged on (``--tenant``); ``None``: the
            tenant its lines name, else ``default_tenant``. A BEIR corpus has no tenants.
        default_tenant: the ``tenant`` setting (``None``: its default).

    Returns:
        The task, with the seconds its reading took.

    Raises:
        InputError: the dataset, the documents folder or a file in it is missing or malformed.
        ConfigError: more than half the judged documents are not in the corpus; ``tenant``
            with a BEIR folder, or another than the questions file's.
    """
    started = time.perf_counter()
    dataset = Path(dataset)
    if limit is not None and limit < 1:
        raise ConfigError(f"limit must be a positive whole number, got {limit}")
    if dataset.is_dir():
        if docs is not None or tenant is not None:
            option = "--docs" if docs is not None else "--tenant"
            raise ConfigError(
                f"{dataset} is a BEIR folder; {option} is only for a questions file over your "
                "own documents"
            )
        task = beir_task(dataset, split, limit)
    elif not dataset.is_file():
        raise InputError(f"{dataset} is neither a BEIR folder nor a questions file")
    elif docs is None:
        raise ConfigError(
            f"{dataset} is a questions file: give the folder of documents it asks about with "
            "--docs FOLDER"
        )
    else:
        task = questions_task(dataset, Path(docs), limit, max_file_bytes, tenant, default_tenant)
    task.read_seconds = time.perf_counter() - started
    return task


def beir_task(folder: Path, split: str, limit: int | None = None) -> EvalTask:
    """The task of a BEIR folder: its corpus, the split's first ``limit`` judged queries.

    Raises:
        ConfigError: more than half the documents these queries judge relevant are not in the
            corpus (``check_judged_documents``).
    """
    data = load_beir(folder, split)
    corpus = data.corpus
    queries = [EvalQuery(qid, text) for qid, text in data.queries.items()][:limit]
    qrels = {query.id: data.qrels[query.id] for query in queries}
    warning = check_judged_documents(
        qrels,
        corpus,
        f"the corpus of {folder}",
        fix=f"are qrels/{split}.tsv's judgments about this corpus?",
    )
    return EvalTask(
        name=data.name or folder.name,
        kind="beir",
        split=split,
        documents=lambda: corpus_to_documents(corpus),
        queries=queries,
        qrels=qrels,
        document_count=len(corpus),
        warnings=[warning] if warning else [],
    )


def questions_task(
    questions_file: Path,
    root: Path,
    limit: int | None = None,
    max_file_bytes: int = 10_000_000,
    tenant: str | None = None,
    default_tenant: str | None = None,
) -> EvalTask:
    """The task of a questions file over the documents folder ``root``: one tenant's documents
    (``tenant``, else the one the file's lines name, else ``default_tenant``).

    Raises:
        ConfigError: ``root`` is not a folder (the same error as ``loader push``'s); the file's
            lines name several tenants, or another than ``tenant``; more than half the judged
            documents are not the tenant's documents in ``root``.
        InputError: the questions file is malformed.
    """
    from loader.ingest.readers import iter_documents, require_folder
    from loader.settings import Settings

    require_folder(root)
    every_question = load_questions(questions_file)
    owner = questions_tenant(every_question, questions_file, tenant)
    owner = owner or default_tenant or Settings().tenant
    questions = every_question[:limit]
    # Read once, here: the source check below and the push both need the documents, and a
    # second read of 28 PDFs cost two minutes.
    folder = TenantDocuments.read(iter_documents(root, max_file_bytes), owner)
    qrels = {q.id: _question_qrels(q) for q in questions}
    warning = folder.check_judged(qrels, root)
    return EvalTask(
        name=root.resolve().name,
        kind="questions",
        split="",
        documents=lambda: iter(folder.items),
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
        qrels=qrels,
        document_count=len(folder.sources),
        tenant=owner,
        warnings=[warning] if warning else [],
    )


def questions_tenant(questions: Sequence[Question], path: Path, given: str | None) -> str | None:
    """The tenant whose documents ``questions`` are judged on: ``given`` (``--tenant``), else
    the one their lines name (``loader judgments export`` writes it), else ``None``. Pure.

    Raises:
        ConfigError: the lines name several tenants, or one that is not ``given``.
    """
    named = sorted({q.tenant for q in questions if q.tenant})
    if len(named) > 1:
        raise ConfigError(
            f"{path}: its questions are of {len(named)} tenants ({', '.join(map(repr, named))}); "
            "eval scores one tenant's questions against that tenant's documents: give it one "
            "tenant's questions per file"
        )
    if given is not None and named and named[0] != given:
        raise ConfigError(
            f"{path}: its questions are of tenant {named[0]!r} (its lines say so), not of "
            f"--tenant {given!r}: drop --tenant, or give it the questions of tenant {given!r}"
        )
    return given or (named[0] if named else None)


@dataclass
class TenantDocuments:
    """What a documents folder holds for one tenant.

    Attributes:
        tenant: the tenant.
        items: what the push gets: the tenant's documents and the unreadable files (which the
            push names); the documents whose front matter names another tenant are left out, as
            a push for this tenant leaves them.
        sources: the tenant's readable documents.
        unreadable: unreadable files and folders, files of types no reader handles, documents
            whose front matter names no usable tenant (the push reports each).
        others: documents whose front matter names another tenant.
    """

    tenant: str
    items: list[Document | Skipped]
    sources: set[str]
    unreadable: list[str]
    others: set[str]

    @classmethod
    def read(cls, items: Iterable[Document | Skipped], tenant: str) -> TenantDocuments:
        from loader.ingest.plan import front_matter_tenant
        from loader.ingest.readers import Skipped

        folder = cls(tenant, [], set(), [], set())
        for item in items:
            if isinstance(item, Skipped):
                folder.unreadable.append(item.source)
                folder.items.append(item)
                continue
            try:
                named = front_matter_tenant(item.metadata.get("tenant"))
            except InputError:  # the push refuses it and says why
                folder.unreadable.append(item.source)
                folder.items.append(item)
                continue
            if named and named != tenant:
                folder.others.add(item.source)
            else:
                folder.sources.add(item.source)
                folder.items.append(item)
        return folder

    def check_judged(self, qrels: Mapping[str, Mapping[str, int]], root: Path) -> str | None:
        """``check_judged_documents`` against these documents of folder ``root``.

        An unreadable file (or folder), or one no reader handles, is named by the push when a
        question is judged on it: it counts toward the error, and is left out of the warning.
        """
        from loader.ingest.readers import is_within

        judged = {key for graded in qrels.values() for key in graded}
        named_by_push = {
            key for key in judged if any(is_within(key, skipped) for skipped in self.unreadable)
        }
        return check_judged_documents(
            qrels,
            self.sources,
            f"tenant {self.tenant!r}, {root}",
            fix=f"is {root} the folder the questions were judged on, and {self.tenant!r} their "
            "tenant (--tenant)?",
            named_elsewhere=named_by_push,
            others=self.others,
        )


def check_judged_documents(
    qrels: Mapping[str, Mapping[str, int]],
    indexed: Collection[str],
    where: str,
    *,
    fix: str,
    named_elsewhere: Collection[str] = (),
    others: Collection[str] = (),
) -> str | None:
    """Count the documents judged relevant (grade above 0) that are not in the corpus to index.

    Args:
        qrels: grades per query id and document key.
        indexed: the keys of the documents that will be indexed.
        where: the corpus, for the message (``tenant 'acme', docs``).
        fix: what to check, appended to the error.
        named_elsewhere: missing keys reported elsewhere (the push names unreadable files):
            counted toward the error, left out of the warning.
        others: keys of documents that are other tenants', counted in the message.

    Returns:
        The warning (also logged) naming the missing documents, or ``None`` when none is.

    Raises:
        ConfigError: more than ``MAX_MISSING_SHARE`` of the judged documents are missing.
    """
    judged = sorted({key for graded in qrels.values() for key, grade in graded.items() if grade})
    missing = [key for key in judged if key not in indexed]
    if len(missing) > MAX_MISSING_SHARE * len(judged):
        raise ConfigError(f"{_missing_line(missing, len(judged), where, others)}; {fix}")
    unnamed = [key for key in missing if key not in named_elsewhere]
    if not unnamed:
        return None
    warning = f"{_missing_line(unnamed, len(judged), where, others)}; the questions judged on "
    warning += "them cannot find them"
    log.warning("%s", warning)
    return warning


def _missing_line(missing: list[str], judged: int, where: str, others: Collection[str]) -> str:
    shown = ", ".join(repr(key) for key in missing[:MISSING_SHOWN])
    if len(missing) > MISSING_SHOWN:
        shown += f" and {len(missing) - MISSING_SHOWN} more"
    line = f"{len(missing)} of {judged} judged documents are not in the indexed corpus ({where}): "
    line += shown
    theirs = sum(1 for key in missing if key in others)
    if theirs:
        line += f" ({theirs} of them other tenants' documents, by their front matter)"
    return line


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
