"""Trying fusion settings on the judging page without applying them: ``GET
/judge/sets/<id>/try`` (a form prefilled with the applied values, ``judge_files/try.js``) and
``POST /judge/sets/<id>/trials`` (``{"settings": {"rrf_bm25_weight": 0.4, ...}}``, with the
page's token): each graded question's nDCG@10 now and under the trial, the delta, the means, the
better / worse / unchanged counts and the ``loader.toml`` lines that would apply it
(``loader.eval.trial_searches``). Nothing on the cluster changes and no user is served otherwise.

A bad trial (an unknown setting, one that changes the index or the chunks, a value out of
bounds) is a 422 naming it, before any search; another tenant's set the 404 of an unknown one;
the cluster down a 503. The searches run for the session's tenant only, unlogged, in a worker
thread. ``add_trial_routes`` mounts both routes.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from loader.errors import LoaderError
from loader.eval.trial_searches import run_trial, trial_modes
from loader.eval.trials import TRIAL_SETTINGS
from loader.modes import HYBRID_MODES


class TrialPages:
    """The trial handlers, over the judging page's ``JudgePages`` (its service and sessions)."""

    def __init__(self, pages: Any) -> None:
        self.pages = pages

    def try_page(self, set_id: str, request: Request) -> Response:
        """The form, prefilled with the applied settings; the table fills in when it is sent."""
        pages = self.pages
        tenant, cookie = pages.session(request)
        if tenant is None:
            return RedirectResponse("/judge/login", status_code=303)
        try:
            with pages.cluster("reading a query set"):
                query_set = pages.query_set(tenant, set_id)
        except LoaderError as exc:
            return pages.error_page(exc, "reading a query set")
        settings = pages.service.settings
        mode_now, _ = trial_modes(settings.search_mode, {})
        applied = {name: getattr(settings, name) for name in TRIAL_SETTINGS}
        applied["search_mode"] = mode_now
        return pages.page(
            "try.html",
            tenant=tenant,
            rater=pages.rater(request),
            csrf=pages.sessions.csrf(cookie),
            query_set=query_set,
            applied=applied,
            numbers=[name for name in TRIAL_SETTINGS if name != "search_mode"],
            modes=HYBRID_MODES,
        )

    async def trial(self, set_id: str, request: Request) -> Response:
        """``POST .../trials`` ``{"settings": {...}}``, or ``{"sweep": {"name": [values]}}``
        with settings held fixed or none: the trial's figures (JSON)."""
        pages = self.pages
        tenant, refusal = pages.post_check(request)
        if refusal is not None:
            return refusal
        assert tenant is not None
        try:
            body = json.loads(await request.body())
            tried, sweep = body.get("settings", {} if "sweep" in body else None), body.get("sweep")
            if tried is None:
                raise KeyError("settings")
        except (ValueError, KeyError, TypeError, AttributeError):
            return pages.refused(422, 'settings: send {"settings": {"rrf_bm25_weight": 0.4}}')
        # In a worker thread: a trial searches every graded question, which on the event loop
        # would hold every request of the server.
        return await run_in_threadpool(self.run, tenant, set_id, tried, sweep)

    def run(self, tenant: str, set_id: str, tried: Any, sweep: Any = None) -> Response:
        pages = self.pages
        service = pages.service
        try:
            from loader.eval.trials import check_trial, sweep_trials

            # Before the cluster is asked: a bad trial costs nothing.
            if sweep is None:
                check_trial(tried)
            else:
                sweep_trials(tried, sweep)
            with pages.cluster("trying settings"):
                query_set, state = pages_read(pages, tenant, set_id)
                result = run_trial(
                    pages.quiet_settings,
                    query_set,
                    state,
                    tried,
                    client=service.client,
                    embedder=service.embedder,
                    sweep=sweep,
                )
        except LoaderError as exc:
            return pages.error_json(exc, "trying settings")
        return JSONResponse(result, headers=pages.security_headers)


def pages_read(pages: Any, tenant: str, set_id: str) -> tuple[Any, Any]:
    """The tenant's query set ``set_id`` and its grades (another tenant's: not found)."""
    from loader.query.judgments import judging_state

    query_set = pages.query_set(tenant, set_id)
    service = pages.service
    state = judging_state(service.client, service.settings.index_name, tenant, set_id)
    return query_set, state


def add_trial_routes(app: FastAPI, trials: TrialPages) -> None:
    """Mount the trial routes: before ``/judge/sets/<id>/<n>``, which would take ``try`` for a
    question's number."""
    app.get("/judge/sets/{set_id}/try", include_in_schema=False)(trials.try_page)
    app.post("/judge/sets/{set_id}/trials", include_in_schema=False)(trials.trial)
