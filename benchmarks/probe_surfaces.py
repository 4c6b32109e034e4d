"""The surfaces issue #44 added, probed for ``probe_hostile.py``: the judging page (``/judge``),
``POST /events`` and ``GET /log``, ``loader judgments import`` and the framework retrievers
(``loader.integrations``). Each ``probe_*`` returns counts for the probe's summary; its keys
say which must be zero ("5xx", "cross-tenant", "secrets printed", "hangs", "exit 1",
"not exit 2", "unexpected exceptions", "bare 500s").

Cross-tenant: tenants ``acme`` and ``globex`` each have chunks and a query set whose question
holds words only they use. A chunk id, a question or one of those words of ``globex`` in an
answer to ``acme`` (that ``acme`` did not send itself) is a hit; so is ``acme`` grading a
chunk of ``globex``, reading a set of ``globex`` or recording an event on its search.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import re
import subprocess
import sys
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import quote

from loader.errors import LoaderError
from loader.query.judgments import create_query_set
from loader.serve.app import create_app
from loader.settings import Settings
from tests.hostile_upstream import BODY_KINDS, EchoUpstream, shown_credential
from tests.integration.serve.http_server import Server
from tests.integration.serve.test_serve_hostile_upstream import ServeProcess

COMMAND_SECONDS = 60  # the most one `loader judgments import` may take: past it, a hang
HTTP_SECONDS = 120  # the most one request may take (a question page searches 5 modes): a hang
HUNG_REQUESTS: list[str] = []  # what ``call`` sent that got no answer in time
SET_NAME = "probe-set"
UPSTREAM_STATUSES = ((400, None), (401, None), (403, None), (429, None), (500, None))
UPSTREAM_STATUSES += ((502, None), (503, None), (200, "page"))

# Path segments a client may send for a set id or a question number.
HOSTILE_IDS = [
    "s" * 5000,
    quote("é" * 1500, safe=""),
    quote("\U0001f600" * 300, safe=""),
    "..",
    "%2e%2e",
    "%00",
    "a%00b",
    quote("{{tenant}}", safe=""),
    quote('{"match_all":{}}', safe=""),
    "*",
    "%ff%fe",
    quote("\ud800", safe="", errors="surrogatepass"),
]
HOSTILE_NUMBERS = ["-1", "99999999999999999999999999", "x", "1e3", "0x1", "%00", "1.5", "9" * 5000]
HOSTILE_GRADES: list[Any] = [
    {"grade": 3},
    {"grade": -1},
    {"grade": "2"},
    {"grade": 2.0},
    {"grade": True},
    {"grade": None},
    {"grade": [2]},
    {"grade": 10**30},
    {"chunk_id": "c" * 5000, "grade": 1},
    {"chunk_id": "é" * 300, "grade": 1},
    {"chunk_id": "\ud800", "grade": 1},
    {"chunk_id": "*", "grade": 1},
    {"chunk_id": ["x"], "grade": 1},
    {"chunk_id": {"term": {}}, "grade": 1},
    {"grade": 1},
    "not json",
    "[" * 100_000,
    '{"chunk_id": "x", "grade": 1e400}',
    '{"chunk_id": "x", "grade": ' + "9" * 5000 + "}",
    b'{"chunk_id": "\xff\xfe", "grade": 1}',
    "",
    "null",
]
COMPARE_QUERIES = [
    "?a=sql&b=bm25",
    "?a=&b=",
    "?a=bm25&a=vector&b=" + "x" * 5000,
    "?a=" + quote("{{a}}", safe=""),
    "?a=%00",
]
HOSTILE_EVENTS: list[Any] = [
    {"query_id": "*", "action_name": "click"},
    {"query_id": '{"match_all":{}}', "action_name": "click"},
    {"query_id": "é" * 60, "action_name": "click"},
    {"query_id": "\ud800", "action_name": "click"},
    {"query_id": "x", "action_name": "click", "position": 0},
    {"query_id": "x", "action_name": "click", "position": 10**30},
    {"query_id": "x", "action_name": "click", "position": "1"},
    {"query_id": "x", "action_name": "a" * 5000},
    {"query_id": "x", "action_name": "click", "object_id": "o" * 5000},
    {"query_id": "x", "action_name": "click", "client_id": ["c"]},
    {"query_id": "x", "action_name": "click", "tenant": ["acme", "globex"]},
    {"query_id": "x", "action_name": "click", "tenant": "*"},
    {"query_id": "x", "action_name": "click", "tenant": "a" * 5000},
    {"query_id": "x", "action_name": "click", "tenant": ""},
    "[" * 100_000,
    b'{"query_id": "\xff", "action_name": "click"}',
    '{"query_id": "x", "action_name": "click", "position": 1e400}',
    "not json",
]
HOSTILE_LOG_QUERIES = [
    "?limit=0",
    "?limit=1e3",
    "?limit=" + "9" * 5000,
    "?tenant=*",
    "?tenant=acme*",
    "?tenant=",
    "?tenant=%00",
    "?tenant=%ff",
    "?tenant=" + "a" * 5000,
    "?tenant=acme&tenant=globex",
    "?tenant=globex",
    "?tenant=" + quote('{"match_all":{}}', safe=""),
]


# -- HTTP ----------------------------------------------------------------------------------


def call(
    port: int, method: str, path: str, body: Any = None, headers: dict | None = None
) -> tuple[int, str, dict[str, str]]:
    """One request to 127.0.0.1:``port``: status, body text and headers (lower-cased)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=HTTP_SECONDS)
    try:
        data = json.dumps(body) if isinstance(body, dict | list) else body
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogatepass")
        sent = {"Content-Type": "application/json", **(headers or {})}
        if method == "POST":
            sent["Content-Length"] = str(len(data or b""))
        connection.putrequest(method, path, skip_accept_encoding=True)
        for name, value in sent.items():
            connection.putheader(name, value)
        connection.endheaders(data)
        response = connection.getresponse()
        text = response.read().decode("utf-8", "replace")
        return response.status, text, {k.lower(): v for k, v in response.getheaders()}
    except TimeoutError:  # no answer in time: a hang, counted, and the probe goes on
        HUNG_REQUESTS.append(f"{method} {path[:80]}")
        print(f"  no answer in {HTTP_SECONDS} s: {method} {path[:80]}", file=sys.stderr)
        return 0, "", {}
    finally:
        connection.close()


