"""The judging page of ``loader serve`` (``/judge``): grade the pooled results of sampled
questions, and see two modes' rankings side by side.

Plain server-rendered HTML (Jinja2, autoescaped: every question and chunk is text, never markup;
direction controls are shown, not obeyed: ``visible_bidi``) and one small script
(``judge_files/judge.js``, which saves grades in the order they are pressed); a
Content-Security-Policy allows no inline script at all. Signing in takes an API key (with
``api_keys_file``; else a tenant name) and sets an HMAC-signed, HttpOnly, SameSite=Strict session
cookie holding the tenant, never the key (signed with ``loader.serve.auth.session_key``, kept
across restarts). Every POST must carry the page's token (``X-CSRF-Token``, derived from the
session) and, when the browser sends one, an ``Origin`` of this server. A set, question or chunk
of another tenant is refused with 403 before anything is written (``loader.query.judgments``).

Routes: ``GET /judge`` (the tenant's query sets), ``GET /judge/sets/<id>`` (resume: the first
question neither graded nor skipped), ``GET /judge/sets/<id>/<n>`` (question ``n`` with the
pooled top results of every search mode), ``POST .../<n>/grade`` (``{"chunk_id", "grade"}``;
``"grade": null`` clears it), ``POST .../<n>/skip``,
``GET .../<n>/compare?a=bm25&b=hybrid-rrf`` (side by side, with what moved),
``GET /judge/sets/<id>/questions`` and ``.../<n>/scores`` (live scores: ``judge_scores``),
``GET /judge/sets/<id>/agreement`` (the raters: progress, Cohen's kappa, what to settle),
``/judge/sets/<id>/snapshots`` (take, list, compare, delete: ``judge_snapshots``), ``POST
/judge/sets/import`` and ``.../<id>/import`` (a judgments file: ``judge_import``). A key's
name (``loader.serve.auth``) is the rater: each rater sees and changes only their own grades.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import json
import logging
from typing import Any
from urllib.parse import parse_qs, urlsplit

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from loader.cluster.client import cluster_errors
from loader.errors import ConfigError, LoaderError, NotFoundError
from loader.modes import search_mode
from loader.query import judgments
from loader.query.notes import check_note, save_cant_tell
from loader.query.request import MAX_QUESTION_CHARS, SearchRequest
from loader.query.search import search
from loader.serve.auth import SESSION_SECONDS, ApiKeys, Sessions, same_text, session_key
from loader.serve.judge_import import ImportPages, add_import_routes
from loader.serve.judge_scores import ScorePages
from loader.serve.judge_snapshots import SnapshotPages, add_snapshot_routes
from loader.serve.judge_trials import TrialPages, add_trial_routes
from loader.serve.judge_view import (
    CANT_TELL,
    GRADE_LABELS,
    environment,
    movements,
    pool,
    rater_grades,
    shown,
    with_found,
)
from loader.serve.responses import error_reply
from loader.settings import SEARCH_MODES, tenant_problem
from loader.text import first_surrogate

log = logging.getLogger(__name__)

COOKIE = "loader_judge"
POOL_MODES = SEARCH_MODES  # every mode: bm25, vector and the hybrid ones
POOL_DEPTH = 5  # each mode's top results pooled on the page
COMPARE_DEPTH = 10
FIND_MODES = ("bm25", "hybrid-rrf")  # the in-page search: words, or words and meaning
FIND_DEPTH = 10
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
_JS = "text/javascript"
_STATIC = {"judge.js": _JS, "try.js": _JS, "import.js": _JS, "judge.css": "text/css"}
MAX_ID_BYTES = 512  # OpenSearch's limit on a document id: a longer one names nothing


def _id_bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _check_set_id(set_id: str) -> None:
    """An id no OpenSearch document can have (its set's over 512 bytes) is no set's: refused
    before the cluster is asked, which would answer a 400 of its own.

    Raises:
        NotFoundError: the id is too long to be any set's.
    """
    if _id_bytes(f"set-{set_id}") > MAX_ID_BYTES:
        raise NotFoundError(f"query set: no query set has an id of {len(set_id)} characters")


class JudgePages:
    """The handlers of ``/judge``, over serve's ``SearchService`` (its client and embedder)."""

    security_headers = SECURITY_HEADERS

    def __init__(self, service: Any, api_keys: ApiKeys | None) -> None:
        self.service = service
        self.api_keys = api_keys
        self.env = environment()
        # With API keys the signing key is kept beside their file: a restart signs no one out.
        key_file = service.settings.api_keys_file if api_keys is not None else None
        self.sessions = Sessions(session_key(key_file) if key_file else None)
        # The page's own searches are not users' questions: they are not logged.
        self.quiet_settings = dataclasses.replace(service.settings, query_log="off")

    def page(self, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        defaults = {"tenant": "", "csrf": "", "rater": ""}
        html = self.env.get_template(name).render(**defaults | context)
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    def session(self, request: Request) -> tuple[str | None, str]:
        cookie = request.cookies.get(COOKIE, "")
        return self.sessions.tenant(cookie), cookie

    def rater(self, request: Request) -> str:
        """The signed-in rater: the name of the key signed in with (``""`` without keys)."""
        holder = self.sessions.holder(request.cookies.get(COOKIE, ""))
        return holder[1] if holder else ""

    def refused(self, status: int, message: str) -> JSONResponse:
        return JSONResponse({"error": message}, status_code=status, headers=SECURITY_HEADERS)

    def same_origin(self, request: Request) -> bool:
        origin = request.headers.get("origin")
        if origin is None:
            return True  # not sent by every browser on same-origin requests; the token decides
        host = request.headers.get("host", "")
        return urlsplit(origin).netloc == host

    def post_check(self, request: Request) -> tuple[str | None, JSONResponse | None]:
        tenant, cookie = self.session(request)
        if tenant is None:
            return None, self.refused(401, "sign in at /judge/login")
        token = request.headers.get("x-csrf-token", "")
        if not self.same_origin(request) or not same_text(self.sessions.csrf(cookie), token):
            return None, self.refused(403, "missing or wrong same-origin token (X-CSRF-Token)")
        return tenant, None

    def error_page(self, exc: LoaderError, action: str) -> HTMLResponse:
        """``exc`` through serve's one mapping (its status, the safe message), as a page."""
        status, message = error_reply(exc, self.service.secrets, action=action)
        html = self.env.from_string("<!doctype html><title>{{ s }}</title><p>{{ m }}</p>").render(
            s=status, m=message
        )
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    def error_json(self, exc: LoaderError, action: str) -> JSONResponse:
        status, message = error_reply(exc, self.service.secrets, action=action)
        return self.refused(status, message)

    def cluster(self, doing: str) -> Any:
        """opensearch-py's exceptions raised while ``doing`` as the library's (502, 503...)."""
        return cluster_errors(self.service.settings, doing)

    def query_set(self, tenant: str, set_id: str) -> Any:
        """The tenant's query set ``set_id`` (``_check_set_id`` first)."""
        _check_set_id(set_id)
        return judgments.get_query_set(
            self.service.client, self.service.settings.index_name, tenant, set_id
        )

    def ranked(self, tenant: str, question: str, mode: str, depth: int) -> list[Any]:
        request = SearchRequest.from_settings(
            self.quiet_settings,
            question[:MAX_QUESTION_CHARS],
            tenant=tenant,
            mode=mode,
            k=depth,
            rerank=False,
        )
        embedder = self.service.embedder if search_mode(mode).embeds else None
        return search(
            request, self.quiet_settings, client=self.service.client, embedder=embedder
        ).hits

    def static(self, name: str) -> Response:
        if name not in _STATIC:
            return self.refused(404, "not found")
        body = (importlib.resources.files("loader.serve") / "judge_files" / name).read_bytes()
        return Response(body, media_type=_STATIC[name], headers=SECURITY_HEADERS)

    def login_form(self) -> HTMLResponse:
        return self.page("login.html", keyed=self.api_keys is not None, error="")

    async def login(self, request: Request) -> Response:
        if not self.same_origin(request):
            return self.refused(403, "sign in from this server's own page")
        form = parse_qs((await request.body()).decode("utf-8", "replace"))
        rater = ""
        if self.api_keys is not None:
            holder = self.api_keys.holder_for((form.get("key") or [""])[0].strip())
            tenant, rater = holder if holder else (None, "")
            error = "unknown API key"
        else:
            tenant = (form.get("tenant") or [""])[0]
            error = "give a tenant"
            tenant = tenant if tenant and not tenant_problem(tenant) else None
        if tenant is None:
            return self.page("login.html", 401, keyed=self.api_keys is not None, error=error)
        response = RedirectResponse("/judge", status_code=303, headers=SECURITY_HEADERS)
        response.set_cookie(
            COOKIE,
            self.sessions.issue(tenant, rater=rater),
            max_age=SESSION_SECONDS,
            httponly=True,
            samesite="strict",
            path="/judge",
        )
        return response

    def sets_page(self, request: Request) -> Response:
        tenant, cookie = self.session(request)
        if tenant is None:
            return RedirectResponse("/judge/login", status_code=303)
        try:
            client = self.service.client
            items = []
            with self.cluster("listing the query sets"):
                for query_set in judgments.list_query_sets(
                    client, self.service.settings.index_name, tenant
                ):
                    state = judgments.judging_state(
                        client, self.service.settings.index_name, tenant, query_set.set_id
                    )
                    items.append({"set": query_set, "judged": len(state.grades)})
        except LoaderError as exc:
            return self.error_page(exc, "listing the query sets")
        return self.page("sets.html", tenant=tenant, csrf=self.sessions.csrf(cookie), sets=items)

    def resume(self, set_id: str, request: Request) -> Response:
        tenant, cookie = self.session(request)
        if tenant is None:
            return RedirectResponse("/judge/login", status_code=303)
        try:
            with self.cluster("reading a query set"):
                query_set = self.query_set(tenant, set_id)
                state = judgments.judging_state(
                    self.service.client, self.service.settings.index_name, tenant, set_id
                )
        except LoaderError as exc:
            return self.error_page(exc, "reading a query set")
        number = state.resume_at(len(query_set.questions), self.rater(request))
        if number >= len(query_set.questions):
            return self.page(
                "done.html", tenant=tenant, csrf=self.sessions.csrf(cookie), query_set=query_set
            )
        return RedirectResponse(f"/judge/sets/{set_id}/{number}", status_code=303)

    def question_page(
        self,
        set_id: str,
        number: int,
        request: Request,
        find: str = "",
        find_mode: str = "bm25",
        depth: int = POOL_DEPTH,
    ) -> Response:
        """Question ``number``: each mode's top ``depth`` (5, or 10: side by side's ranks 6-10
        too), and with ``find`` the tenant's chunks that search finds (``find_mode``), gradable
        alike: a rater grades what no mode returned."""
        tenant, cookie = self.session(request)
        if tenant is None:
            return RedirectResponse("/judge/login", status_code=303)
        try:
            if find_mode not in FIND_MODES:
                raise ConfigError(f"find_mode: one of {', '.join(FIND_MODES)}")
            if depth not in (POOL_DEPTH, COMPARE_DEPTH):
                raise ConfigError(f"depth: {POOL_DEPTH} or {COMPARE_DEPTH}")
            with self.cluster("reading a question to judge"):
                query_set = self.query_set(tenant, set_id)
                if not 0 <= number < len(query_set.questions):
                    raise NotFoundError(f"question {number} is not in this query set")
                state = judgments.judging_state(
                    self.service.client, self.service.settings.index_name, tenant, set_id
                )
                question = query_set.questions[number]
                rows = pool({m: self.ranked(tenant, question, m, depth) for m in POOL_MODES})
                if find.strip():  # the session's tenant's chunks only, never logged
                    found = self.ranked(tenant, find.strip(), find_mode, FIND_DEPTH)
                    rows = with_found(rows, found)
        except LoaderError as exc:
            return self.error_page(exc, "reading a question to judge")
        graded = rater_grades(state, self.rater(request), number)
        for row in rows:
            row.grade, row.note = graded.get(row.hit.chunk_id, (None, ""))
        return self.page(
            "question.html",
            tenant=tenant,
            rater=self.rater(request),
            csrf=self.sessions.csrf(cookie),
            query_set=query_set,
            number=number,
            count=len(query_set.questions),
            question=question,
            pool=rows,
            grades=GRADE_LABELS,
            skipped=number in state.skipped,
            modes=POOL_MODES,
            need=state.needs.get(number, ""),
            find=find,
            find_mode=find_mode,
            find_modes=FIND_MODES,
            depth=depth,
        )

    async def grade(self, set_id: str, number: int, request: Request) -> Response:
        tenant, refusal = self.post_check(request)
        if refusal is not None:
            return refusal
        assert tenant is not None
        try:
            body = json.loads(await request.body())
            chunk_id, value, note = body["chunk_id"], body["grade"], body.get("note", "")
            if not isinstance(chunk_id, str) or not isinstance(note, str):
                raise ValueError
            if value is not None and value != CANT_TELL and type(value) is not int:
                raise ValueError
        except (ValueError, KeyError, TypeError, AttributeError):
            return self.refused(
                422,
                'send {"chunk_id": "<chunk id>", "grade": 0, 1, 2, null (ungraded) or "?" '
                '(can\'t tell), "note": "<optional; the reason of a can\'t tell>"}',
            )
        if not chunk_id or _id_bytes(chunk_id) > MAX_ID_BYTES:
            return self.refused(422, f"chunk_id: 1 to {MAX_ID_BYTES} bytes (no chunk has another)")
        if first_surrogate(chunk_id):  # a broken escape: OpenSearch refuses it with a 400
            return self.refused(422, "chunk_id: holds a lone surrogate (no chunk's id does)")
        # In a worker thread, as every plain route runs: the cluster calls block, and on the
        # event loop one save waiting on a slow cluster held every request of the server.
        where = (tenant, set_id, number, self.rater(request))
        return await run_in_threadpool(self.save_grade, where, chunk_id, value, note)

    def save_grade(
        self, where: tuple[str, str, int, str], chunk_id: str, value: Any, note: str
    ) -> Response:
        """Store (or clear) the grade of ``where``: (tenant, set id, question, rater)."""
        tenant, set_id, number, rater = where
        try:
            with self.cluster("saving a grade"):
                _check_set_id(set_id)
                where = (self.service.client, self.service.settings.index_name, tenant, set_id)
                if value is None:  # cleared: the grade is deleted
                    judgments.clear_grade(*where, number, chunk_id, rater=rater)
                elif value == CANT_TELL:
                    save_cant_tell(*where, number, chunk_id, note, rater=rater)
                else:
                    note = check_note(note, "note")
                    judgments.save_grade(*where, number, chunk_id, value, rater=rater, note=note)
        except LoaderError as exc:
            return self.error_json(exc, "saving a grade")
        return JSONResponse({"chunk_id": chunk_id, "grade": value})

    def skip(self, set_id: str, number: int, request: Request) -> Response:
        tenant, refusal = self.post_check(request)
        if refusal is not None:
            return refusal
        assert tenant is not None
        try:
            with self.cluster("saving a skip"):
                _check_set_id(set_id)
                judgments.save_skip(
                    self.service.client, self.service.settings.index_name, tenant, set_id, number
                )
        except LoaderError as exc:
            return self.error_json(exc, "saving a skip")
        return JSONResponse({"skipped": number})

    def compare(
        self, set_id: str, number: int, request: Request, a: str = "bm25", b: str = "hybrid-rrf"
    ) -> Response:
        tenant, cookie = self.session(request)
        if tenant is None:
            return RedirectResponse("/judge/login", status_code=303)
        try:
            if a not in SEARCH_MODES or b not in SEARCH_MODES:
                raise ConfigError(f"a, b: modes among {', '.join(SEARCH_MODES)}")
            with self.cluster("comparing two modes"):
                query_set = self.query_set(tenant, set_id)
                if not 0 <= number < len(query_set.questions):
                    raise NotFoundError(f"question {number} is not in this query set")
                question = query_set.questions[number]
                state = judgments.judging_state(
                    self.service.client, self.service.settings.index_name, tenant, set_id
                )
                hits_a = self.ranked(tenant, question, a, COMPARE_DEPTH)
                hits_b = self.ranked(tenant, question, b, COMPARE_DEPTH)
        except LoaderError as exc:
            return self.error_page(exc, "comparing two modes")
        graded = state.mine(self.rater(request)).get(number, {})
        sides = []
        for mode, rows, other, mine in (
            (a, movements(hits_a, hits_b)[0], hits_b, hits_a),
            (b, movements(hits_a, hits_b)[1], hits_a, hits_b),
        ):
            ids = {hit.chunk_id for hit in mine}
            for row in rows:
                row["grade"] = (
                    graded[row["hit"].chunk_id].grade if row["hit"].chunk_id in graded else None
                )
                row["snippet"] = shown((row["hit"].text or row["hit"].body)[:300])
            dropped = [hit for hit in other if hit.chunk_id not in ids]
            sides.append({"mode": mode, "rows": rows, "dropped": dropped})
        return self.page(
            "compare.html",
            tenant=tenant,
            csrf=self.sessions.csrf(cookie),
            query_set=query_set,
            number=number,
            question=question,
            sides=sides,
            modes=SEARCH_MODES,
            a=a,
            b=b,
        )


def add_judge_routes(app: FastAPI, service: Any, api_keys: ApiKeys | None) -> None:
    """Mount ``/judge`` on ``app`` (``service``: serve's ``SearchService``)."""
    pages = JudgePages(service, api_keys)
    app.get("/judge/static/{name}", include_in_schema=False)(pages.static)
    app.get("/judge/login", include_in_schema=False)(pages.login_form)
    app.post("/judge/login", include_in_schema=False)(pages.login)
    app.get("/judge", include_in_schema=False)(pages.sets_page)
    app.get("/judge/sets/{set_id}", include_in_schema=False)(pages.resume)
    add_import_routes(app, ImportPages(pages))  # POST /judge/sets/import, .../<id>/import
    scores = ScorePages(pages)
    add_snapshot_routes(app, SnapshotPages(scores))  # before .../{number}: see there
    add_trial_routes(app, TrialPages(pages))  # likewise
    app.get("/judge/sets/{set_id}/agreement", include_in_schema=False)(scores.agreement_page)
    app.post("/judge/sets/{set_id}/{number}/need", include_in_schema=False)(scores.need)
    app.get("/judge/sets/{set_id}/questions", include_in_schema=False)(scores.questions_page)
    app.get("/judge/sets/{set_id}/export", include_in_schema=False)(scores.export_file)
    app.get("/judge/sets/{set_id}/{number}/scores", include_in_schema=False)(scores.question_scores)
    app.get("/judge/sets/{set_id}/{number}/grades", include_in_schema=False)(scores.question_grades)
    app.get("/judge/sets/{set_id}/{number}", include_in_schema=False)(pages.question_page)
    app.post("/judge/sets/{set_id}/{number}/grade", include_in_schema=False)(pages.grade)
    app.post("/judge/sets/{set_id}/{number}/skip", include_in_schema=False)(pages.skip)
    app.get("/judge/sets/{set_id}/{number}/compare", include_in_schema=False)(pages.compare)
