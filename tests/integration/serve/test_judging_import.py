"""Importing a judgments file on the judging page over plain HTTP, on a real node: a Quepid CSV
on the 0-3 scale and SRW judgments uploaded store what ``loader judgments import`` stores for the
same file (the same questions and grades, and byte-identical exports); one of a name already
taken replaces that set as the command does. A bad row is a 422 naming the file and the line, a
grade of a chunk not the tenant's a 422 naming it, and neither writes anything. Tenant B gets the
404 of an unknown set for A's set and never reaches A's chunks; bad parameters are 422s naming
them, a body over the limit 413, no session 401, no token 403, the cluster down 503."""

from __future__ import annotations

import http.client
import json
import socket

import pytest
from click.testing import CliRunner

from loader.cli import cli
from loader.errors import NotFoundError
from loader.query.judgments import find_query_set, judging_state, judgments_index
from loader.serve.app import create_app
from loader.serve.responses import MAX_IMPORT_BYTES
from tests.integration.serve.http_server import Server, free_port, signed_in
from tests.integration.serve.test_judging_snapshots import (  # noqa: F401 - the fixture
    KEY_A,
    KEY_B,
    QUESTIONS,
    _chunk_of,
    harbour,
)

pytestmark = pytest.mark.integration

COMMA_QUESTION = "ferries, bicycles and the kiosk"  # quoted in the CSV


def _quepid_csv(chunks: dict[str, str]) -> str:
    """Quepid's ratings on its nDCG scale (0-3), a query's rows apart, one query quoted."""
    return (
        "query,docid,rating\n"
        f"{QUESTIONS[0]},{chunks['timetable.md']},3\n"
        f"{QUESTIONS[1]},{chunks['parking.md']},2\n"
        f'"{COMMA_QUESTION}",{chunks["bicycles.md"]},1\n'
        f"{QUESTIONS[0]},{chunks['bicycles.md']},1\n"
        f"{QUESTIONS[1]},{chunks['cafe.md']},0\n"
    )


def _srw_judgments(chunks: dict[str, str]) -> str:
    ratings = [
        {"query": QUESTIONS[2], "ratings": [{"docId": chunks["cafe.md"], "rating": "2.000"}]},
        {"query": QUESTIONS[0], "ratings": [
            {"docId": chunks["timetable.md"], "rating": "1.000"},
            {"docId": chunks["parking.md"], "rating": "0.000"},
        ]},
    ]  # fmt: skip
    return json.dumps({"name": "x", "type": "IMPORT_JUDGMENT", "judgmentRatings": ratings})


def _upload(server, session, path: str, body, **headers) -> tuple[int, dict]:
    cookie, token = session
    sent = {"Cookie": cookie, "X-CSRF-Token": token, "Content-Type": "text/csv"} | headers
    status, text = server.raw("POST", path, body, sent)
    return status, json.loads(text)


def _declared(server, session, path: str, length: int) -> tuple[int, dict]:
    """The answer to a POST that declares a body of ``length`` bytes and sends none of it."""
    cookie, token = session
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {cookie}\r\n"
            f"X-CSRF-Token: {token}\r\nContent-Length: {length}\r\n\r\n".encode()
        )
        response = http.client.HTTPResponse(sock)
        response.begin()
        return response.status, json.loads(response.read())


def _stored(client, alias: str, tenant: str, name: str) -> tuple[list[str], dict]:
    """A set's questions and grades (question -> chunk id -> grade), as stored."""
    query_set = find_query_set(client, alias, tenant, name)
    state = judging_state(client, alias, tenant, query_set.set_id)
    grades = {n: {c: g.grade for c, g in by.items()} for n, by in state.grades.items()}
    return query_set.questions, grades


def _count(client, alias: str) -> int:
    client.indices.refresh(index=judgments_index(alias))
    return client.count(index=judgments_index(alias))["count"]


