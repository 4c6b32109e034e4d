"""The judging page's live scores: a set's question list (``GET /judge/sets/<id>/questions``,
each question's judged count, nDCG@10 per search mode and of the tenant's learned model when
one is served, how far the modes' top 10 documents
disagree and, when the tenant's learned model is served, how far its top 10 moves from fusion's,
sortable by each; and what to judge next, ``judge_next``) and one question's scores
(``GET /judge/sets/<id>/<n>/scores``, JSON, which the question page reads on load and after
each save); the signed-in rater's grades of one question (``GET .../<n>/grades``, JSON, which
the question page re-reads when it is looked at again); and the set's raters
(``GET /judge/sets/<id>/agreement``) and a question's information need (``POST .../<n>/need``);
and the set as a file (``GET /judge/sets/<id>/export?format=``, what ``loader judgments export``
writes).

Computed from the grades stored so far, with ``loader eval``'s own search (one hit per document,
its candidate counts) and metric code (``loader.eval.live``): the figures equal what ``loader
eval`` reports on the exported questions file over the same documents. The page's searches are
not logged (``JudgePages.quiet_settings``) and run for the session's tenant only; the learned
model that reranks them is the session tenant's own (or the one ``learned_reranker_tenants``
lends it by name), never another tenant's.
"""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from loader.errors import ConfigError, LoaderError, NotFoundError
from loader.eval.agreement import agreement
from loader.eval.judgments import check_export, exported, graded_qrels
from loader.eval.live import (
    mean_scores,
    mode_disagreement,
    question_score,
    ranking_difference,
    spread,
    top_documents,
)
from loader.eval.set_searches import (
    LEARNED_SCORE,
    Hits,
    column_hits,
    comparison_of,
    judged_hits,
    learned_base,
)
from loader.models.rerank.check import LEARNED, choose_reranker
from loader.query import judgments
from loader.query.notes import MAX_NEED_CHARS, check_note, save_need
from loader.query.snapshots import get_snapshot, list_snapshots
from loader.serve.judge_view import rater_grades
from loader.settings import SEARCH_MODES

SORTS = ("number", "spread", "disagree", "moves", *SEARCH_MODES, LEARNED_SCORE)
# What ordered "judge next", as the page says it.
# What each export format is served as: its media type and the download's file name suffix.
EXPORT_TYPES = {
    "questions": ("application/x-ndjson; charset=utf-8", ".jsonl"),
    "srw-query-set": ("application/json; charset=utf-8", ".srw-query-set.json"),
    "srw-judgments": ("application/json; charset=utf-8", ".srw-judgments.json"),
    "quepid-csv": ("text/csv; charset=utf-8", ".quepid.csv"),
}
NEXT_BY = {
    "moves": "the learned model's top 10 moves furthest from fusion's",
    "disagree": "the modes' top 10 disagree most",
}


