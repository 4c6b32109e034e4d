"""Issue #31's hostile probes, re-run in one bounded pass against a real node: prints the counts
that must all be zero.

    python benchmarks/probe_hostile.py [--url http://127.0.0.1:9200] [--rounds 3] [--races 40]

``--quick`` keeps the first case of each matrix (every command, option and surface runs, but at one
status, mode or file): the suite's smoke run (tests/benchmark_cases.py), which shows that the probe
runs, not that nothing leaks.

What it does, on indices of its own (``probe-<random>``, deleted afterwards):

- **lost documents**: ``LOADER_BULK_BATCH_SIZE=1 loader push many/ --tenant t --json`` in a child
  process and, once 50 of its chunks are visible, ``loader apply`` with another ``text_analyzer``
  (a new index version, copied by a reindex while the push writes), ``--rounds`` times. A
  document the push reports written (not among its failed files) that is not whole in the version
  the alias ends on is lost.
- **cross-tenant hits**: tenants ``acme`` and ``globex`` pushed with the same folder (both
  orders) plus a document only the other has; then ``loader search`` (every mode and option),
  the stored templates called directly with hostile parameters (lists, wildcards, mustache and
  JSON in the values, huge sizes), and ``loader serve`` with API keys and without. A hit of the
  other tenant, or serve's log saying a template returned one, counts.
- **5xx for client input**: malformed requests to ``loader serve`` (bodies, types, ranges,
  headers, paths, keys); any answer of 500 or more counts.
- **secrets printed**: ``loader search/push/apply/doctor --debug`` and ``loader serve --debug``
  in front of a proxy (tests/hostile_upstream.py) echoing the credentials in 400, 401, 403, 5xx
  and non-JSON answers; every output or body holding a word of the password or 8 characters of
  its Basic token counts.
- **outside files indexed / pushes aborted**: ``--races`` pushes while a thread swaps a file for
  a link to an outside file, a folder and a FIFO (tests/swapping.py).
- **ids collided**: collection ``py\\x1fkb`` / file ``guide.md`` against collection ``py`` /
  file ``kb\\x1fguide.md``, tenant ``px``: both documents must stay; a push under tenant
  ``px\\x1fpy`` must be refused, nothing indexed.
- **issue #44's surfaces** (``benchmarks/probe_surfaces.py``), on an index with the query log
  on: the judging page (``/judge``: login, sets, a question, grade, skip, compare) and
  ``POST /events`` / ``GET /log`` with hostile ids, bodies, cookies and CSRF tokens, with API
  keys and without (5xx and cross-tenant hits); every route of ``loader serve`` behind the
  echoing upstream, ``--debug`` or not, the password in the settings or in the URL (secrets in
  any body or in serve's output, bare 500s); ``loader judgments import`` of hostile files (a
  FIFO, ``/dev/zero``, a huge file, non-finite ratings, invalid UTF-8, links out...), each
  bounded in time (hangs, exit 1, not exit 2, messages not naming the file); the LangChain,
  LlamaIndex and Haystack retrievers with hostile tenants, ``k`` and filters (cross-tenant hits,
  exceptions other than ``LoaderError``).

Needs the ``test`` and ``serve`` extras (it borrows the tests' hostile upstream and servers).
Traffic goes only to the node named and to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))

import opensearchpy  # noqa: E402
from opensearchpy import helpers  # noqa: E402

from benchmarks import probe_surfaces as surfaces  # noqa: E402
from loader.cluster.client import connect  # noqa: E402
from loader.errors import ConfigError  # noqa: E402
from loader.index.apply import apply_config  # noqa: E402
from loader.ingest.sync import push  # noqa: E402
from loader.models.embedding import get_embedder  # noqa: E402
from loader.serve.app import create_app  # noqa: E402
from loader.settings import Settings  # noqa: E402
from tests.conftest import cleanup_owned  # noqa: E402
from tests.hostile_upstream import PASSWORD, USER, EchoUpstream, shown_credential  # noqa: E402
from tests.integration.index.test_reindex_race import CHUNKS as RACE_CHUNKS  # noqa: E402
from tests.integration.index.test_reindex_race import race_folder  # noqa: E402
from tests.integration.query.test_abuse import INJECTIONS, template_call  # noqa: E402
from tests.integration.serve.http_server import Server  # noqa: E402
from tests.integration.serve.test_serve_hostile_upstream import ServeProcess  # noqa: E402
from tests.swapping import SECRET, file_swaps, swapping  # noqa: E402

SECTIONS = ("secrets", "race", "tenants", "swaps", "ids", "surfaces")
MODES = ("bm25", "vector", "hybrid-rrf", "hybrid-minmax", "hybrid-zscore")
# 600 files of 3 chunks, one chunk a bulk request: a push of ~20 s, so that the apply starts
# its copy while the push writes (80 files end in 3 s, before the apply is under way).
RACE_FILES, RACE_STARTED = 600, 50
ANALYZERS = ("simple", "whitespace", "standard")
SECONDS = 300  # the most any one child process or race round may take
# Words only one tenant's document holds: the other tenant's searches ask for them.
ONLY = {"acme": "zanzibarquux anvil rocket", "globex": "quokkafrobnicate hammock volcano"}
KEYS = {"acme": "acme-key-0123456789abcdef", "globex": "globex-key-0123456789abcdef"}


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment without loader or cluster settings, plus ``extra``."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith(("OPENSEARCH_", "LOADER_"))}
    return {**kept, "PYTHONPATH": str(REPOSITORY), **extra}


def loader_command(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "loader", *args],
        cwd=cwd,
        env=child_env(**env),
        capture_output=True,
        text=True,
        timeout=SECONDS,
    )


# -- lost documents ------------------------------------------------------------------------


def chunks_by_source(client: Any, alias: str, collection: str) -> Counter:
    client.indices.refresh(index=alias)
    body = {"query": {"term": {"collection": collection}}, "_source": ["source"]}
    return Counter(
        hit["_source"]["source"] for hit in helpers.scan(client, index=alias, query=body)
    )


def probe_push_during_reindex(
    client: Any, url: str, alias: str, work: Path, rounds: int, files: int = RACE_FILES
) -> dict:
    """Lost documents of ``rounds`` pushes of ``files`` files, each racing an apply that copies
    the index."""
    lost = refused_swaps = failed_files = doctor_silent = raced = 0
    for round_number in range(rounds):
        collection = f"many{round_number}"
        folder = race_folder(work, collection, files)
        env = {"OPENSEARCH_URL": url, "LOADER_BULK_BATCH_SIZE": "1"}
        command = [sys.executable, "-m", "loader", "push", str(folder), "--tenant", "t"]
        pushing = subprocess.Popen(
            [*command, "--index", alias, "--json"],
            cwd=work,
            env=child_env(**env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + SECONDS
        query = {"query": {"term": {"collection": collection}}}
        while client.count(index=alias, body=query)["count"] < RACE_STARTED:
            if pushing.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        raced += pushing.poll() is None  # the apply starts while the push writes
        applied = loader_command(
            ["apply", "--index", alias],
            work,
            OPENSEARCH_URL=url,
            LOADER_TEXT_ANALYZER=ANALYZERS[round_number % len(ANALYZERS)],
        )
        if applied.returncode != 0:
            refused_swaps += 1  # the copy differed: the apply refused to move the alias
            print(
                f"  round {round_number}: apply exit {applied.returncode}: "
                f"{applied.stderr.strip().splitlines()[-1:]}",
                file=sys.stderr,
            )
        out, _err = pushing.communicate(timeout=SECONDS)
        report = json.loads(out)
        failed = {error["source"] for error in report["errors"]}
        failed_files += len(failed)
        stored = chunks_by_source(client, alias, collection)
        written = {f"f{number:03d}.md" for number in range(files)} - failed
        round_lost = sorted(path for path in written if stored[path] != RACE_CHUNKS)
        lost += len(round_lost)
        if round_lost:
            doctor = loader_command(["doctor", "--index", alias], work, OPENSEARCH_URL=url)
            doctor_silent += "does not hold every document" not in doctor.stdout + doctor.stderr
        print(
            f"  round {round_number}: push exit {pushing.returncode}, {len(failed)} failed "
            f"(named), {len(round_lost)} written but lost",
            file=sys.stderr,
        )
    return {
        "race rounds": rounds,
        "rounds whose apply started mid-push": raced,
        "lost documents": lost,
        "lost documents doctor missed": doctor_silent,
        "files the push named failed (write block)": failed_files,
        "swaps the apply refused": refused_swaps,
    }


# -- cross-tenant hits ---------------------------------------------------------------------


def tenant_folder(root: Path, tenant: str) -> Path:
    """The same shared guides for every tenant, plus one document only ``tenant`` has."""
    folder = root / tenant / "kb"
    folder.mkdir(parents=True)
    for name in ("refunds", "shipping", "accounts"):
        (folder / f"{name}.md").write_text(
            f"# {name.title()}\n\n## Policy\n\nThe {name} policy: requests are answered within "
            "five days. Contact support for help.\n",
            encoding="utf-8",
        )
    (folder / "only.md").write_text(
        f"# Private notes\n\n## Secrets\n\nOnly {tenant} knows {ONLY[tenant]}.\n", encoding="utf-8"
    )
    return folder


def other_tenant_hits(hits: list[dict], tenant: str) -> int:
    return sum(1 for hit in hits if hit.get("tenant") != tenant)


def cli_searches(url: str, alias: str, work: Path, quick: bool = False) -> tuple[int, int, int]:
    """(searches, hits of the other tenant, searches that failed) through ``loader search``:
    every mode with every option, both ways (with ``quick``, each option once, one way)."""
    options = (
        [],
        ["--k", "100", "--candidates", "500"],
        ["--one-per-document"],
        ["--expand", "parent", "--merge-adjacent"],
        ["--lang", "en", "--tag", "x"],
    )
    searches = crossed = failures = 0
    for tenant, other in surfaces.few((("acme", "globex"), ("globex", "acme")), quick):
        pairs = (
            zip(MODES, options, strict=True) if quick else ((m, o) for m in MODES for o in options)
        )
        for mode, extra in pairs:
            question = f"{ONLY[other]} policy"
            args = ["search", question, "--tenant", tenant, "--mode", mode, "--no-rerank"]
            done = loader_command(
                [*args, *extra, "--index", alias, "--json"], work, OPENSEARCH_URL=url
            )
            searches += 1
            if done.returncode != 0:
                failures += 1
                continue
            crossed += other_tenant_hits(json.loads(done.stdout)["hits"], tenant)
            crossed += "chunks of other tenants" in done.stderr
    return searches, crossed, failures


def template_calls(
    client: Any, settings: Settings, embedder: Any, quick: bool = False
) -> tuple[int, int, int]:
    """(calls answered, hits of a tenant other than acme, 5xx answers) of the stored templates
    called directly, as any application would, with the abuse suite's injections (and a list,
    an object, none) as the tenant and hostile values in the other parameters."""
    vector = list(embedder.embed_queries([ONLY["globex"]])[0])
    tenants = ["acme", *INJECTIONS, ["acme", "globex"], {"acme": 1}, None]
    extras = [
        {},
        {"size": 10000, "k": 10000},
        {"exact_terms": ["*", "globex"]},
        {"lang": 'en"}}]}},"query":{"match_all":{}},"x":{"y":"'},
        {"tags": ['x"]}},{"match_all":{}},{"terms":{"tags":["']},
        {"collapse_doc": True},
        {"query_text": '"}},{"match_all":{}}]}}'},
        {"published_from": "1970-01-01", "decay_scale": "36500d"},
    ]
    calls = crossed = server_errors = 0
    for mode in surfaces.few(MODES, quick):
        for tenant in tenants:
            for extra in extras:
                params = {"query_text": ONLY["globex"], "query_vector": vector, "exact_terms": []}
                params.update(extra)
                if tenant is not None:
                    params["tenant"] = tenant
                try:
                    answer = template_call(client, settings, mode, params)
                except opensearchpy.TransportError as exc:  # refused: nothing returned
                    server_errors += not (
                        isinstance(exc.status_code, int) and exc.status_code < 500
                    )
                    continue
                calls += 1
                hits = [hit.get("_source", {}) for hit in answer["hits"]["hits"]]
                crossed += other_tenant_hits(hits, "acme")
    return calls, crossed, server_errors


BAD_BODIES: list[Any] = [
    "not json",
    "[1, 2]",
    "null",
    '"text"',
    "{",
    '{"question": "x", "tenant": "acme"',
    {},
    {"question": ""},
    {"tenant": "acme"},
    {"question": "x", "tenant": ""},
    {"question": "x", "tenant": 5},
    {"question": 5, "tenant": "acme"},
    {"question": ["x"], "tenant": "acme"},
    {"question": "x", "tenant": "acme", "k": 0},
    {"question": "x", "tenant": "acme", "k": -1},
    {"question": "x", "tenant": "acme", "k": 10**12},
    {"question": "x", "tenant": "acme", "k": "5"},
    {"question": "x", "tenant": "acme", "k": 1.5},
    {"question": "x", "tenant": "acme", "candidates": 10**9},
    {"question": "x", "tenant": "acme", "mode": "sql"},
    {"question": "x", "tenant": "acme", "rerank": "false"},
    {"question": "x", "tenant": "acme", "filters": {"published_from": "2020-13-45"}},
    {"question": "x", "tenant": "acme", "filters": {"published_from": "now+999999999y"}},
    {"question": "x", "tenant": "acme", "filters": {"decay_scale": "-5d"}},
    {"question": "x", "tenant": "acme", "filters": {"decay_scale": "99999999999999999d"}},
    {"question": "x", "tenant": "acme", "filters": {"tags": "x"}},
    {"question": "x", "tenant": "acme", "filters": {"lang": "x" * 100}},
    {"question": "x", "tenant": "acme", "filters": []},
    {"question": "x", "tenant": "acme", "expand": "everything"},
    {"question": "x", "tenant": "acme", "history": "earlier"},
    {"question": "x", "tenant": "acme", "history": [{"role": "robot", "content": "x"}]},
    {"question": "x", "tenant": "acme", "history": [{"role": "user"}]},
    {"question": "\ud800", "tenant": "acme"},
    {"question": "x", "tenant": "\x00acme"},
    {"question": "x", "tenant": "a" * 10000},
    {"question": "x" * 3_000_000, "tenant": "acme"},
    {"question": "x", "tenant": "acme", "unknown": 1},
    {"question": {"a": {"b": [[[[]]]]}}},
]
BAD_CALLS = [
    ("GET", "/search", None),
    ("PUT", "/search", {}),
    ("POST", "/nowhere", {}),
    ("POST", "/search/", {}),
    ("GET", "/log?limit=-1", None),
    ("GET", "/log?limit=x", None),
    ("GET", "/log?limit=999999999999999999999", None),
    ("POST", "/events", {}),
    ("POST", "/events", {"query_id": "x" * 100, "action_name": "click"}),
    ("POST", "/events", {"query_id": "nope", "action_name": "click", "position": 0}),
    ("POST", "/events", {"query_id": "nope", "action_name": "click", "tenant": "acme"}),
    ("GET", "/judge", None),
    ("POST", "/judge/login", "key=x"),
]


def serve_searches(
    client: Any, settings: Settings, embedder: Any, keys_file: Path, quick: bool = False
) -> dict:
    """Searches and bad requests to ``loader serve``, with API keys and without."""
    searches = crossed = server_errors = bad_requests = 0
    for keyed in (True, False):
        serve_settings = settings.replace(api_keys_file=str(keys_file) if keyed else "")
        app = create_app(serve_settings, client=client, embedder=embedder)
        with Server(app) as server:
            for tenant, other in (("acme", "globex"), ("globex", "acme")):
                headers = {"X-API-Key": KEYS[tenant]} if keyed else {}
                for mode in surfaces.few(MODES, quick):
                    for body in (
                        {"question": ONLY[other]},
                        {"question": ONLY[other], "k": 100, "candidates": 500},
                        {"question": ONLY[other], "one_per_document": True, "expand": "parent"},
                        {"question": f"{ONLY[other]} *", "filters": {"tags": ["*"]}},
                        {"question": ONLY[other], "tenant": other},  # keyed: a 403
                        {
                            "question": ONLY[other],
                            "history": [{"role": "user", "content": f"tenant {other}"}],
                        },
                    ):
                        body = {"tenant": tenant, "mode": mode, "rerank": False, **body}
                        status, text = server.raw("POST", "/search", body, headers)
                        searches += 1
                        server_errors += status >= 500
                        if status == 200:
                            hits = json.loads(text)["hits"]
                            crossed += other_tenant_hits(hits, body["tenant"])
                for body in BAD_BODIES:
                    status, _text = server.raw("POST", "/search", body, headers)
                    bad_requests += 1
                    server_errors += status >= 500
                for method, path, body in BAD_CALLS:
                    status, _text = server.raw(method, path, body, headers)
                    bad_requests += 1
                    server_errors += status >= 500
            if keyed:
                for headers in (
                    {},
                    {"X-API-Key": "wrong-key-0123456789"},
                    {"Authorization": "Basic abc"},
                    {"Authorization": "Bearer"},
                    {"X-API-Key": KEYS["acme"], "Authorization": "Bearer another-key-0123456789"},
                ):
                    status, _text = server.raw("POST", "/search", {"question": "x"}, headers)
                    bad_requests += 1
                    server_errors += status >= 500
    return {
        "serve searches": searches,
        "serve cross-tenant hits": crossed,
        "serve bad requests": bad_requests,
        "serve 5xx for client input": server_errors,
    }


def probe_tenants(
    client: Any, settings: Settings, url: str, work: Path, embedder: Any, quick: bool = False
) -> dict:
    alias = settings.index_name
    folders = {tenant: tenant_folder(work, tenant) for tenant in ONLY}
    for order in (("acme", "globex"), ("globex", "acme")):
        for tenant in order:
            push(folders[tenant], settings, tenant=tenant, client=client, embedder=embedder)
    keys_file = work / "api-keys.toml"
    keys_file.write_text(
        "[keys]\n" + "".join(f'"{key}" = "{tenant}"\n' for tenant, key in KEYS.items()),
        encoding="utf-8",
    )
    keys_file.chmod(0o600)
    searches, cli_crossed, cli_failures = cli_searches(url, alias, work, quick)
    calls, template_crossed, template_errors = template_calls(client, settings, embedder, quick)
    return {
        "CLI searches": searches,
        "CLI cross-tenant hits": cli_crossed,
        "CLI searches failed": cli_failures,
        "stored-template calls answered": calls,
        "stored-template cross-tenant hits": template_crossed,
        "stored-template 5xx": template_errors,
        **serve_searches(client, settings, embedder, keys_file, quick),
    }


# -- secrets printed -----------------------------------------------------------------------


def probe_secrets(work: Path, quick: bool = False) -> dict:
    """Outputs and bodies holding the password, behind a proxy echoing it (with ``quick``, at
    one status, each command once with ``--debug``)."""
    docs = work / "secret-docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nSome text.\n", encoding="utf-8")
    commands = (
        ["search", "refund", "--mode", "bm25", "--no-rerank"],
        ["push", str(docs)],
        ["apply"],
        ["doctor"],
    )
    outputs = printed = 0
    statuses = (
        (400, "json"),
        (401, "text"),
        (403, "page"),
        (500, "json"),
        (502, "page"),
        (503, "text"),
        (200, "page"),
    )
    echoed = 0  # outputs where the proxy's echo arrived (masked): the probe reached it
    for banner in (False, True):  # with the banner, commands get past their first request
        with EchoUpstream(banner=banner) as upstream:
            for status, kind in surfaces.few(statuses, quick):
                upstream.answer(status, kind)
                for command in commands:
                    for debug in (["--debug"],) if quick else ([], ["--debug"]):
                        done = loader_command(
                            [*command, *debug],
                            work,
                            OPENSEARCH_URL=upstream.url,
                            OPENSEARCH_USER=USER,
                            OPENSEARCH_PASSWORD=PASSWORD,
                        )
                        outputs += 1
                        printed += shown_credential(done.stdout + done.stderr) is not None
                        echoed += "Basic ****" in done.stdout + done.stderr
    with EchoUpstream(banner=True) as upstream:
        server = ServeProcess(upstream, work)
        try:
            for status, kind in surfaces.few(statuses, quick):
                for body_kind in surfaces.few(("json", "text", "page"), quick):
                    upstream.answer(status, body_kind if status != 200 else kind)
                    for method, path, body in (
                        (
                            "POST",
                            "/search",
                            {"question": "refund", "tenant": "A", "mode": "bm25", "rerank": False},
                        ),
                        ("GET", "/health", None),
                    ):
                        _status, text = server.raw(method, path, body)
                        outputs += 1
                        printed += shown_credential(text) is not None
                        echoed += "Basic ****" in text
        finally:
            server.stop()
        outputs += 1
        printed += shown_credential(server.output()) is not None
    return {
        "outputs and bodies checked": outputs,
        "of which showed the masked echo": echoed,
        "secrets printed": printed,
    }


# -- file swaps and ids --------------------------------------------------------------------


def probe_swaps(client: Any, settings: Settings, work: Path, embedder: Any, races: int) -> dict:
    outside = work / "outside.md"
    outside.write_text(f"# Outside\n\n{SECRET}\n", encoding="utf-8")
    folder = work / "swapped"
    folder.mkdir()
    for number in range(20):
        (folder / f"n{number:02d}.md").write_text(f"# N{number}\n\nText {number}.\n", "utf-8")
    target = folder / "x.md"
    aborted = 0
    with swapping({target: file_swaps(target, outside)}) as made:
        for _ in range(races):
            try:
                push(folder, settings, tenant="swap", client=client, embedder=embedder)
            except Exception as exc:  # the whole push aborted on one file
                aborted += 1
                print(f"  swap push aborted: {exc!r}", file=sys.stderr)
    client.indices.refresh(index=settings.index_name)
    query = {"query": {"match": {"content": {"query": "vault code 1234", "operator": "and"}}}}
    outside_indexed = client.count(index=settings.index_name, body=query)["count"]
    return {
        "racing pushes": races,
        "swaps made": made[0],
        "outside files indexed": outside_indexed,
        "pushes aborted": aborted,
    }


def probe_ids(client: Any, settings: Settings, work: Path, embedder: Any) -> dict:
    """Names holding the ids' separator (U+001F): joined plainly, (collection 'py\x1fkb', file
    'guide.md') and (collection 'py', file 'kb\x1fguide.md') are one id, and the second push
    would overwrite the first's document. A tenant holding it is refused outright (no name anyone
    types holds a control character): counted, and nothing of it may be indexed."""
    pairs = (("py\x1fkb", "guide.md"), ("py", "kb\x1fguide.md"))
    for number, (collection, name) in enumerate(pairs):
        folder = work / f"ids-{number}"
        folder.mkdir()
        (folder / name).write_text("# Guide\n\nThe same id, joined plainly.\n", "utf-8")
        push(folder, settings, tenant="px", collection=collection, client=client, embedder=embedder)
    accepted = 1
    try:
        push(work / "ids-0", settings, tenant="px\x1fpy", client=client, embedder=embedder)
    except ConfigError:
        accepted = 0
    client.indices.refresh(index=settings.index_name)

    def indexed(*filters: tuple[str, str]) -> int:
        terms = [{"term": {field: value}} for field, value in filters]
        query = {"query": {"bool": {"filter": terms}}}
        return client.count(index=settings.index_name, body=query)["count"]

    kept = sum(indexed(("tenant", "px"), ("collection", c)) > 0 for c, _name in pairs)
    return {
        "documents overwritten across collections": len(pairs) - kept,
        "control-character tenants accepted (unexpected)": accepted,
        "documents under a control-character tenant (unexpected)": indexed(("tenant", "px\x1fpy")),
    }


def probe_new_surfaces(
    client: Any, settings: Settings, url: str, work: Path, embedder: Any, quick: bool = False
) -> dict:
    """Issue #44's surfaces: /judge, /events and /log, judgments import, the retrievers."""
    root = work / "judge-docs"
    folders = {tenant: tenant_folder(root, tenant) for tenant in ONLY}
    for tenant, folder in folders.items():
        push(folder, settings, tenant=tenant, client=client, embedder=embedder)
    questions = {tenant: f"what does {ONLY[tenant]} mean" for tenant in ONLY}
    world = surfaces.World(client, settings, questions)
    keys_file = work / "judge-keys" / "api-keys.toml"
    keys_file.parent.mkdir()
    keys_file.write_text(
        "[keys]\n" + "".join(f'"{key}" = "{tenant}"\n' for tenant, key in KEYS.items()),
        encoding="utf-8",
    )
    keys_file.chmod(0o600)
    outside = work / "outside-judgments.md"
    outside.write_text(f"# Outside\n\n{SECRET}\n", encoding="utf-8")
    return {
        **surfaces.probe_judge(client, settings, embedder, KEYS, keys_file, world),
        **surfaces.probe_events(client, settings, embedder, KEYS, keys_file, world),
        **surfaces.probe_import(url, settings.index_name, work, outside, child_env(), quick),
        **surfaces.probe_retrievers(client, settings, embedder, questions["globex"]),
        **surfaces.probe_serve_upstream(work, quick),
        "judge and events/log hangs (no answer in 120 s)": len(surfaces.HUNG_REQUESTS),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("OPENSEARCH_URL", "http://127.0.0.1:9200"))
    parser.add_argument("--rounds", type=int, default=3, help="push/apply races")
    parser.add_argument("--races", type=int, default=40, help="pushes racing a file swap")
    parser.add_argument(
        "--race-files", type=int, default=RACE_FILES, help="files of each push/apply race's push"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: the first case of each matrix of child processes only",
    )
    parser.add_argument(
        "--only", nargs="+", choices=SECTIONS, default=SECTIONS, help="run these sections only"
    )
    args = parser.parse_args()
    prefix = f"probe-{uuid.uuid4().hex[:8]}"
    settings = Settings(opensearch_url=args.url, index_name=prefix, rerank=False)
    client = connect(settings)
    embedder = get_embedder(settings.embedding_model, device=settings.device)
    counts: dict[str, Any] = {}
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory() as temporary:
            work = Path(temporary)
            sections = (
                ("secrets", lambda: probe_secrets(work, args.quick)),
                (
                    "race",
                    lambda: probe_push_during_reindex(
                        client, args.url, f"{prefix}-race", work, args.rounds, args.race_files
                    ),
                ),
                (
                    "tenants",
                    lambda: probe_tenants(
                        client,
                        settings.replace(index_name=f"{prefix}-kb"),
                        args.url,
                        work,
                        embedder,
                        args.quick,
                    ),
                ),
                (
                    "swaps",
                    lambda: probe_swaps(
                        client,
                        settings.replace(index_name=f"{prefix}-swap"),
                        work,
                        embedder,
                        args.races,
                    ),
                ),
                (
                    "ids",
                    lambda: probe_ids(
                        client, settings.replace(index_name=f"{prefix}-ids"), work, embedder
                    ),
                ),
                (
                    "surfaces",
                    lambda: probe_new_surfaces(
                        client,
                        settings.replace(index_name=f"{prefix}-judge", query_log="ubi"),
                        args.url,
                        work,
                        embedder,
                        args.quick,
                    ),
                ),
            )
            for index in ("race", "kb", "swap", "ids", "judge"):
                apply_config(
                    settings.replace(
                        index_name=f"{prefix}-{index}",
                        query_log="ubi" if index == "judge" else settings.query_log,
                    ),
                    dimension=embedder.dimension,
                    client=client,
                )
            for name, run in sections:
                if name not in args.only:
                    continue
                print(f"{name} ...", file=sys.stderr)
                section_started = time.monotonic()
                found = run()
                print(json.dumps(found), file=sys.stderr)
                counts.update(found)
                print(f"{name}: {time.monotonic() - section_started:.0f} s", file=sys.stderr)
    finally:
        cleanup_owned(client, prefix)
    counts["seconds"] = round(time.monotonic() - started)
    print(json.dumps(counts, indent=2))
    must_be_zero = [
        key
        for key in counts
        if any(
            word in key
            for word in (
                "lost",
                "cross-tenant",
                "5xx",
                "secrets printed",
                "outside files",
                "aborted",
                "overwritten",
                "missed",
                "hangs",
                "exit 1",
                "not exit 2",
                "unexpected",
                "bare 500s",
            )
        )
    ]
    print(
        "all zero"
        if not any(counts[key] for key in must_be_zero)
        else "NOT ZERO: " + ", ".join(key for key in must_be_zero if counts[key])
    )
    controls = [key for key in counts if "leak-detector controls" in key and counts[key] < 2]
    if controls:
        print("a leak detector saw nothing of the tenant it looks for: " + ", ".join(controls))
    if "race" in args.only and counts["rounds whose apply started mid-push"] < args.rounds:
        print("some pushes ended before their apply started: those rounds raced nothing")


if __name__ == "__main__":
    main()