def test_an_uploaded_file_stores_what_the_import_command_stores(
    harbour,  # noqa: F811 - the fixture imported above
    client,
    embedder,
    tmp_path,
):
    settings, _ = harbour
    alias = settings.index_name
    chunks = {s: _chunk_of(client, alias, "A", s) for s in ("timetable.md", "parking.md")}
    chunks |= {s: _chunk_of(client, alias, "A", s) for s in ("bicycles.md", "cafe.md")}
    files = {
        "ratings.csv": (_quepid_csv(chunks), "3", "quepid-csv"),
        "judgments.json": (_srw_judgments(chunks), "2", "srw-judgments"),
    }
    with Server(create_app(settings, embedder=embedder)) as server:
        session = signed_in(server, KEY_A)
        for filename, (text, scale, kind) in files.items():
            path = f"/judge/sets/import?name=page+{filename}&rating_scale={scale}"
            status, answer = _upload(server, session, f"{path}&filename={filename}", text)
            assert status == 201, answer
            assert (answer["format"], answer["replaced"]) == (kind, False)
            written = tmp_path / filename
            written.write_text(text, encoding="utf-8")
            result = CliRunner().invoke(
                cli,
                ["judgments", "import", str(written), "--tenant", "A", "--name", f"cli {filename}",
                 "--rating-scale", scale, "--index", alias, "--url", settings.opensearch_url],
            )  # fmt: skip
            assert result.exit_code == 0, result.output
            page = _stored(client, alias, "A", f"page {filename}")
            assert page == _stored(client, alias, "A", f"cli {filename}")
            assert (answer["questions"], answer["grades"]) == (
                len(page[0]), sum(map(len, page[1].values()))
            )  # fmt: skip
            assert answer["page"] == f"/judge/sets/{answer['set_id']}"
            cli_set = find_query_set(client, alias, "A", f"cli {filename}").set_id
            for export in ("quepid-csv&rating_scale=3", "questions"):
                ours = server.raw("GET", f"/judge/sets/{answer['set_id']}/export?format={export}",
                                  headers={"Cookie": session[0]})  # fmt: skip
                theirs = server.raw("GET", f"/judge/sets/{cli_set}/export?format={export}",
                                    headers={"Cookie": session[0]})  # fmt: skip
                assert ours[0] == 200 and ours == theirs, export
        # What the CSV's 0-3 ratings became on the page's 0-2: 3 -> 2, 2 -> 1, 1 -> 1, 0 -> 0.
        questions, grades = _stored(client, alias, "A", "page ratings.csv")
        assert questions == [QUESTIONS[0], QUESTIONS[1], COMMA_QUESTION]
        timetable, parking, bicycles, cafe = chunks.values()
        assert grades == {
            0: {timetable: 2, bicycles: 1},
            1: {parking: 1, cafe: 0},
            2: {bicycles: 1},
        }

        # A file over a search's body limit (64 KiB) but under an import's.
        padded = _quepid_csv(chunks) + "\n" * 70_000
        status, answer = _upload(
            server, session, "/judge/sets/import?name=p&rating_scale=3", padded
        )
        assert (status, answer["grades"]) == (201, 5), answer

        # A name already taken: the set is replaced as the command replaces it (its questions the
        # file's, its grades kept), 200; into a set by its id, the same under the set's name.
        def cli_import(filename: str, scale: str) -> None:
            result = CliRunner().invoke(
                cli,
                ["judgments", "import", str(tmp_path / filename), "--tenant", "A", "--name",
                 "cli judgments.json", "--rating-scale", scale, "--index", alias,
                 "--url", settings.opensearch_url],
            )  # fmt: skip
            assert result.exit_code == 0, result.output

        taken = "/judge/sets/import?name=page+judgments.json&rating_scale=3"
        status, answer = _upload(server, session, taken, files["ratings.csv"][0])
        assert status == 200 and answer["replaced"] is True, answer
        cli_import("ratings.csv", "3")
        replaced = _stored(client, alias, "A", "page judgments.json")
        assert replaced == _stored(client, alias, "A", "cli judgments.json")
        # The CSV's questions and its grades; the SRW file's grades stay with their own questions,
        # which the CSV does not ask (cafe.md, graded 2 for the SRW file's first question, once
        # landed on the CSV's first question, its number).
        assert replaced[0] == questions
        assert replaced[1][0] == {timetable: 2, bicycles: 1}
        status, again = _upload(server, session, f"/judge/sets/{answer['set_id']}/import",
                                files["judgments.json"][0])  # fmt: skip
        assert status == 200 and again["name"] == "page judgments.json", again
        cli_import("judgments.json", "2")
        assert _stored(client, alias, "A", "page judgments.json") == _stored(
            client, alias, "A", "cli judgments.json"
        )


