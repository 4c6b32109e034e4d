"""Snapshots on the judging page: ``POST /judge/sets/<id>/snapshots`` (``{"label": ...}``, with
the page's token) keeps each column's top 10 documents of every question of the set
(``loader.query.snapshots``), ``GET /judge/sets/<id>/snapshots`` lists the set's (JSON),
``GET /judge/sets/<id>/snapshots/<sid>/compare`` scores the snapshot's rankings and today's with
today's grades (``loader.eval.snapshot_scores``, JSON for scripts), and
``DELETE /judge/sets/<id>/snapshots/<sid>`` (with the page's token) deletes one: 204. The
question list's ``?against=<sid>`` shows the same comparison (``set_searches.comparison_of``).

The rankings are searched exactly as the live scores search (``set_searches.column_hits``: one hit
per document, as ``loader eval`` searches; the tenant's own learned model, when served, as the
``learned`` column), for the session's tenant only and never logged. Another tenant's snapshot is
a 404, as one that does not exist (deleting it deletes nothing); a bad label a 422 naming
``label``; the cluster down a 503. ``add_snapshot_routes`` mounts the four routes.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from loader.errors import LoaderError
from loader.eval.set_searches import comparison_of, served_now, set_rankings
from loader.eval.snapshot_scores import aligned
from loader.query.request import MAX_QUESTION_CHARS
from loader.query.snapshots import (
    check_label,
    check_question_count,
    delete_snapshot,
    get_snapshot,
    list_snapshots,
    save_snapshot,
)

SNAPSHOT = "/judge/sets/{set_id}/snapshots/{snapshot_id}"  # a snapshot's routes


class SnapshotPages:
    """The snapshot handlers, over the live scores' ``ScorePages`` (its searches)."""

    def __init__(self, scores: Any) -> None:
        self.scores = scores
        self.pages = scores.pages

    def where(self, tenant: str) -> tuple[Any, str, str]:
        return self.pages.service.client, self.pages.service.settings.index_name, tenant

    def rankings(self, tenant: str, questions: list[str]) -> tuple[list[dict[str, Any]], Any, str]:
        """Each question's top documents per column, as the live scores rank them; the model
        served and its base."""
        model, base = self.scores.served_model(tenant)
        service = self.pages.service
        rankings = set_rankings(
            self.pages.quiet_settings,
            questions,
            tenant,
            client=service.client,
            embedder=service.embedder,
            model=model,
            base=base,
        )
        return rankings, model, base

    async def take(self, set_id: str, request: Request) -> Response:
        """``POST .../snapshots`` ``{"label": "<what is about to change>"}``: 201 and the
        snapshot's summary."""
        pages = self.pages
        tenant, refusal = pages.post_check(request)
        if refusal is not None:
            return refusal
        assert tenant is not None
        try:
            body = json.loads(await request.body())
            label = body["label"]
        except (ValueError, KeyError, TypeError):
            return pages.refused(422, 'label: send {"label": "<what is about to change>"}')
        # In a worker thread, as every plain route runs: a snapshot searches every question,
        # and on the event loop it held every request of the server while it did.
        return await run_in_threadpool(self.save, tenant, set_id, label, pages.rater(request))

    def save(self, tenant: str, set_id: str, label: Any, rater: str) -> Response:
        """Search the set, store the snapshot: 201 and its summary."""
        pages = self.pages
        try:
            label = check_label(label)  # before any search: a bad label costs nothing
            with pages.cluster("taking a snapshot"):
                query_set = pages.query_set(tenant, set_id)
                check_question_count(query_set.name, len(query_set.questions))
                rankings, model, base = self.rankings(tenant, query_set.questions)
                snapshot = save_snapshot(
                    *self.where(tenant),
                    set_id,
                    label,
                    rankings=rankings,
                    questions=query_set.questions,
                    served=served_now(pages.service.settings, model, base),
                    rater=rater,
                )
        except LoaderError as exc:
            return pages.error_json(exc, "taking a snapshot")
        summary = snapshot.summary() | {
            "compare": f"/judge/sets/{set_id}/snapshots/{snapshot.snapshot_id}/compare",
            "page": f"/judge/sets/{set_id}/questions?against={snapshot.snapshot_id}",
        }
        return JSONResponse(summary, status_code=201, headers=pages.security_headers)

    def listing(self, set_id: str, request: Request) -> Response:
        """``GET .../snapshots``: the set's snapshots, newest first (``LISTED`` at most)."""
        pages = self.pages
        tenant, _ = pages.session(request)
        if tenant is None:
            return pages.refused(401, "sign in at /judge/login")
        try:
            with pages.cluster("listing snapshots"):
                pages.query_set(tenant, set_id)  # the id's length check
                snapshots = list_snapshots(*self.where(tenant), set_id)
        except LoaderError as exc:
            return pages.error_json(exc, "listing snapshots")
        return JSONResponse(
            {"snapshots": [s.summary() for s in snapshots]}, headers=pages.security_headers
        )

    def compare_json(self, set_id: str, snapshot_id: str, request: Request) -> Response:
        """``GET .../snapshots/<sid>/compare``: each question's nDCG@10 then and now per column
        (both with today's grades), the means, the counts, and both sides' rankings."""
        pages = self.pages
        tenant, _ = pages.session(request)
        if tenant is None:
            return pages.refused(401, "sign in at /judge/login")
        try:
            with pages.cluster("comparing with a snapshot"):
                query_set, state = self.scores.read(tenant, set_id)
                snapshot = get_snapshot(*self.where(tenant), set_id, snapshot_id)
                rankings, model, base = self.rankings(tenant, query_set.questions)
        except LoaderError as exc:
            return pages.error_json(exc, "comparing with a snapshot")
        result = comparison_of(snapshot, query_set.questions, state, rankings)
        then = aligned(snapshot.digests, snapshot.rankings, query_set.questions)
        for row, old, new in zip(result["questions"], then, rankings, strict=True):
            row["question"] = query_set.questions[row["number"]][:MAX_QUESTION_CHARS]
            row["rankings"] = {"then": old, "now": new}
        result["snapshot"] = snapshot.summary()
        result["served_now"] = served_now(pages.service.settings, model, base)
        return JSONResponse(result, headers=pages.security_headers)

    async def delete(self, set_id: str, snapshot_id: str, request: Request) -> Response:
        """``DELETE .../snapshots/<sid>``: 204, and the set lists it no more."""
        tenant, refusal = self.pages.post_check(request)  # the session and the page's token
        if refusal is not None:
            return refusal
        assert tenant is not None
        # In a worker thread, as ``take``: a slow cluster holds this request, not the server.
        return await run_in_threadpool(self.forget, tenant, set_id, snapshot_id)

    def forget(self, tenant: str, set_id: str, snapshot_id: str) -> Response:
        """Delete the tenant's snapshot: 204 (404 when it is not the tenant's set's)."""
        pages = self.pages
        try:
            with pages.cluster("deleting a snapshot"):
                pages.query_set(tenant, set_id)  # the id's length check
                delete_snapshot(*self.where(tenant), set_id, snapshot_id)
        except LoaderError as exc:
            return pages.error_json(exc, "deleting a snapshot")
        return Response(status_code=204, headers=pages.security_headers)


def add_snapshot_routes(app: FastAPI, snapshots: SnapshotPages) -> None:
    """Mount the snapshot routes: before ``/judge/sets/<id>/<n>``, which would take
    ``snapshots`` for a question's number."""
    sets = "/judge/sets/{set_id}/snapshots"
    app.post(sets, include_in_schema=False)(snapshots.take)
    app.get(sets, include_in_schema=False)(snapshots.listing)
    app.get(f"{SNAPSHOT}/compare", include_in_schema=False)(snapshots.compare_json)
    app.delete(SNAPSHOT, include_in_schema=False)(snapshots.delete)