def sign_in(port: int, form: str) -> tuple[str, str]:
    """The session cookie and the page's CSRF token of a sign-in with ``form``."""
    status, _text, headers = call(
        port, "POST", "/judge/login", form, {"Content-Type": "application/x-www-form-urlencoded"}
    )
    assert status == 303, (status, _text)
    cookie = headers["set-cookie"].split(";")[0].partition("=")[2]
    _status, page, _headers = call(
        port, "GET", "/judge", None, {"Cookie": f"loader_judge={cookie}"}
    )
    token = re.search(r'name="csrf-token" content="([^"]+)"', page)
    assert token, page[:300]
    return cookie, token.group(1)


def _shown_5xx(status: int, what: str, sent: Any, text: str) -> bool:
    """Whether ``status`` is a 5xx, printed with what was sent when it is."""
    if status >= 500:
        print(f"  {status} for {what} {str(sent)[:120]!r}: {text[:200]!r}", file=sys.stderr)
    return status >= 500


# -- tenants' data -------------------------------------------------------------------------


class World:
    """Both tenants' query sets and chunk ids, and what of ``globex`` ``acme`` must never see."""

    def __init__(self, client: Any, settings: Settings, questions: dict[str, str]) -> None:
        self.sets = {}
        self.chunks: dict[str, list[str]] = {}
        client.indices.refresh(index=settings.index_name)
        for tenant, question in questions.items():
            self.sets[tenant] = create_query_set(
                client,
                settings.index_name,
                tenant,
                SET_NAME,
                strategy="imported",
                questions=[question],
            ).set_id
            body = {"query": {"term": {"tenant": tenant}}, "size": 100, "_source": ["chunk_id"]}
            hits = client.search(index=settings.index_name, body=body)["hits"]["hits"]
            self.chunks[tenant] = [hit["_source"]["chunk_id"] for hit in hits]
        self.questions = questions

    def markers(self, tenant: str) -> list[str]:
        """What only ``tenant`` has: its chunk ids, its question and the long words only it
        uses (in its question and its private document)."""
        words = [word for word in self.questions[tenant].split() if len(word) >= 10]
        return [*self.chunks[tenant], self.questions[tenant], *words]

    def leaked(self, text: str, other: str, sent: str) -> bool:
        """Whether ``text`` holds something of ``other`` that the request did not send."""
        return any(marker in text and marker not in sent for marker in self.markers(other))