def test_a_bad_file_is_refused_naming_its_line_and_writes_nothing(
    harbour,  # noqa: F811
    client,
    embedder,
):
    settings, _ = harbour
    alias = settings.index_name
    chunk = _chunk_of(client, alias, "A", "timetable.md")
    good = f"query,docid,rating\n{QUESTIONS[0]},{chunk},3\n"
    with Server(create_app(settings, embedder=embedder)) as server:
        a, b = signed_in(server, KEY_A), signed_in(server, KEY_B)
        status, answer = _upload(server, a, "/judge/sets/import?name=kept&rating_scale=3", good)
        assert status == 201, answer
        kept = answer["set_id"]
        before, stored = _count(client, alias), _stored(client, alias, "A", "kept")
        into = "/judge/sets/import?name=bad&rating_scale=3&filename=week%2049.csv"
        named = "judgments file week 49.csv: "
        bad_rows = {
            f"{good}{QUESTIONS[1]},{chunk},7\n": "line 3: rating '7' is not a number of 0 to 3",
            f"{good}{QUESTIONS[1]},{chunk}\n": "line 3: 2 fields, expected 3",
            f"{good}{QUESTIONS[1]},,1\n": "line 3: the query and the docid must not be empty",
            f"{good}{QUESTIONS[0]},{chunk},1\n": "line 3: ",  # rated on line 2 already
            f"{good}{QUESTIONS[1]},no-such-chunk,1\n": "chunk_id: no chunk 'no-such-chunk' of",
        }
        for body, message in bad_rows.items():
            for path in (into, f"/judge/sets/{kept}/import?rating_scale=3&filename=week%2049.csv"):
                status, answer = _upload(server, a, path, body)
                assert status == 422 and answer["error"].startswith(named + message), answer
        status, answer = _upload(server, a, "/judge/sets/import?name=bad&filename=q.jsonl",
                                 '{"question": "ok"}\n{"question": ""}\n')  # fmt: skip
        assert status == 422, answer
        assert answer["error"].startswith("judgments file q.jsonl: line 2: question must be")
        status, answer = _upload(server, a, into, b"query,docid,rating\n\xff,c,1\n")
        assert status == 422 and "is not UTF-8 text (byte 0xff on line 2)" in answer["error"]
        # Tenant B: A's set is an unknown set, and A's chunks are no chunks of B's.
        crossing = _upload(server, b, f"/judge/sets/{kept}/import?rating_scale=3", good)
        unknown = _upload(server, b, "/judge/sets/0123456789abcdef0123/import?rating_scale=3", good)
        assert crossing[0] == unknown[0] == 404
        assert crossing[1]["error"].replace(kept, "X") == unknown[1]["error"].replace(
            "0123456789abcdef0123", "X"
        )
        status, answer = _upload(server, b, "/judge/sets/import?name=kept&rating_scale=3", good)
        assert status == 422 and "no chunk" in answer["error"], answer
        # Nothing of any of these was written.
        assert _count(client, alias) == before
        assert _stored(client, alias, "A", "kept") == stored
        for tenant, name in (("A", "bad"), ("B", "kept")):
            with pytest.raises(NotFoundError):
                find_query_set(client, alias, tenant, name)

        # Bad parameters name themselves; a body over the limit 413; no session 401, no token 403.
        for path, message in (
            ("/judge/sets/import?rating_scale=3", "name: 1 to 50 characters"),
            (f"/judge/sets/import?name={'n' * 51}", "name: 1 to 50 characters"),
            ("/judge/sets/import?name=x&rating_scale=0", "rating_scale: the file's top rating"),
            ("/judge/sets/import?name=x&rating_scale=abc", "query.rating_scale: Input should"),
            (f"/judge/sets/import?name=x&filename={'f' * 256}", "filename: at most 255"),
        ):
            status, answer = _upload(server, a, path, good)
            assert status == 422 and answer["error"].startswith(message), (path, answer)
        srw = '{"judgmentRatings": []}'
        status, answer = _upload(server, a, "/judge/sets/import?name=x&rating_scale=3", srw)
        assert status == 422 and answer["error"].startswith("rating_scale: applies to a Quepid")
        status, answer = _declared(server, a, "/judge/sets/import?name=x", MAX_IMPORT_BYTES + 1)
        assert status == 413 and "loader judgments import" in answer["error"], answer
        assert server.raw("POST", "/judge/sets/import?name=x", good, {})[0] == 401
        assert server.raw("POST", "/judge/sets/import?name=x", good, {"Cookie": a[0]})[0] == 403
        assert _count(client, alias) == before


def test_a_cluster_that_is_down_is_a_503(harbour, embedder):  # noqa: F811
    settings, _ = harbour
    with Server(create_app(settings, embedder=embedder)) as up:
        session = signed_in(up, KEY_A)  # valid on both servers: the key is kept beside the file
    down = settings.replace(opensearch_url=f"http://127.0.0.1:{free_port()}", request_timeout=2.0)
    good = "query,docid,rating\nferry timetable,c1,2\n"
    with Server(create_app(down, load_models=False)) as server:
        for path in ("/judge/sets/import?name=x", f"/judge/sets/{'0' * 20}/import"):
            status, answer = _upload(server, session, path, good)
            assert status == 503, answer
