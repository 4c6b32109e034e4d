"""The judging page's live scores: a set's question list (``GET /judge/sets/<id>/questions``,
each question's judged count, nDCG@10 per search mode and how far the modes' top 10 documents
disagree, sortable by each; and what to judge next: the question the modes disagree on most that
this rater has not judged) and one question's scores (``GET /judge/sets/<id>/<n>/scores``, JSON,
which the question page reads on load and after each save); and the set's raters
(``GET /judge/sets/<id>/agreement``) and a question's information need (``POST .../<n>/need``).

Computed from the grades stored so far, with ``loader eval``'s own search (one hit per document,
its candidate counts) and metric code (``loader.eval.live``): the figures equal what ``loader
eval`` reports on the exported questions file over the same documents. The page's searches are
not logged (``JudgePages.quiet_settings``) and run for the session's tenant only.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, RedirectResponse, Response

from loader.errors import LoaderError, NotFoundError
from loader.eval.agreement import agreement
from loader.eval.judgments import graded_qrels
from loader.eval.live import (
    mean_scores,
    mode_disagreement,
    question_score,
    spread,
    top_documents,
)
from loader.modes import search_mode
from loader.query import judgments
from loader.query.notes import save_need
from loader.query.request import MAX_CANDIDATES, MAX_QUESTION_CHARS, SearchRequest
from loader.query.search import search
from loader.settings import SEARCH_MODES

SORTS = ("number", "spread", "disagree", *SEARCH_MODES)


class ScorePages:
    """The score handlers, over the judging page's ``JudgePages`` (its service and sessions)."""

    def __init__(self, pages: Any) -> None:
        self.pages = pages

    def hits(self, tenant: str, question: str, mode: str) -> list[tuple[str, str, float]]:
        """``mode``'s ``(chunk_id, source, score)`` hits, searched as ``loader eval`` searches."""
        from loader.eval.runner import CHUNKS_PER_DOCUMENT, DEFAULT_CANDIDATES

        service = self.pages.service
        request = SearchRequest.from_settings(
            self.pages.quiet_settings,
            question[:MAX_QUESTION_CHARS],
            tenant=tenant,
            mode=mode,
            k=DEFAULT_CANDIDATES,
            candidates=min(DEFAULT_CANDIDATES * CHUNKS_PER_DOCUMENT, MAX_CANDIDATES),
            rerank=False,
            one_per_document=True,
        )
        embedder = service.embedder if search_mode(mode).embeds else None
        found = search(request, self.pages.quiet_settings, client=service.client, embedder=embedder)
        return [(h.chunk_id, h.source, h.final_score) for h in found.hits]

    def scores(self, tenant: str, question: str, graded: dict[str, Any]) -> dict[str, Any]:
        """Each mode's nDCG@10 of ``question`` from its ``graded`` results (chunk -> Grade);
        no search at all when nothing is graded above 0 (then every score is ``None``)."""
        judged = [{"source": g.source, "grade": g.grade} for g in graded.values()]
        if not graded_qrels(judged):
            return dict.fromkeys(SEARCH_MODES)
        return {
            mode: question_score(self.hits(tenant, question, mode), judged) for mode in SEARCH_MODES
        }

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

    def questions_page(self, set_id: str, request: Request, sort: str = "number") -> Response:
        pages = self.pages
        tenant, cookie = pages.session(request)
        if tenant is None:
            return RedirectResponse("/judge/login", status_code=303)
        sort = sort if sort in SORTS else "number"
        try:
            with pages.cluster("scoring a query set"):
                query_set, state = self.read(tenant, set_id)
                rows = []
                mine = state.mine(pages.rater(request))
                for number, question in enumerate(query_set.questions):
                    graded = state.grades.get(number, {})
                    judged = [{"source": g.source, "grade": g.grade} for g in graded.values()]
                    hits = {mode: self.hits(tenant, question, mode) for mode in SEARCH_MODES}
                    scores = {mode: question_score(hits[mode], judged) for mode in SEARCH_MODES}
                    rows.append(
                        {
                            "number": number,
                            "question": question,
                            "judged": len(graded),
                            "mine": number in mine or number in state.skipped,
                            "skipped": number in state.skipped,
                            "scores": scores,
                            "spread": spread(scores),
                            "disagree": mode_disagreement(
                                {mode: top_documents(found) for mode, found in hits.items()}
                            ),
                        }
                    )
        except LoaderError as exc:
            return pages.error_page(exc, "scoring a query set")
        by_disagreement = sorted_rows(rows, "disagree")
        after = next((row for row in by_disagreement if not row["mine"]), None)
        return pages.page(
            "questions.html",
            next_row=after,
            tenant=tenant,
            rater=pages.rater(request),
            csrf=pages.sessions.csrf(cookie),
            query_set=query_set,
            rows=sorted_rows(rows, sort),
            means=mean_scores(row["scores"] for row in rows),
            modes=SEARCH_MODES,
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
        except (ValueError, KeyError, TypeError):
            return pages.refused(422, 'send {"need": "<what the asker wants to know>"}')
        try:
            with pages.cluster("saving an information need"):
                pages.query_set(tenant, set_id)  # the id's length check, the tenant's
                where = (pages.service.client, pages.service.settings.index_name, tenant)
                need = save_need(*where, set_id, number, need)
        except LoaderError as exc:
            return pages.error_json(exc, "saving an information need")
        return JSONResponse({"need": need}, headers=pages.security_headers)


def sorted_rows(rows: list[dict[str, Any]], sort: str) -> list[dict[str, Any]]:
    """``rows`` by ``sort``: ``number`` in order; ``spread`` (of the scores) or ``disagree``
    (of the top documents, ``mode_disagreement``) the modes' widest disagreement first; a mode,
    its worst-scored question first (what most needs a look). Unscored last. Pure."""
    if sort == "number":
        return sorted(rows, key=lambda row: row["number"])
    if sort in ("spread", "disagree"):  # widest first
        value = [(row[sort] is None, -(row[sort] or 0.0), row["number"]) for row in rows]
    else:
        value = [
            (row["scores"][sort] is None, row["scores"][sort] or 0.0, row["number"]) for row in rows
        ]
    order = sorted(range(len(rows)), key=lambda i: value[i])
    return [rows[i] for i in order]