def judge_requests(world: World, tenant: str, other: str) -> list[tuple[str, str, Any]]:
    """(method, path, body) of the judging page's routes with hostile ids and bodies, and with
    the other tenant's set and chunks."""
    own, theirs = world.sets[tenant], world.sets[other]
    chunk = world.chunks[tenant][0]
    requests: list[tuple[str, str, Any]] = [
        ("GET", "/judge", None),
        ("GET", f"/judge/sets/{own}", None),
        ("GET", f"/judge/sets/{own}/0", None),
        ("GET", f"/judge/sets/{own}/0/compare", None),
        ("POST", f"/judge/sets/{own}/0/grade", {"chunk_id": chunk, "grade": 2}),
        ("POST", f"/judge/sets/{own}/0/skip", {}),
    ]
    for set_id in [theirs, *HOSTILE_IDS]:
        requests += [
            ("GET", f"/judge/sets/{set_id}", None),
            ("GET", f"/judge/sets/{set_id}/0", None),
            ("GET", f"/judge/sets/{set_id}/0/compare?a=bm25&b=vector", None),
            ("POST", f"/judge/sets/{set_id}/0/grade", {"chunk_id": chunk, "grade": 1}),
            ("POST", f"/judge/sets/{set_id}/0/skip", {}),
        ]
    for number in HOSTILE_NUMBERS:
        requests += [
            ("GET", f"/judge/sets/{own}/{number}", None),
            ("GET", f"/judge/sets/{own}/{number}/compare", None),
            ("POST", f"/judge/sets/{own}/{number}/grade", {"chunk_id": chunk, "grade": 1}),
            ("POST", f"/judge/sets/{own}/{number}/skip", {}),
        ]
    for their_chunk in world.chunks[other][:3]:
        requests.append(
            ("POST", f"/judge/sets/{own}/0/grade", {"chunk_id": their_chunk, "grade": 2})
        )
    for body in HOSTILE_GRADES:
        if isinstance(body, dict) and "chunk_id" not in body:
            body = {"chunk_id": chunk, **body}
        requests.append(("POST", f"/judge/sets/{own}/0/grade", body))
    requests += [("GET", f"/judge/sets/{own}/0/compare{q}", None) for q in COMPARE_QUERIES]
    requests += [("GET", f"/judge/static/{name}", None) for name in ("..%2fapp.py", "x" * 5000)]
    return requests


FORGED_COOKIES = [
    "",
    "x",
    "YWNtZQ.9999999999.00",
    "Z2xvYmV4.9999999999." + "0" * 64,
    "a.b.c.d",
    "é.1.é",
    "YWNtZQ.-1." + "0" * 64,
    "YWNtZQ." + "9" * 5000 + ".00",
]
FORGED_TOKENS = ["", "x" * 64, "é" * 64, "0" * 5000]


