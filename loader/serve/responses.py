"""The HTTP answers of ``loader serve`` that are not results: the one mapping of the library's
errors to statuses and ``{"error": ...}`` bodies (``error_reply``, ``loader_error``), the
middleware that answers whatever a route raises through it, and the refusals of requests before
a route sees them (a body too large or of no declared length, a body no parser reads, fields
pydantic refuses).

Example::

    app.middleware("http")(answer_every_error(settings, secret_values(settings)))
"""

from __future__ import annotations

import logging
import re
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

import opensearchpy
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from loader.cluster.client import translate_error
from loader.errors import LoaderError
from loader.redact import scrub_secrets
from loader.settings import Settings

log = logging.getLogger(__name__)

# A search body is small; anything larger is refused before it is parsed.
MAX_BODY_BYTES = 64 * 1024
# But a judgments file uploaded to the judging page (``loader.serve.judge_import``): thousands of
# Quepid ratings; a larger file goes through `loader judgments import` (up to 20 MB).
MAX_IMPORT_BYTES = 2_000_000
IMPORT_PATH = re.compile(r"/judge/sets/(?:[^/]+/)?import")


def error_response(
    status: int, message: str, details: Any = None, headers: Any = None
) -> JSONResponse:
    body: dict[str, Any] = {"error": message}
    if details is not None:
        body["details"] = details
    return JSONResponse(status_code=status, content=body, headers=headers)


def _read_as_json(content_type: str | None) -> bool:
    """Whether FastAPI reads a body of ``content_type`` as JSON (none, ``application/json`` or
    ``application/*+json``); any other body reaches validation unread."""
    if not content_type:
        return True
    media = content_type.split(";", 1)[0].strip().lower()
    kind, _, subtype = media.partition("/")
    return kind == "application" and (subtype == "json" or subtype.endswith("+json"))


def _validation_message(
    errors: list[dict[str, Any]], content_type: str | None = None
) -> tuple[str, list[dict[str, Any]]]:
    """One readable line (``tenant: Field required; k: Input should be a valid integer``) and the
    errors without their echoed input (which could be megabytes). A fault of the whole body
    says what to send: pydantic's own words for it name no field."""
    parts, details = [], []
    for error in errors:
        location = ".".join(str(part) for part in error.get("loc", ()) if part != "body")
        message = error.get("msg", "invalid")
        whole_body = tuple(error.get("loc", ())) == ("body",)
        if error.get("type") == "json_invalid":
            # pydantic's location is the offset of the fault in the body, not a field.
            location = ""
            message = f"the body is not valid JSON ({error.get('ctx', {}).get('error', '')})"
        elif whole_body and not _read_as_json(content_type):  # e.g. curl -d without -H
            message = (
                f"the body was not read as JSON (Content-Type: {content_type[:60]!r}); send "
                "Content-Type: application/json"
            )
        elif whole_body and error.get("type") == "missing":
            message = "the body is empty; send a JSON object"
        elif whole_body:  # pydantic's words kept: callers may match them
            message = f"the body must be a JSON object ({{...}}): {message}"
        parts.append(f"{location}: {message}" if location else message)
        details.append({"field": location, "message": message, "type": error.get("type")})
    return "; ".join(parts), details


def error_reply(
    exc: LoaderError, secrets: list[str], status: int | None = None, action: str = "search"
) -> tuple[int, str]:
    """The one mapping of the library's errors to HTTP: each class's status (or ``status``), and
    its message only where it is safe to show (never the cluster's URL or internals; the log has
    them, naming the ``action`` that failed). Both pass through ``scrub_secrets``: a message may
    quote the cluster's answer (a 400's reason), and a cluster or the proxy in front of it may
    echo the request's credentials in it. ``loader_error`` answers it as JSON, the judging page
    as HTML."""
    status = exc.http_status if status is None else status
    if status >= 500:
        log.warning("%s failed: %s", action, scrub_secrets(str(exc), secrets))
    return status, scrub_secrets(exc.public_message, secrets)


def loader_error(
    exc: LoaderError, secrets: list[str], status: int | None = None, action: str = "search"
) -> JSONResponse:
    """``error_reply`` as the API's ``{"error": ...}`` body."""
    return error_response(*error_reply(exc, secrets, status, action))


