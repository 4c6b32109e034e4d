"""The judging page's export links over plain HTTP, on a real node: each format's download is
what ``loader judgments export`` writes for the same set, named after the set; tenant B gets the
404 of an unknown set for A's; a bad format or scale is a 422 naming it, before the cluster is
asked; without a session a 401."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from loader.cli import cli
from loader.query.judgments import create_query_set, save_grade
from loader.serve.app import create_app
from tests.integration.serve.http_server import Server, signed_in
from tests.integration.serve.test_judging_snapshots import (  # noqa: F401 - the fixture
    KEY_A,
    KEY_B,
    QUESTIONS,
    _chunk_of,
    harbour,
)

pytestmark = pytest.mark.integration


def test_each_format_downloads_what_the_export_command_writes(
    harbour,  # noqa: F811 - the fixture imported above
    client,
    embedder,
    tmp_path,
):
    settings, _ = harbour
    alias = settings.index_name
    set_a = create_query_set(client, alias, "A", "week 49/ferries", questions=QUESTIONS).set_id
    set_b = create_query_set(client, alias, "B", "week 49/ferries", questions=QUESTIONS).set_id
    grades = {
        (0, "timetable.md"): 2, (0, "bicycles.md"): 1, (1, "parking.md"): 2, (1, "cafe.md"): 0
    }  # fmt: skip
    for (number, source), grade in grades.items():
        save_grade(client, alias, "A", set_a, number, _chunk_of(client, alias, "A", source), grade)
    chunk = _chunk_of(client, alias, "A", "timetable.md")

    with Server(create_app(settings, embedder=embedder)) as server:
        cookie, _ = signed_in(server, KEY_A)
        cookie_b, _ = signed_in(server, KEY_B)
        as_a, as_b = {"Cookie": cookie}, {"Cookie": cookie_b}
        export = f"/judge/sets/{set_a}/export"
        formats = {
            "questions": ("", "week-49-ferries.jsonl"),
            "srw-judgments": ("", "week-49-ferries.srw-judgments.json"),
            "srw-query-set": ("", "week-49-ferries.srw-query-set.json"),
            "quepid-csv": ("&rating_scale=3", "week-49-ferries.quepid.csv"),
        }
        for name, (extra, filename) in formats.items():
            status, headers, body = server.full("GET", f"{export}?format={name}{extra}", as_a)
            assert status == 200, body
            assert headers["content-disposition"] == f'attachment; filename="{filename}"'
            written = tmp_path / filename
            scale = ["--rating-scale", "3"] if extra else []
            result = CliRunner().invoke(
                cli,
                ["judgments", "export", "--tenant", "A", "--name", "week 49/ferries",
                 "--format", name, *scale, "-o", str(written), "--index", alias,
                 "--url", settings.opensearch_url],
            )  # fmt: skip
            assert result.exit_code == 0, result.output
            assert body == written.read_text(encoding="utf-8"), name
        # What the files hold, checked on two of them: the grades stored, on Quepid's 0-3 scale.
        _, _, csv_text = server.full("GET", f"{export}?format=quepid-csv&rating_scale=3", as_a)
        assert f"{QUESTIONS[0]},{chunk},3" in csv_text.splitlines()
        _, _, lines = server.full("GET", f"{export}?format=questions", as_a)
        assert [json.loads(line)["question"] for line in lines.splitlines()] == QUESTIONS[:2]

        # Tenant B: A's set is an unknown set; B's own has no grade of 2 to export.
        crossing = server.full("GET", f"{export}?format=quepid-csv", as_b)
        unknown = server.full("GET", "/judge/sets/0123456789abcdef0123/export", as_b)
        assert crossing[0] == unknown[0] == 404
        assert crossing[2].replace(set_a, "X") == unknown[2].replace("0123456789abcdef0123", "X")
        status, _, body = server.full("GET", f"/judge/sets/{set_b}/export?format=questions", as_b)
        assert status == 422 and "no question graded 1 or 2" in body
        status, _, body = server.full("GET", f"/judge/sets/{set_b}/export?format=quepid-csv", as_b)
        assert (status, body) == (200, "query,docid,rating\n")

        # Bad parameters: a 422 naming them; no session: a 401.
        status, _, body = server.full("GET", f"{export}?format=xlsx", as_a)
        assert status == 422 and "format: 'xlsx' is not one of" in body
        status, _, body = server.full("GET", f"{export}?format=questions&rating_scale=3", as_a)
        assert status == 422 and "rating-scale applies to quepid-csv only" in body
        status, _, body = server.full("GET", f"{export}?format=quepid-csv&rating_scale=0", as_a)
        assert status == 422 and "top rating, 1 or more" in body
        assert server.full("GET", f"{export}?format=questions", {})[0] == 401
        # The question list links each format.
        status, _, page = server.full("GET", f"/judge/sets/{set_a}/questions", as_a)
        assert status == 200 and f'href="{export}?format=quepid-csv&amp;rating_scale=3"' in page