def _judge_session_probes(
    port: int, world: World, sessions: dict[str, tuple[str, str]], counts: dict[str, int]
) -> None:
    """acme's routes with its session and hostile input; then forged and swapped cookies and
    tokens (none may act for any tenant)."""
    cookie, token = sessions["acme"]
    their_cookie, their_token = sessions["globex"]
    own = world.sets["acme"]
    for method, path, body in judge_requests(world, "acme", "globex"):
        headers = {"Cookie": f"loader_judge={cookie}", "X-CSRF-Token": token}
        status, text, _headers = call(port, method, path, body, headers)
        counts["requests"] += 1
        counts["5xx"] += _shown_5xx(status, f"{method} {path}", body, text)
        sent = f"{path} {body!r}"
        crossed = world.leaked(text, "globex", sent)
        crossed |= status == 200 and world.sets["globex"] in path
        crossed |= status == 200 and any(c in sent for c in world.chunks["globex"])
        counts["cross-tenant"] += crossed
    chunk = world.chunks["acme"][0]
    posts = (f"/judge/sets/{own}/0/grade", f"/judge/sets/{own}/0/skip")
    for forged in [*FORGED_COOKIES, their_cookie]:
        for path in posts:
            for tok in [token, their_token, *FORGED_TOKENS]:
                headers = {"Cookie": f"loader_judge={forged}", "X-CSRF-Token": tok}
                status, text, _h = call(
                    port, "POST", path, {"chunk_id": chunk, "grade": 2}, headers
                )
                counts["requests"] += 1
                counts["5xx"] += status >= 500
                counts["cross-tenant"] += status == 200  # a forged or another's session acted
        for path in ("/judge", f"/judge/sets/{own}/0", f"/judge/sets/{own}/0/compare"):
            status, text, _h = call(port, "GET", path, None, {"Cookie": f"loader_judge={forged}"})
            counts["requests"] += 1
            counts["5xx"] += _shown_5xx(status, f"GET {path}", forged, text)
            counts["cross-tenant"] += status == 200 and world.leaked(text, "acme", path)
    unsafe = (
        {"Cookie": f"loader_judge={cookie}"},  # no CSRF token
        {"Cookie": f"loader_judge={cookie}", "X-CSRF-Token": token, "Origin": "http://evil"},
        {"Cookie": f"loader_judge={cookie}", "X-CSRF-Token": "\xe9" * 64},
        {"Cookie": f"loader_judge={cookie}", "X-CSRF-Token": their_token},
    )
    for headers in unsafe:  # each must be refused: a cross-site post could act for acme
        status, text, _h = call(port, "POST", posts[0], {"chunk_id": chunk, "grade": 2}, headers)
        counts["requests"] += 1
        counts["5xx"] += _shown_5xx(status, f"POST {posts[0]}", headers, text)
        counts["accepted without a valid token"] += status == 200
    # Both sessions' cookies at once: whichever the server reads, nothing of globex shows.
    both = {"Cookie": f"loader_judge={cookie}; loader_judge={their_cookie}", "X-CSRF-Token": token}
    for method, path in (("GET", f"/judge/sets/{own}/0"), ("POST", posts[0])):
        body = {"chunk_id": chunk, "grade": 2} if method == "POST" else None
        status, text, _h = call(port, method, path, body, both)
        counts["requests"] += 1
        counts["5xx"] += _shown_5xx(status, f"{method} {path}", both, text)
        counts["cross-tenant"] += world.leaked(text, "globex", "")


LOGIN_FORMS = [
    "",
    "tenant=",
    "tenant=*",
    "tenant=" + "a" * 10000,
    "tenant=acme%00",
    "tenant=%ff%fe",
    "tenant=%20acme",
    "key=",
    "key=wrong-key-0123456789abcdef",
    "key=" + "k" * 10000,
    "key=%ff",
    b"tenant=\xff\xfe",
    "tenant=acme&tenant=globex",
    "&&&===",
]


def _login_probes(port: int, counts: dict[str, int]) -> None:
    for form in LOGIN_FORMS:
        for extra in ({}, {"Origin": "http://evil"}):
            headers = {"Content-Type": "application/x-www-form-urlencoded", **extra}
            status, _text, _h = call(port, "POST", "/judge/login", form, headers)
            counts["requests"] += 1
            counts["5xx"] += _shown_5xx(status, "POST /judge/login", form, _text)


def probe_judge(
    client: Any, settings: Settings, embedder: Any, keys: dict, keys_file: Path, world: World
) -> dict:
    """The judging page, with API keys and without, for ``acme`` with hostile input."""
    counts = {"requests": 0, "5xx": 0, "cross-tenant": 0, "accepted without a valid token": 0}
    counts["controls"] = 0
    for keyed in (True, False):
        serve_settings = settings.replace(api_keys_file=str(keys_file) if keyed else "")
        app = create_app(serve_settings, client=client, embedder=embedder)
        with Server(app) as server:
            form = (lambda t: f"key={keys[t]}") if keyed else (lambda t: f"tenant={t}")
            sessions = {tenant: sign_in(server.port, form(tenant)) for tenant in keys}
            # The detector's control: globex's own question page shows what marks globex.
            cookie, _token = sessions["globex"]
            path = f"/judge/sets/{world.sets['globex']}/0"
            _s, text, _h = call(
                server.port, "GET", path, None, {"Cookie": f"loader_judge={cookie}"}
            )
            counts["controls"] += world.leaked(text, "globex", "")
            _judge_session_probes(server.port, world, sessions, counts)
            _login_probes(server.port, counts)
    return {
        "judge requests": counts["requests"],
        "judge leak-detector controls that saw globex's page (of 2)": counts["controls"],
        "judge 5xx for client input": counts["5xx"],
        "judge cross-tenant hits": counts["cross-tenant"],
        "judge posts accepted without a valid token (cross-tenant)": counts[
            "accepted without a valid token"
        ],
    }