def as_loader_error(exc: Exception, settings: Settings, doing: str) -> LoaderError:
    """Whatever a route raised as a library error: a ``LoaderError`` as it is, opensearch-py's
    exceptions as ``translate_error`` names them (an upstream 400, 429 or page: 502 or 503), and
    anything else as the server's failure, its text kept for the log only."""
    if isinstance(exc, LoaderError):
        return exc
    if isinstance(exc, opensearchpy.TransportError | opensearchpy.SerializationError):
        return translate_error(exc, settings, doing)
    return LoaderError(f"unexpected {type(exc).__name__} while {doing}: {exc}")


def answer_every_error(
    settings: Settings, secrets: list[str]
) -> Callable[[Request, Callable[[Request], Awaitable[Any]]], Awaitable[Any]]:
    """A middleware that answers what any route raised through ``loader_error``, its traceback
    logged with the secrets masked: nothing reaches uvicorn, whose log would print it whole."""

    async def answer_errors(
        request: Request, call_next: Callable[[Request], Awaitable[Any]]
    ) -> Any:
        try:
            return await call_next(request)
        except Exception as exc:
            doing = f"answering {request.method} {request.url.path[:200]}"
            error = as_loader_error(exc, settings, doing)
            if error is not exc:
                trace = "".join(traceback.format_exception(exc))
                log.warning("%s", scrub_secrets(trace.rstrip("\n"), secrets))
            return loader_error(error, secrets, action=doing)

    return answer_errors


async def invalid_request(request: Request, exc: Exception) -> JSONResponse:
    """422 with one line naming every field pydantic refused."""
    assert isinstance(exc, RequestValidationError)
    content_type = request.headers.get("content-type")
    message, details = _validation_message(list(exc.errors()), content_type)
    return error_response(422, message, details)


_BODY_PARSE_FAILURE = "There was an error parsing the body"  # FastAPI's 400, raised from the cause


def _unparsable_body(exc: Exception) -> str:
    """Why a body never reached JSON validation: the one line FastAPI's "There was an error
    parsing the body" hides."""
    if isinstance(exc, UnicodeDecodeError):
        return "the body is not valid UTF-8"
    if isinstance(exc, RecursionError):
        return "the body is not valid JSON (nested too deeply)"
    return f"the body is not valid JSON ({type(exc).__name__})"  # e.g. an integer of 5,000 digits


async def http_error(_request: Request, exc: Exception) -> JSONResponse:
    """Starlette's own errors (404, 405, a body FastAPI cannot parse) in the API's error shape,
    ``{"error": ...}``; a body that cannot be parsed is the caller's fault, like malformed JSON:
    422."""
    assert isinstance(exc, StarletteHTTPException)
    if exc.detail == _BODY_PARSE_FAILURE and exc.__cause__ is not None:
        message = _unparsable_body(exc.__cause__)
        return error_response(
            422, message, [{"field": "", "message": message, "type": "body_unparsable"}]
        )
    return error_response(exc.status_code, str(exc.detail), headers=exc.headers)


async def limit_body_size(request: Request, call_next: Callable[[Request], Awaitable[Any]]) -> Any:
    """Refuse a body before it is read: a declared length over the limit (413; a judgments file
    uploaded to the judging page has its own, ``MAX_IMPORT_BYTES``), or no length at all on a
    POST (411). A Transfer-Encoding is refused whatever the Content-Length says: the
    HTTP parser then reads the body as chunked, to any length, and the declared length means
    nothing."""
    length = request.headers.get("content-length")
    if "transfer-encoding" in request.headers:
        return error_response(411, "send a Content-Length header and no Transfer-Encoding")
    if request.method == "POST":
        if length is None or not length.isdigit():
            return error_response(411, "send a Content-Length header")
        if IMPORT_PATH.fullmatch(request.url.path):
            if int(length) > MAX_IMPORT_BYTES:
                return error_response(
                    413,
                    f"the file is larger than {MAX_IMPORT_BYTES:,} bytes: import it with "
                    "`loader judgments import`",
                )
        elif int(length) > MAX_BODY_BYTES:
            return error_response(413, f"the body is larger than {MAX_BODY_BYTES} bytes")
    return await call_next(request)
