"""The click model's judgments as a file: the ``questions`` lines ``loader judgments export``
writes (``loader.eval.judgments``), marked ``"implicit": true``, from one tenant's query log
(``loader.train.clicks`` fits the model).

Each line carries the model's name (``"model": "pbm"``) and each judgment its ``estimate`` (the
chance the chunk is clicked when shown first), ``impressions`` and ``clicks`` besides the grade;
``loader eval`` reads the grades, and training weighs implicit lines below explicit ones.

Example::

    summary = export_click_judgments(client, settings, "acme", "clicks.jsonl")
    summary.questions, summary.examination[:3]
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loader.documents import PATH_SEPARATOR
from loader.errors import InputError, NotEnoughEvidenceError
from loader.query.query_log import normalize_question, tenant_events, tenant_queries
from loader.settings import Settings
from loader.train.clicks import (
    MODEL_NAME,
    ClickGrading,
    ClickJudgment,
    ClickModel,
    Impression,
    click_judgments,
    fit_position_model,
    impressions_from_log,
)

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

LOOKUP_BATCH = 500


def click_questions_lines(
    impressions: Iterable[Impression],
    judgments: Iterable[ClickJudgment],
    chunks: Mapping[str, Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """The ``questions`` lines of ``loader judgments export`` (``loader.eval.judgments``), marked
    ``"implicit": true`` with the model's name, each judgment with its estimate, impressions and
    clicks. Pure.

    A question is shown as most often spelled (of equally frequent spellings, the first in
    ``impressions``: the newest, as the log is read); questions come most searched first. ``chunks``
    (chunk id -> ``source``, ``heading_path``) are the tenant's chunks: a judged chunk not among
    them is left out, and so is a question with no judgment above 0 (as the page's export does).
    """
    searches: Counter[str] = Counter()
    spellings: dict[str, Counter[str]] = defaultdict(Counter)
    for impression in impressions:
        question = normalize_question(impression.question)
        searches[question] += 1
        spellings[question][impression.question] += 1
    judged: dict[str, list[ClickJudgment]] = defaultdict(list)
    for judgment in judgments:
        if judgment.chunk_id in chunks:
            judged[judgment.question].append(judgment)
    lines: list[dict[str, Any]] = []
    for question in sorted(judged, key=lambda q: (-searches[q], q)):
        ranked = sorted(judged[question], key=lambda j: (-j.grade, -j.estimate, j.chunk_id))
        if ranked[0].grade == 0:
            continue
        best = chunks[ranked[0].chunk_id]
        lines.append(
            {
                "id": f"q{len(lines) + 1}",
                "question": max(spellings[question], key=spellings[question].__getitem__),
                "source": best["source"],
                "heading_path": list(best["heading_path"]),
                "implicit": True,
                "model": MODEL_NAME,
                "judgments": [_judgment_entry(j, chunks[j.chunk_id]) for j in ranked],
            }
        )
    return lines


def _judgment_entry(judgment: ClickJudgment, chunk: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "chunk_id": judgment.chunk_id,
        "source": chunk["source"],
        "heading_path": list(chunk["heading_path"]),
        "grade": judgment.grade,
        "estimate": round(judgment.estimate, 4),
        "impressions": judgment.impressions,
        "clicks": judgment.clicks,
    }


@dataclass(frozen=True)
class Shortfall:
    """The questions the ``min_impressions`` bar left ungraded: none of their chunks was shown
    that often. ``most_shown``: of each such question, its most-shown chunk's impressions."""

    questions: int  # every question of the log with a shown chunk
    min_impressions: int
    most_shown: tuple[int, ...]  # sorted

    @property
    def short(self) -> int:
        return len(self.most_shown)

    def line(self) -> str:
        """``412 of 416 questions fell short of --min-impressions 10: their most-shown chunk was
        shown 1 to 9 times (median 2)``; ``""`` when none did."""
        if not self.most_shown:
            return ""
        low, high = self.most_shown[0], self.most_shown[-1]
        median = self.most_shown[len(self.most_shown) // 2]
        shown = f"{low} to {high} times" if low != high else f"{low} time{'' if low == 1 else 's'}"
        return (
            f"{self.short} of {self.questions} questions fell short of --min-impressions "
            f"{self.min_impressions}: their most-shown chunk was shown {shown} (median {median})"
        )

    def to_dict(self) -> dict[str, Any]:
        most = self.most_shown
        return {
            "short_questions": self.short,
            "short_most_shown": (
                {"min": most[0], "median": most[len(most) // 2], "max": most[-1]} if most else None
            ),
        }


def shortfall(model: ClickModel, min_impressions: int) -> Shortfall:
    """Which questions ``min_impressions`` leaves ungraded, and how far short each fell. Pure."""
    most: dict[str, int] = {}
    for (question, _chunk_id), shown in model.impressions.items():
        most[question] = max(most.get(question, 0), shown)
    short = sorted(shown for shown in most.values() if shown < min_impressions)
    return Shortfall(len(most), min_impressions, tuple(short))


# --- the export (reads the cluster) -------------------------------------------------------------


@dataclass
class ClickExport:
    """What ``export_click_judgments`` read and wrote."""

    output: str
    model: str
    searches: int
    clicks: int
    pairs: int
    varied_pairs: int
    judgments: int
    questions: int
    examination: list[float]
    identified: list[bool]  # per rank: tied to rank 1 by the log (else kept at 1/rank)
    shortfall: Shortfall  # the questions --min-impressions left ungraded

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self) | {"examination": [round(e, 4) for e in self.examination]}
        del data["shortfall"]
        return data | self.shortfall.to_dict()


def chunk_facts(
    client: OpenSearch, settings: Settings, tenant: str, chunk_ids: Iterable[str]
) -> dict[str, dict[str, Any]]:
    """Chunk id -> ``source`` and ``heading_path`` (a list) of those among ``tenant``'s chunks."""
    from loader.cluster.client import cluster_errors

    ids = sorted(set(chunk_ids))
    facts: dict[str, dict[str, Any]] = {}
    for start in range(0, len(ids), LOOKUP_BATCH):
        batch = ids[start : start + LOOKUP_BATCH]
        query = {"bool": {"filter": [{"terms": {"chunk_id": batch}}, {"term": {"tenant": tenant}}]}}
        with cluster_errors(settings, f"looking up {len(batch)} clicked chunks"):
            answer = client.search(
                index=settings.index_name,
                body={
                    "query": query,
                    "size": len(batch),
                    "_source": ["chunk_id", "source", "heading_path"],
                },
            )
        for hit in answer["hits"]["hits"]:
            source = hit["_source"]
            heading = str(source.get("heading_path") or "").split(PATH_SEPARATOR)
            facts[str(source["chunk_id"])] = {
                "source": str(source.get("source") or ""),
                "heading_path": [part for part in heading if part],
            }
    return facts


def export_click_judgments(
    client: OpenSearch,
    settings: Settings,
    tenant: str,
    path: str | Path,
    grading: ClickGrading | None = None,
) -> ClickExport:
    """Fit the click model to ``tenant``'s log and write its judgments to ``path`` (the
    ``questions`` format, implicit).

    Reads the tenant's newest 10,000 searches and 10,000 events.

    Raises:
        NotEnoughEvidenceError: the tenant's log has no click, or no pair of its chunks is graded
            above 0 (the message says how many questions fell short of ``min_impressions``, and
            by how much).
        InputError: ``path`` cannot be written.
    """
    from loader.cluster.client import cluster_errors

    grading = grading or ClickGrading()
    with cluster_errors(settings, f"reading the query log of tenant {tenant!r}"):
        queries = tenant_queries(client, settings.index_name, tenant)
        events = tenant_events(client, settings.index_name, tenant)
    impressions = impressions_from_log(queries, events, tenant)
    clicks = sum(len(impression.clicked) for impression in impressions)
    if not clicks:
        raise NotEnoughEvidenceError(
            f"tenant {tenant!r} has {len(impressions)} logged searches and no click on them: "
            'nothing to learn from (query_log = "ubi"; clients post click events to /events)'
        )
    model = fit_position_model(impressions, grading.prior_impressions, grading.max_iterations)
    judgments = click_judgments(model, grading)
    chunks = chunk_facts(client, settings, tenant, (j.chunk_id for j in judgments))
    lines = click_questions_lines(impressions, judgments, chunks)
    short = shortfall(model, grading.min_impressions)
    if not lines:
        raise NotEnoughEvidenceError(
            f"tenant {tenant!r}: {len(impressions)} logged searches and {clicks} clicks, and no "
            f"chunk of its own was shown {grading.min_impressions} times with an estimate of "
            f"{grading.grade_1_at} or more; nothing to export. "
            + (f"{short.line()}; lower --min-impressions, or " if short.short else "")
            + "wait for more searches and clicks"
        )
    text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot be written ({exc.strerror})") from None
    return ClickExport(
        output=str(path),
        model=MODEL_NAME,
        searches=len(impressions),
        clicks=clicks,
        pairs=len(model.attractiveness),
        varied_pairs=model.varied_pairs,
        judgments=sum(len(line["judgments"]) for line in lines),
        questions=len(lines),
        examination=model.examination,
        identified=model.identified,
        shortfall=short,
    )