# -- /events and /log ----------------------------------------------------------------------


def probe_events(
    client: Any, settings: Settings, embedder: Any, keys: dict, keys_file: Path, world: World
) -> dict:
    """``POST /events`` and ``GET /log`` of ``acme`` with hostile bodies and parameters and
    ``globex``'s query ids."""
    requests = errors = crossed = controls = 0
    for keyed in (True, False):
        serve_settings = settings.replace(api_keys_file=str(keys_file) if keyed else "")
        app = create_app(serve_settings, client=client, embedder=embedder)
        with Server(app) as server:
            heads = {t: ({"X-API-Key": keys[t]} if keyed else {}) for t in keys}
            search = {"question": world.questions["globex"], "mode": "bm25", "rerank": False}
            search |= {} if keyed else {"tenant": "globex"}
            _s, text, _h = call(server.port, "POST", "/search", search, heads["globex"])
            their_query = json.loads(text)["query_id"]
            assert their_query, text
            log_query = "" if keyed else "?tenant=globex"
            _s, text, _h = call(server.port, "GET", f"/log{log_query}", None, heads["globex"])
            controls += their_query in text and world.leaked(text, "globex", "")
            acme = {} if keyed else {"tenant": "acme"}
            bodies: list[Any] = [
                {"query_id": their_query, "action_name": "click", **acme},
                {"query_id": their_query, "action_name": "answered", "tenant": "globex"},
                {"query_id": their_query, "action_name": "click", "position": 1, **acme},
                *[
                    b | acme if isinstance(b, dict) and "tenant" not in b else b
                    for b in HOSTILE_EVENTS
                ],
            ]
            for body in bodies:
                if not keyed and "globex" in str(body):
                    continue  # without keys the body names the tenant: it may name globex
                status, text, _h = call(server.port, "POST", "/events", body, heads["acme"])
                requests += 1
                errors += _shown_5xx(status, "POST /events", body, text)
                crossed += status == 201 and their_query in str(body)
                crossed += world.leaked(text, "globex", str(body))
            for query in HOSTILE_LOG_QUERIES + ([""] if keyed else ["?tenant=acme"]):
                if not keyed and "globex" in query:
                    continue  # likewise
                status, text, _h = call(server.port, "GET", f"/log{query}", None, heads["acme"])
                requests += 1
                errors += _shown_5xx(status, "GET /log", query, text)
                crossed += world.leaked(text, "globex", "") or (
                    status == 200 and their_query in text
                )
    return {
        "events/log requests": requests,
        "events/log leak-detector controls that saw globex's log (of 2)": controls,
        "events/log 5xx for client input": errors,
        "events/log cross-tenant hits": crossed,
    }


# -- the routes behind the echoing upstream ------------------------------------------------


def few(cases: Any, quick: bool, count: int = 1) -> list[Any]:
    """``cases``, or with ``quick`` their first ``count``: a smoke run of a probe
    (``probe_hostile.py --quick``) shows that it runs, not that nothing leaks."""
    cases = list(cases)
    return cases[:count] if quick else cases


def upstream_routes(set_id: str) -> list[tuple[str, str, Any]]:
    search = {"question": "refund", "tenant": "A", "mode": "bm25", "rerank": False}
    return [
        ("POST", "/search", search),
        ("GET", "/health", None),
        ("POST", "/events", {"query_id": "q-1", "action_name": "click"}),
        ("POST", "/events", {"query_id": "*", "action_name": "click", "position": 1}),
        ("GET", "/log", None),
        ("GET", "/log?limit=5&tenant=A", None),
        ("GET", "/judge", None),
        ("GET", f"/judge/sets/{set_id}", None),
        ("GET", f"/judge/sets/{set_id}/0", None),
        ("GET", f"/judge/sets/{set_id}/0/compare?a=bm25&b=vector", None),
        ("POST", f"/judge/sets/{set_id}/0/grade", {"chunk_id": "c-1", "grade": 2}),
        ("POST", f"/judge/sets/{set_id}/0/skip", {}),
        ("GET", "/judge/sets/" + "s" * 5000 + "/0", None),
        ("POST", f"/judge/sets/{set_id}/0/grade", {"chunk_id": "é" * 300, "grade": 1}),
    ]