class ScorePages:
    """The score handlers, over the judging page's ``JudgePages`` (its service and sessions)."""

    def __init__(self, pages: Any) -> None:
        self.pages = pages

    def served_model(self, tenant: str) -> tuple[Any, str]:
        """The learned model that reranks ``tenant``'s searches, and the mode it reranks (the
        base it learnt from, else the ``search_mode`` setting); ``None`` when rerank is off or
        the tenant has none (``choose_reranker``: its own, or one lent it by name), or its
        files fail their checks."""
        service = self.pages.service
        settings = service.settings
        if settings.rerank == "off" or choose_reranker(settings, tenant).kind != LEARNED:
            return None, ""
        model, _failure = service.reranker_for(tenant)
        if getattr(model, "kind", "") != LEARNED:
            return None, ""
        return model, learned_base(model, settings.search_mode)

    def hits(self, tenant: str, question: str, mode: str, reranker: Any = None) -> Hits:
        """``mode``'s hits, searched as ``loader eval`` searches (``set_searches.judged_hits``),
        with the query log off."""
        service = self.pages.service
        where = {"client": service.client, "embedder": service.embedder, "reranker": reranker}
        return judged_hits(self.pages.quiet_settings, question, tenant, mode, **where)

    def column_hits(self, tenant: str, question: str, model: Any, base: str) -> dict[str, Hits]:
        """Each column's hits of ``question`` (``set_searches.column_hits``): what the live
        scores and snapshots rank alike."""
        service = self.pages.service
        where = {"client": service.client, "embedder": service.embedder}
        return column_hits(
            self.pages.quiet_settings, question, tenant, model=model, base=base, **where
        )

    def scores(self, tenant: str, question: str, graded: dict[str, Any]) -> dict[str, Any]:
        """Each mode's nDCG@10 of ``question`` from its ``graded`` results (chunk -> Grade),
        and the tenant's learned model's (``learned``) when one is served; no search at all when
        nothing is graded above 0 (then every score is ``None``)."""
        model, base = self.served_model(tenant)
        columns = (*SEARCH_MODES, LEARNED_SCORE) if model is not None else SEARCH_MODES
        judged = [{"source": g.source, "grade": g.grade} for g in graded.values()]
        if not graded_qrels(judged):
            return dict.fromkeys(columns)
        hits = self.column_hits(tenant, question, model, base)
        return {column: question_score(found, judged) for column, found in hits.items()}

    def read(self, tenant: str, set_id: str) -> tuple[Any, Any]:
        pages = self.pages
        query_set = pages.query_set(tenant, set_id)
        state = judgments.judging_state(
            pages.service.client, pages.service.settings.index_name, tenant, set_id
        )
        return query_set, state

    def question_scores(self, set_id: str, number: int, request: Request) -> Response:
        tenant, _ = self.pages.session(request)
        if tenant is None:
            return self.pages.refused(401, "sign in at /judge/login")
        try:
            with self.pages.cluster("scoring a question"):
                query_set, state = self.read(tenant, set_id)
                if not 0 <= number < len(query_set.questions):
                    raise NotFoundError(f"question {number} is not in this query set")
                graded = state.grades.get(number, {})
                scores = self.scores(tenant, query_set.questions[number], graded)
        except LoaderError as exc:
            return self.pages.error_json(exc, "scoring a question")
        return JSONResponse(
            {"scores": scores, "judged": len(graded)}, headers=self.pages.security_headers
        )

    def question_grades(self, set_id: str, number: int, request: Request) -> Response:
        """The signed-in rater's grades of question ``number`` (``judge_view.rater_grades``),
        JSON: what a question page open in another tab or on another device re-reads when it is
        looked at again, so it never shows a grade replaced since. No search runs."""
        tenant, _ = self.pages.session(request)
        if tenant is None:
            return self.pages.refused(401, "sign in at /judge/login")
        try:
            with self.pages.cluster("reading a question's grades"):
                query_set, state = self.read(tenant, set_id)
                if not 0 <= number < len(query_set.questions):
                    raise NotFoundError(f"question {number} is not in this query set")
        except LoaderError as exc:
            return self.pages.error_json(exc, "reading a question's grades")
        graded = rater_grades(state, self.pages.rater(request), number)
        grades = {chunk: {"grade": grade, "note": note} for chunk, (grade, note) in graded.items()}
        return JSONResponse({"grades": grades}, headers=self.pages.security_headers)

    def export_file(
        self, set_id: str, request: Request, format: str = "questions", rating_scale: int = 2
    ) -> Response:
        """``GET .../export?format=...&rating_scale=...``: the set with its grades as
        ``loader judgments export`` writes it (``loader.eval.judgments.exported``), a download
        named after the set. No search runs."""
        tenant, _ = self.pages.session(request)
        if tenant is None:
            return self.pages.refused(401, "sign in at /judge/login")
        try:
            check_export(format, rating_scale)  # before the cluster is asked
            with self.pages.cluster("exporting a query set"):
                query_set, state = self.read(tenant, set_id)
            text, _count = exported(query_set, state, format, rating_scale)
        except LoaderError as exc:
            return self.pages.error_json(exc, "exporting a query set")
        name = re.sub(r"[^A-Za-z0-9._-]+", "-", query_set.name).strip(".-") or "query-set"
        kind, suffix = EXPORT_TYPES[format]
        headers = self.pages.security_headers | {
            "Content-Disposition": f'attachment; filename="{name}{suffix}"'
        }
        return Response(text.encode("utf-8"), media_type=kind, headers=headers)

    def questions_page(
        self, set_id: str, request: Request, sort: str = "number", against: str = ""
    ) -> Response:
        """The question list; with ``against`` (a snapshot's id), each score's delta from it
        (``set_searches.comparison_of``), sortable by a column's delta (``delta-<column>``)."""
        pages = self.pages
        tenant, cookie = pages.session(request)
        if tenant is None:
            return RedirectResponse("/judge/login", status_code=303)
        try:
            with pages.cluster("scoring a query set"):
                query_set, state = self.read(tenant, set_id)
                where = (pages.service.client, pages.service.settings.index_name, tenant)
                snapshots = list_snapshots(*where, set_id)
                snapshot = get_snapshot(*where, set_id, against) if against else None
                rows = []
                mine = state.mine(pages.rater(request))
                model, base = self.served_model(tenant)
                for number, question in enumerate(query_set.questions):
                    graded = state.grades.get(number, {})
                    judged = [{"source": g.source, "grade": g.grade} for g in graded.values()]
                    hits = self.column_hits(tenant, question, model, base)
                    scores = {column: question_score(h, judged) for column, h in hits.items()}
                    ranked = {column: top_documents(h) for column, h in hits.items()}
                    rows.append(
                        {
                            "number": number,
                            "question": question,
                            "judged": len(graded),
                            "mine": number in mine or number in state.skipped,
                            "skipped": number in state.skipped,
                            "scores": scores,
                            "rankings": ranked,
                            "spread": spread({m: scores[m] for m in SEARCH_MODES}),
                            "disagree": mode_disagreement({m: ranked[m] for m in SEARCH_MODES}),
                            "moves": None
                            if model is None
                            else ranking_difference(ranked[base], ranked[LEARNED_SCORE]),
                        }
                    )
        except LoaderError as exc:
            return pages.error_page(exc, "scoring a query set")
        comparison = None
        if snapshot is not None:
            rankings = [row["rankings"] for row in rows]
            comparison = comparison_of(snapshot, query_set.questions, state, rankings)
            for row, compared in zip(rows, comparison["questions"], strict=True):
                row["delta"] = {c: v["delta"] for c, v in compared["scores"].items()}
                row["change"] = compared["scores"]
        sorts = (*SORTS, *(f"delta-{c}" for c in comparison["columns"])) if comparison else SORTS
        sort = sort if sort in sorts else "number"
        after, measure = judge_next(rows, by_model=model is not None)
        return pages.page(
            "questions.html",
            snapshots=snapshots,
            snapshot=snapshot,
            comparison=comparison,
            against=snapshot.snapshot_id if snapshot else "",
            next_row=after,
            next_by=NEXT_BY[measure],
            model_base=base if model is not None else "",
            tenant=tenant,
            rater=pages.rater(request),
            csrf=pages.sessions.csrf(cookie),
            query_set=query_set,
            rows=sorted_rows(rows, sort),
            means=mean_scores(row["scores"] for row in rows),
            modes=(*SEARCH_MODES, LEARNED_SCORE) if model is not None else SEARCH_MODES,
            sort=sort,
        )

    def agreement_page(self, set_id: str, request: Request) -> Response:
        """Each rater's progress, each pair's Cohen's kappa, and the results to settle."""
        tenant, cookie = self.pages.session(request)
        if tenant is None:
            return RedirectResponse("/judge/login", status_code=303)
        try:
            with self.pages.cluster("reading the raters' grades"):
                query_set, state = self.read(tenant, set_id)
        except LoaderError as exc:
            return self.pages.error_page(exc, "reading the raters' grades")
        return self.pages.page(
            "agreement.html",
            tenant=tenant,
            rater=self.pages.rater(request),
            csrf=self.pages.sessions.csrf(cookie),
            query_set=query_set,
            agreement=agreement(state.ratings),
            resolution=judgments.RESOLUTION,
        )

    async def need(self, set_id: str, number: int, request: Request) -> Response:
        """``POST .../<n>/need`` ``{"need": "<text>"}``: the question's information need."""
        pages = self.pages
        tenant, refusal = pages.post_check(request)
        if refusal is not None:
            return refusal
        try:
            need = json.loads(await request.body())["need"]
            if not isinstance(need, str):
                raise ValueError
            need = check_note(need, "need", MAX_NEED_CHARS)  # before the cluster is asked
        except ConfigError as exc:
            return pages.refused(422, str(exc))
        except (ValueError, KeyError, TypeError):
            return pages.refused(422, 'send {"need": "<what the asker wants to know>"}')
        # In a worker thread: on the event loop a slow cluster held every request of the server.
        return await run_in_threadpool(self.save_need, tenant, set_id, number, need)

    def save_need(self, tenant: str, set_id: str, number: int, need: str) -> Response:
        pages = self.pages
        try:
            with pages.cluster("saving an information need"):
                pages.query_set(tenant, set_id)  # the id's length check, the tenant's
                where = (pages.service.client, pages.service.settings.index_name, tenant)
                need = save_need(*where, set_id, number, need)
        except LoaderError as exc:
            return pages.error_json(exc, "saving an information need")
        return JSONResponse({"need": need}, headers=pages.security_headers)


