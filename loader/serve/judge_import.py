"""A judgments file imported on the judging page: ``POST /judge/sets/import?name=<set>`` (into
the session tenant's set of that name) and ``POST /judge/sets/<id>/import`` (into the tenant's
set ``id``, under its name), the file's bytes the body, with the page's token; ``rating_scale``
(a Quepid CSV's top rating, 2 unless given) and ``filename`` (the file's name, for messages)
are parameters. The page's script is ``judge_files/import.js``.

What ``loader judgments import`` does, with its code: the file's format told from its content,
every row checked before anything is written (``loader.eval.judgments.read_judgment_text``: a
questions file, an SRW query set, SRW judgments, or Quepid's ``query,docid,rating``), then
``store_imported``: every graded chunk checked to be the tenant's, the set stored, each grade
stored. A set of that name is replaced as the command replaces it: its questions are the
file's, and the grades it had are kept, each with its own question (``judging_state``; a grade
of the file replaces one given without a rater to the same question and result).

Statuses: 201 and what was imported (the set's id and page, its questions and grades) for a new
set, 200 when one of that name was replaced. 422 for a file that is no judgments file (a bad
row: the message names the file and the line, or the JSON path), for one that is not UTF-8, for
a grade of a chunk that is no chunk of the tenant (nothing is written in any of these), and for
a bad ``name``, ``rating_scale`` or ``filename`` (named); a body over ``MAX_IMPORT_BYTES`` 413
(``loader.serve.responses``); no session 401, no token 403; another tenant's set the 404 of an
unknown set; the cluster down 503. The tenant is always the session's, never a parameter.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from loader.errors import ConfigError, InputError, LoaderError, NotFoundError
from loader.eval.judgments import judgment_format, read_judgment_text, store_imported
from loader.eval.quepid import TOP_GRADE
from loader.query.judgments import check_set_name, find_query_set
from loader.terminal import printable
from loader.userfile import user_text

MAX_FILE_NAME_CHARS = 255  # a file name's longest on the file systems browsers read from


def checked_file_name(filename: str) -> str:
    """How messages name the uploaded file: ``judgments file <its name>``, control characters
    escaped (the name is the browser's, not a path on this server).

    Raises:
        ConfigError: naming ``filename``.
    """
    if len(filename) > MAX_FILE_NAME_CHARS:
        raise ConfigError(f"filename: at most {MAX_FILE_NAME_CHARS} characters")
    return f"judgments file {printable(filename.strip())}" if filename.strip() else "the file"


def check_rating_scale(rating_scale: int, kind: str, name: str) -> None:
    """Refuse what ``loader judgments import --rating-scale`` refuses, naming the parameter:
    a top rating below 1, or a scale other than the page's own for a file that is no CSV (it
    would be ignored)."""
    if rating_scale < 1:
        raise ConfigError(f"rating_scale: the file's top rating, 1 or more, not {rating_scale}")
    if rating_scale != TOP_GRADE and kind != "quepid-csv":
        raise ConfigError(f"rating_scale: applies to a Quepid CSV only ({name} is {kind})")


class ImportPages:
    """The import handlers, over the judging page's ``JudgePages`` (its service and sessions)."""

    def __init__(self, pages: Any) -> None:
        self.pages = pages

    async def into_named(
        self, request: Request, name: str = "", rating_scale: int = TOP_GRADE, filename: str = ""
    ) -> Response:
        """``POST /judge/sets/import?name=...``: a new set, or the one of that name replaced."""
        return await self.receive(request, None, name, rating_scale, filename)

    async def into_set(
        self, set_id: str, request: Request, rating_scale: int = TOP_GRADE, filename: str = ""
    ) -> Response:
        """``POST /judge/sets/<id>/import``: the tenant's set ``id`` replaced (404 if none)."""
        return await self.receive(request, set_id, "", rating_scale, filename)

    async def receive(
        self, request: Request, set_id: str | None, name: str, rating_scale: int, filename: str
    ) -> Response:
        tenant, refusal = self.pages.post_check(request)  # the session and the page's token
        if refusal is not None:
            return refusal
        assert tenant is not None
        body = await request.body()  # at most MAX_IMPORT_BYTES: refused on its declared length
        # In a worker thread, as every plain route runs: the file is parsed, then every graded
        # chunk is looked up and every grade stored, one request each.
        where = (tenant, set_id, name)
        return await run_in_threadpool(self.store, where, body, rating_scale, filename)

    def store(
        self, where: tuple[str, str | None, str], body: bytes, rating_scale: int, filename: str
    ) -> Response:
        """Read the file, then store it into the set ``where`` names: (tenant, set id or
        ``None``, name)."""
        pages = self.pages
        tenant, set_id, name = where
        client, index_name = pages.service.client, pages.service.settings.index_name
        try:
            file_name = checked_file_name(filename)
            if set_id is None:
                check_set_name(name)
            text = user_text(body, file_name)
            check_rating_scale(rating_scale, judgment_format(text)[0], file_name)
            imported = read_judgment_text(text, file_name, rating_scale)  # the CLI's own reading
            with pages.cluster("importing a judgments file"):
                if set_id is not None:
                    name = pages.query_set(tenant, set_id).name  # another tenant's: a 404
                replaced = set_id is not None or self.exists(tenant, name)
                try:
                    query_set, grades = store_imported(client, index_name, tenant, name, imported)
                except NotFoundError as exc:  # a graded chunk: the file is at fault, not the URL
                    raise InputError(f"{file_name}: {exc}; nothing was imported") from None
        except LoaderError as exc:
            return pages.error_json(exc, "importing a judgments file")
        answer = {
            "set_id": query_set.set_id,
            "name": query_set.name,
            "format": imported.format,
            "questions": len(query_set.questions),
            "grades": grades,
            "replaced": replaced,
            "page": f"/judge/sets/{query_set.set_id}",
        }
        status = 200 if replaced else 201
        return JSONResponse(answer, status_code=status, headers=pages.security_headers)

    def exists(self, tenant: str, name: str) -> bool:
        """Whether the tenant has a set named ``name`` (the import replaces it)."""
        service = self.pages.service
        try:
            find_query_set(service.client, service.settings.index_name, tenant, name)
        except NotFoundError:
            return False
        return True


def add_import_routes(app: FastAPI, imports: ImportPages) -> None:
    """Mount the import routes (``loader.serve.responses.IMPORT_PATH`` gives their bodies
    ``MAX_IMPORT_BYTES``)."""
    app.post("/judge/sets/import", include_in_schema=False)(imports.into_named)
    app.post("/judge/sets/{set_id}/import", include_in_schema=False)(imports.into_set)