def probe_serve_upstream(work: Path, quick: bool = False) -> dict:
    """Every route of ``loader serve`` (with and without ``--debug``, the password in the
    settings or in the URL) behind the echoing upstream, at each status and body kind (with
    ``quick``, the first of each)."""
    bodies = printed = bare = 0
    with EchoUpstream(banner=True) as upstream:
        for number, (debug, in_url) in enumerate(
            few(((True, False), (False, False), (True, True), (False, True)), quick)
        ):
            folder = work / f"serve-upstream-{number}"
            folder.mkdir()
            upstream.answer(400, "json")
            server = ServeProcess(upstream, folder, debug, in_url)
            try:
                server.sign_in()
                for status, only in few(UPSTREAM_STATUSES, quick):
                    for kind in few((only,) if only else BODY_KINDS, quick):
                        upstream.answer(status, kind)
                        for method, path, body in upstream_routes("0123456789abcdef0123"):
                            answered, text = server.raw(method, path, body)
                            bodies += 1
                            printed += shown_credential(text) is not None
                            bare += answered == 500
            finally:
                server.stop()
            output = server.output()
            bodies += 1
            printed += shown_credential(output) is not None
            bare += "Exception in ASGI application" in output
    return {
        "serve bodies and logs behind the echoing upstream": bodies,
        "serve secrets printed (bodies, stderr, --debug or not)": printed,
        "serve bare 500s behind the echoing upstream": bare,
    }


# -- loader judgments import ---------------------------------------------------------------


def hostile_judgment_files(folder: Path, outside: Path) -> list[Path]:
    """Files no import may take, each to be refused with exit code 2 naming it."""
    folder.mkdir()
    ratings = '{"judgmentRatings": [{"query": "q", "ratings": [%s]}]}'
    texts: dict[str, str | bytes] = {
        "infinity.json": ratings % '{"docId": "c", "rating": Infinity}',
        "big-number.json": ratings % '{"docId": "c", "rating": 1e400}',
        "big-string.json": ratings % '{"docId": "c", "rating": "1e400"}',
        "nan.json": ratings % '{"docId": "c", "rating": NaN}',
        "nan-string.json": ratings % '{"docId": "c", "rating": "NaN"}',
        "huge-int.json": ratings % ('{"docId": "c", "rating": ' + "9" * 5000 + "}"),
        "rating-list.json": ratings % '{"docId": "c", "rating": [1]}',
        "rating-bool.json": ratings % '{"docId": "c", "rating": true}',
        "ratings-number.json": ratings % "5",
        "ratings-string.json": '{"judgmentRatings": [{"query": "q", "ratings": "x"}]}',
        "ratings-object.json": '{"judgmentRatings": [{"query": "q", "ratings": {"a": 1}}]}',
        "no-docid.json": ratings % '{"rating": 1}',
        "docid-number.json": ratings % '{"docId": 5, "rating": 1}',
        "no-query.json": '{"judgmentRatings": [{"ratings": []}]}',
        "set-not-list.json": '{"querySetQueries": 5}',
        "set-text-number.json": '{"querySetQueries": [{"queryText": 5}]}',
        "questions-grade.jsonl": '{"question": "q", "judgments": [{"chunk_id": "c", "grade": '
        + "1e400}]}\n",
        "questions-judgments-object.jsonl": '{"question": "q", "judgments": {"chunk_id": "c"}}\n',
        "questions-line-list.jsonl": "[1, 2]\n",
        "deep.jsonl": "[" * 100_000 + "\n",
        "invalid-utf8.jsonl": b'{"question": "\xff\xfe"}\n',
        "nul.jsonl": b'{"question": "a"}\x00\n',
        "empty.jsonl": "",
        "lone-surrogate.jsonl": '{"question": "\\ud800"}\n',
        "not-json.jsonl": "question: what?\n",
    }
    files = []
    for name, text in texts.items():
        path = folder / name
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
        files.append(path)
    fifo = folder / "fifo.jsonl"
    os.mkfifo(fifo)
    huge = folder / "huge.jsonl"
    with huge.open("wb") as handle:
        handle.truncate(300_000_000)  # sparse: no disk used
    links = {
        "link-outside.jsonl": outside,
        "link-zero.jsonl": Path("/dev/zero"),
        "link-fifo.jsonl": fifo,
        "link-dangling.jsonl": folder / "nowhere",
    }
    for name, target in links.items():
        (folder / name).symlink_to(target)
        files.append(folder / name)
    return [*files, fifo, huge, Path("/dev/zero"), folder]