def judge_next(rows: list[dict[str, Any]], by_model: bool) -> tuple[dict[str, Any] | None, str]:
    """The question to judge next among ``rows`` this rater has not judged (nor skipped), and
    the measure that chose it: with the tenant's learned model served (``by_model``), the one
    whose model top 10 moves furthest from fusion's (``moves``: its grades say most about
    whether the model serves better); without one, the one the modes disagree on most
    (``disagree``). Pure."""
    measure = "moves" if by_model else "disagree"
    return next((row for row in sorted_rows(rows, measure) if not row["mine"]), None), measure


def sorted_rows(rows: list[dict[str, Any]], sort: str) -> list[dict[str, Any]]:
    """``rows`` by ``sort``: ``number`` in order; ``spread`` (of the scores) or ``disagree``
    (of the top documents, ``mode_disagreement``) the modes' widest disagreement first;
    ``moves`` (``ranking_difference`` of the learned model's top 10 and fusion's) the widest
    first; a mode, its worst-scored question first (what most needs a look); ``delta-<column>``
    (against a snapshot) the question that lost most in that column first. Unscored last.
    Pure."""
    if sort == "number":
        return sorted(rows, key=lambda row: row["number"])
    if sort in ("spread", "disagree", "moves"):  # widest first
        value = [(row[sort] is None, -(row[sort] or 0.0), row["number"]) for row in rows]
    elif sort.startswith("delta-"):  # against a snapshot: the worst change first
        column = sort.removeprefix("delta-")
        deltas = [row.get("delta", {}).get(column) for row in rows]
        value = [(d is None, d or 0.0, row["number"]) for d, row in zip(deltas, rows, strict=True)]
    else:
        value = [
            # .get: the learned model's column exists only while a model is served.
            (row["scores"].get(sort) is None, row["scores"].get(sort) or 0.0, row["number"])
            for row in rows
        ]
    order = sorted(range(len(rows)), key=lambda i: value[i])
    return [rows[i] for i in order]