def probe_import(
    url: str,
    index: str,
    work: Path,
    outside: Path,
    environment: dict[str, str],
    quick: bool = False,
) -> dict:
    """``loader judgments import`` of each hostile file (with ``quick``, the first two), with a
    time bound."""
    counts = {"files": 0, "hangs": 0, "exit 1": 0, "not exit 2": 0, "unnamed": 0}
    for path in few(hostile_judgment_files(work / "judgment-files", outside), quick, 2):
        command = [sys.executable, "-m", "loader", "judgments", "import", str(path)]
        command += ["--tenant", "acme", "--name", "imported"]
        counts["files"] += 1
        try:
            done = subprocess.run(
                command,
                cwd=work,
                env={**environment, "OPENSEARCH_URL": url, "LOADER_INDEX_NAME": index},
                capture_output=True,
                text=True,
                timeout=COMMAND_SECONDS,
            )
        except subprocess.TimeoutExpired:
            counts["hangs"] += 1
            print(f"  import {path.name}: no end within {COMMAND_SECONDS} s", file=sys.stderr)
            continue
        counts["exit 1"] += done.returncode == 1
        counts["not exit 2"] += done.returncode != 2
        named = path.name in done.stderr
        counts["unnamed"] += not named
        if done.returncode != 2 or not named:
            print(
                f"  import {path.name}: exit {done.returncode}: {done.stderr.strip()[-300:]}",
                file=sys.stderr,
            )
    return {
        "judgments import files": counts["files"],
        "judgments import hangs": counts["hangs"],
        "judgments import exit 1 crashes": counts["exit 1"],
        "judgments import not exit 2": counts["not exit 2"],
        "judgments import messages not naming the file (missed)": counts["unnamed"],
    }


# -- the retrievers ------------------------------------------------------------------------

HOSTILE_TENANTS: list[Any] = [
    None,
    "",
    " ",
    "*",
    "glob*",
    "g?obex",
    "globex*",
    "acme globex",
    ["acme", "globex"],
    {"acme": 1},
    "acme\x00",
    "a" * 5000,
    5,
]
HOSTILE_CALLS: list[dict[str, Any]] = [
    {},
    {"k": 0},
    {"k": -1},
    {"k": 10**9},
    {"k": "5"},
    {"k": 1.5},
    {"k": True},
    {"filters": {"tenant": "globex"}},
    {"filters": {"tags": ["*"]}},
    {"filters": {"tags": "*"}},
    {"filters": {"tags": [None]}},
    {"filters": {"tags": 5}},
    {"filters": {"lang": 'en"}}]}},"query":{"match_all":{}},"x":{"y":"'}},
    {"filters": {"lang": ["en", "de"]}},
    {"filters": {"published_from": "not a date"}},
    {"filters": {"decay_scale": "-5d"}},
    {"filters": "tenant:globex"},
    {"filters": ["globex"]},
    {"tenant": "globex"},
]


def _frameworks() -> dict[str, Any]:
    """Each framework's retriever class and how one call is made with ``k`` and ``filters``."""
    from loader.integrations.haystack import LoaderRetriever as HaystackRetriever
    from loader.integrations.langchain import LoaderRetriever as LangChainRetriever
    from loader.integrations.llamaindex import LoaderRetriever as LlamaIndexRetriever

    def haystack_call(retriever: Any, question: str, call: dict) -> list[dict]:
        extra = {"top_k" if key == "k" else key: value for key, value in call.items()}
        return [doc.meta for doc in retriever.run(question, **extra)["documents"]]

    def langchain_call(retriever: Any, question: str, call: dict) -> list[dict]:
        return [doc.metadata for doc in retriever.invoke(question, **call)]

    def llamaindex_call(retriever: Any, question: str, call: dict) -> list[dict]:
        # A LlamaIndex call takes the question only: k and filters are the retriever's own.
        return [node.node.metadata for node in retriever.retrieve(question)]

    return {
        "haystack": (HaystackRetriever, haystack_call, False),
        "langchain": (LangChainRetriever, langchain_call, False),
        "llamaindex": (LlamaIndexRetriever, llamaindex_call, True),
    }


HOSTILE_QUESTIONS = ["", " ", "\ud800", "x" * 200_000, "* OR tenant:globex", '"}},{"match_all":{}}']


def _asked(name: str, retriever: Any, question: str, asynchronous: bool) -> list[dict]:
    """The metadata of what ``retriever`` finds for ``question``, by its sync or async call."""
    if name == "haystack":
        if asynchronous:
            found = asyncio.run(retriever.run_async(question))["documents"]
        else:
            found = retriever.run(question)["documents"]
        return [doc.meta for doc in found]
    if name == "langchain":
        call = retriever.ainvoke if asynchronous else retriever.invoke
        found = asyncio.run(call(question)) if asynchronous else call(question)
        return [doc.metadata for doc in found]
    call = retriever.aretrieve if asynchronous else retriever.retrieve
    found = asyncio.run(call(question)) if asynchronous else call(question)
    return [node.node.metadata for node in found]


def _made_and_run(
    retriever_class: Any, run: Any, tenant: Any, options: dict, question: str, call: dict
) -> list[dict]:
    return run(retriever_class(tenant, rerank=False, **options), question, call)


def _tally(counts: Counter, name: str, what: str, tenant: Any, attempt: Any, *args: Any) -> None:
    """Run ``attempt(*args)`` (a call returning the found documents' metadata) and count its
    outcome: answered (and the hits not of ``tenant``), refused with a ``LoaderError``, or
    unexpected."""
    try:
        found = attempt(*args)
    except LoaderError:
        counts["refused"] += 1
        return
    except Exception as exc:  # what no caller expects counts, but for one case
        if name == "haystack" and "unexpected keyword argument 'tenant'" in str(exc):
            # Haystack's run() takes query, top_k and filters, its component's inputs: Python
            # refuses a tenant before any search.
            counts["refused by signature"] += 1
            return
        counts["unexpected"] += 1
        print(f"  {name} tenant {tenant!r:.30} {what:.60}: {exc!r:.200}", file=sys.stderr)
        return
    counts["answered"] += 1
    counts["crossed"] += sum(1 for meta in found if meta.get("tenant") != tenant)


def probe_retrievers(client: Any, settings: Settings, embedder: Any, question: str) -> dict:
    """Each retriever made for hostile tenants and called with hostile ``k`` and filters, then
    made for ``acme`` and asked hostile questions, sync and async."""
    counts: Counter = Counter()
    common = {"settings": settings, "client": client, "embedder": embedder, "mode": "bm25"}
    for name, (retriever_class, run, options_at_make) in _frameworks().items():
        for tenant in [*HOSTILE_TENANTS, "acme"]:
            for call in HOSTILE_CALLS:
                if options_at_make and "tenant" in call:
                    continue  # a second tenant for the constructor: no call to make
                made = call if options_at_make else {}
                made_and_run = partial(
                    _made_and_run, retriever_class, run, tenant, common | made, question
                )
                _tally(counts, name, repr(call), tenant, made_and_run, {} if made else call)
        retriever = retriever_class("acme", rerank=False, **common)
        for hostile in HOSTILE_QUESTIONS:
            for asynchronous in (False, True):
                asked = partial(_asked, name, retriever, hostile, asynchronous)
                _tally(counts, name, f"question {hostile!r:.40}", "acme", asked)
    return {
        "retriever calls answered": counts["answered"],
        "retriever calls refused (LoaderError)": counts["refused"],
        "retriever calls refused by Python (haystack run(tenant=))": counts["refused by signature"],
        "retriever cross-tenant hits": counts["crossed"],
        "retriever unexpected exceptions": counts["unexpected"],
    }
