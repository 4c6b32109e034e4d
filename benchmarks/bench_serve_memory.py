"""Serve's memory over a long run: RSS every 1,000 of 10,000 mixed requests at concurrency 20.

    python benchmarks/bench_serve_memory.py [--url http://127.0.0.1:9200] [--requests 10000]
        [--concurrency 20] [--every 1000] [--reranker learned|keyword|none]
        [--query-log ubi|off] [--fixed-question] [--fresh-connections 0.5]
        [--serve-env NAME=VALUE] [--max-seconds 5400]

Without ``--url`` a node of the project's image is started with testcontainers (as the tests'
``opensearch_url`` fixture does) and removed afterwards. The sample ``docs/`` are pushed to a
fresh index for two tenants, a query set is made for the judging page, and ``loader serve`` is
started as a subprocess on 127.0.0.1 (its own config file; ``--reranker learned``: a LambdaMART
model trained here in seconds on synthetic examples, the way tests/unit/models/rerank/test_learned
trains one, so the booster and its predictions are real, its features noise).

The requests, drawn from a seeded generator (the same sequence every run), are:

- ``POST /search``, two in three: distinct questions of a few words to the 2,000 characters
  a question may have (``Questions``), every mode, ``rerank`` true, false or left to the
  server, ``k`` 1 to 20, ``candidates`` up to 200 in some, some with a history (a follow-up),
  ``expand``, ``one_per_document``, filters;
- ``GET /health``;
- the judging page: ``GET /judge`` (the sets), ``GET /judge/sets/<id>/<n>`` (a question with
  the pooled results of every mode: five searches) and ``.../compare``;
- with ``query_log = ubi``: ``GET /log`` and ``POST /events`` against logged searches;
- bad requests (an unknown field, a question over the limit), answered 4xx.

Half of them (``--fresh-connections``) ask to close the connection after the answer, as a client
without a session does; the rest reuse their thread's keep-alive connection. ``--fixed-question``,
``--reranker none``, ``--query-log off`` and ``--serve-env MALLOC_ARENA_MAX=2`` take one thing
away at a time, to find what grows.

serve has no explain route (``loader explain`` is the CLI's). Serve's RSS (``VmRSS`` of
``/proc/<pid>/status``, its children's added) is read before the first request and after every
``--every`` requests; the growth over the second half of the run (from the sample at half the
requests to the last) is printed as a percentage, with a pass/fail line against
``--max-growth`` (5 %). A 5xx answer is a failure too. The run stops sending at
``--max-seconds`` (what was measured is printed, and the verdict says it was cut short).

Not a test. Traffic goes only to 127.0.0.1 (serve and a loopback cluster); the index and its
logs are deleted afterwards.
"""

from __future__ import annotations

import argparse
import collections
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))

from loader.cluster.client import connect  # noqa: E402
from loader.query.request import MAX_QUESTION_CHARS  # noqa: E402
from loader.settings import EXPANSIONS, SEARCH_MODES, Settings  # noqa: E402

DOCS = REPOSITORY / "docs"
CONVERSATIONS = REPOSITORY / "tests" / "fixtures" / "eval" / "conversations.jsonl"
TENANTS = ("memory-a", "memory-b")
QUERY_SET = "memory"
SET_SIZE = 20  # questions of the query set the judging page shows
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
MAX_REQUESTS = 100_000
REQUEST_TIMEOUT = 120.0
# What each request is, by weight (per 100); log and events only with query_log = ubi.
KINDS = {
    "search": 62,
    "follow-up": 5,
    "health": 8,
    "judge-sets": 3,
    "judge-question": 3,
    "judge-compare": 3,
    "log": 4,
    "event": 6,
    "bad": 6,
}


def rss_kib(pid: int) -> int:
    """``VmRSS`` of ``pid`` and of its children, recursively, in KiB (0 for a process gone)."""
    total = 0
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        total += int(re.search(r"^VmRSS:\s+(\d+)", status, re.M).group(1))
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                total += rss_kib(int(child))
    except (OSError, AttributeError):
        pass
    return total


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Questions:
    """Distinct questions of varied length: the sample's questions and paraphrases with words
    of ``docs/`` appended (none or a few for 60 %, 20 to 120 for 25 %, up to the 2,000
    characters a question may have for 15 %: past the embedding model's 256 tokens), an order
    number in some (an identifier: the exact-match path)."""

    def __init__(self, rng: random.Random, fixed: bool) -> None:
        lines = [json.loads(line) for line in CONVERSATIONS.read_text("utf-8").splitlines()]
        self.bases = [
            text for line in lines for text in (line["standalone"], *line.get("paraphrases", ()))
        ]
        self.histories = [line["history"] for line in lines if line.get("history")]
        words = re.findall(r"[A-Za-z]{3,}", " ".join(p.read_text("utf-8") for p in _doc_files()))
        self.words = sorted(set(words))
        self.rng = rng
        self.fixed = fixed

    def question(self, number: int) -> str:
        if self.fixed:
            return self.bases[0]
        rng = self.rng
        text = rng.choice(self.bases)
        if rng.random() < 0.3:
            text += f" order E{number}"
        share = rng.random()
        if share < 0.6:  # short: a few words more, often none
            extra = int(rng.expovariate(1 / 6))
        elif share < 0.85:  # a paragraph
            extra = rng.randint(20, 120)
        else:  # up to the limit (MAX_QUESTION_CHARS), past the model's 256 tokens
            extra = 400
        words = " ".join(rng.choice(self.words) for _ in range(extra))
        return f"{text} {words}"[: rng.randint(600, MAX_QUESTION_CHARS) if extra == 400 else None]

    def history(self) -> list[dict[str, str]]:
        return self.rng.choice(self.histories)


def _doc_files() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*") if p.is_file())


class Traffic:
    """The requests of one run, drawn in order from a seeded generator, sent by worker threads
    over keep-alive connections of their own."""

    def __init__(self, args: argparse.Namespace, port: int, set_ids: dict[str, str]) -> None:
        self.args, self.port, self.set_ids = args, port, set_ids
        self.rng = random.Random(args.seed)
        self.questions = Questions(self.rng, args.fixed_question)
        self.lock = threading.Lock()
        self.local = threading.local()
        self.query_ids: collections.deque[str] = collections.deque(maxlen=200)
        self.statuses: collections.Counter[str] = collections.Counter()
        self.rerankers: collections.Counter[str] = collections.Counter()
        self.server_errors: list[str] = []
        self.cookies: dict[str, str] = {}
        kinds = dict(KINDS)
        if args.query_log != "ubi":
            kinds.pop("log"), kinds.pop("event")
        self.kinds = list(kinds)
        self.weights = list(kinds.values())

    def connection(self) -> http.client.HTTPConnection:
        if getattr(self.local, "connection", None) is None:
            self.local.connection = http.client.HTTPConnection(
                "127.0.0.1", self.port, timeout=REQUEST_TIMEOUT
            )
        return self.local.connection

    def send(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, bytes]:
        payload = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        headers = {"content-type": "application/json", **(headers or {})}
        for attempt in (1, 2):  # a keep-alive connection the server closed: once more
            connection = self.connection()
            try:
                connection.request(method, path, body=payload, headers=headers)
                answer = connection.getresponse()
                return answer.status, answer.read()
            except (http.client.HTTPException, OSError):
                connection.close()
                self.local.connection = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def login(self, tenant: str) -> str:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=REQUEST_TIMEOUT)
        try:
            connection.request(
                "POST",
                "/judge/login",
                body=f"tenant={tenant}",
                headers={"content-type": "application/x-www-form-urlencoded"},
            )
            answer = connection.getresponse()
            answer.read()
            cookie = answer.getheader("set-cookie") or ""
        finally:
            connection.close()
        if answer.status != 303 or not cookie:
            raise SystemExit(f"signing in to /judge as {tenant!r} answered {answer.status}")
        return cookie.split(";", 1)[0]

    def plan(self, number: int) -> tuple[str, str, str, Any, dict[str, str]]:
        """Request ``number``: (kind, method, path, body, headers), drawn under the lock so
        the sequence is the seed's whatever the threads' order. ``--fresh-connections`` of
        them ask to close the connection after the answer (the next opens a new one), as a
        client without a session does."""
        with self.lock:
            kind = self.rng.choices(self.kinds, self.weights)[0]
            tenant = self.rng.choice(TENANTS)
            headers = {"connection": "close"} if self.rng.random() < self.args.fresh else {}
            if kind in ("search", "follow-up"):
                body = self.search_body(kind, tenant, number)
                return kind, "POST", "/search", body, headers
            if kind.startswith("judge"):
                path = self.judge_path(kind, tenant)
                return kind, "GET", path, None, headers | {"cookie": self.cookies[tenant]}
            method, path, body = self.other(kind, tenant)
            return kind, method, path, body, headers

    def search_body(self, kind: str, tenant: str, number: int) -> dict[str, Any]:
        rng = self.rng
        body: dict[str, Any] = {
            "question": self.questions.question(number),
            "tenant": tenant,
            "mode": rng.choice(SEARCH_MODES),
            "k": rng.randint(1, 20),
        }
        if rng.random() < 0.3:
            body["candidates"] = rng.choice((10, 20, 100, 200))
        rerank = rng.choice((True, False, None))
        if self.args.reranker == "none":
            body["rerank"] = False
        elif rerank is not None:
            body["rerank"] = rerank
        if rng.random() < 0.2:
            body["expand"] = rng.choice(EXPANSIONS)
        if rng.random() < 0.2:
            body["one_per_document"] = True
        if rng.random() < 0.1:
            body["filters"] = {"tags": [rng.choice(self.questions.words)]}
        if kind == "follow-up":
            body["history"] = self.questions.history()
        return body

    def judge_path(self, kind: str, tenant: str) -> str:
        question = self.rng.randrange(SET_SIZE)
        if kind == "judge-sets":
            return "/judge"
        if kind == "judge-question":
            return f"/judge/sets/{self.set_ids[tenant]}/{question}"
        a, b = self.rng.sample(SEARCH_MODES, 2)
        return f"/judge/sets/{self.set_ids[tenant]}/{question}/compare?a={a}&b={b}"

    def other(self, kind: str, tenant: str) -> tuple[str, str, Any]:
        rng = self.rng
        if kind == "health":
            return "GET", "/health", None
        if kind == "log":
            return "GET", f"/log?tenant={tenant}&limit={rng.randint(1, 50)}", None
        if kind == "event":
            query_id = rng.choice(self.query_ids) if self.query_ids else str(uuid.uuid4())
            body = {"query_id": query_id, "action_name": "click", "tenant": tenant}
            return "POST", "/events", body
        bad = rng.choice(
            (
                {"question": "refunds", "tenant": tenant, "size": 5},  # an unknown field: 422
                {"question": "x" * 20_000, "tenant": tenant},  # over the limit: 413
                {"question": "refunds", "tenant": tenant, "k": "5"},  # a string: 422
            )
        )
        return "POST", "/search", bad

    def one(self, number: int) -> str:
        kind, method, path, body, headers = self.plan(number)
        try:
            status, answer = self.send(method, path, body, headers)
        except (http.client.HTTPException, OSError) as exc:
            status, answer = 0, str(exc).encode()
        if kind in ("search", "follow-up") and status == 200:
            found = json.loads(answer)
            ran = (found.get("reranker") or {}).get("kind") or "none"
            with self.lock:
                self.rerankers[ran] += 1  # what was measured: the answers name it
                if found.get("query_id"):
                    self.query_ids.append(found["query_id"])
        with self.lock:
            self.statuses[f"{kind} {status}"] += 1
            if status == 0 or status >= 500:
                self.server_errors.append(f"{method} {path[:60]}: {status} {answer[:200]!r}")
        return kind


def start_cluster(stack: list[Any]) -> str:
    from tests.single_node import single_node  # the tests' node, over loopback only

    container = single_node()
    container.start()
    stack.append(container.stop)
    return f"http://127.0.0.1:{container.get_exposed_port(9200)}"


def prepare_index(settings: Settings, client: Any) -> dict[str, str]:
    """The sample pushed for each tenant, and each tenant's query set; its ids by tenant."""
    from loader.index.apply import apply_config
    from loader.ingest.sync import push
    from loader.models.embedding import embedder_for
    from loader.query.judgments import create_query_set

    embedder = embedder_for(settings)
    apply_config(settings, dimension=embedder.dimension, client=client)
    questions = Questions(random.Random(0), fixed=False).bases[:SET_SIZE]
    set_ids = {}
    for tenant in TENANTS:
        report = push(DOCS, settings, client=client, embedder=embedder, tenant=tenant)
        # partners/ names a tenant of its own in its front matter: skipped for these two.
        if report.errors or not report.chunks:
            raise SystemExit(f"pushing {DOCS} for {tenant}: {report.errors or 'no chunks'}")
        made = create_query_set(client, settings.index_name, tenant, QUERY_SET, questions=questions)
        set_ids[tenant] = made.set_id
    client.indices.refresh(index=settings.index_name)
    return set_ids


def train_learned(root: Path) -> None:
    """A LambdaMART model of this version's features, trained on synthetic examples in
    seconds (as tests/unit/models/rerank/test_learned.py does), written as ``loader learn``
    writes one (``write_model``) into each tenant's folder of ``root``: every tenant reranks
    with its own."""
    import numpy as np

    from loader.models.rerank.features import FEATURE_NAMES, FEATURE_VERSION, feature_fingerprint
    from loader.models.rerank.tenants import tenant_model_folder
    from loader.train.booster import PRIOR_SCALE, train_booster
    from loader.train.examples import Example
    from loader.train.learn import LearnRequest
    from loader.train.model_store import write_model

    rng = np.random.default_rng(1)
    examples = []
    for number in range(200):
        features = rng.random((20, len(FEATURE_NAMES)))
        labels = np.zeros(20)
        labels[int(rng.integers(20))] = 2
        keys = [f"q{number}-c{i}" for i in range(20)]
        examples.append(
            Example(
                question_id=f"q{number}", source="synthetic", features=features,
                prior=1 / np.log2(2 + np.arange(20)), labels=labels, keys=keys,
                relevant={keys[int(labels.argmax())]: 2}, implicit=False, chunks=[],
            )
        )  # fmt: skip
    booster = train_booster(examples, LearnRequest(sources=("synthetic",), out=root))
    for tenant in TENANTS:
        facts = {
            "feature_fingerprint": feature_fingerprint(),
            "feature_version": FEATURE_VERSION,
            "prior_scale": PRIOR_SCALE,
            "residual_weight": 0.5,
            "tenant": tenant,
        }
        write_model(tenant_model_folder(root, tenant), booster, {"model": facts})


def start_serve(args: argparse.Namespace, settings: Settings, work: Path) -> subprocess.Popen:
    """``loader serve`` on a free loopback port, its log in ``work``; waits for /health."""
    config = {
        "index_name": settings.index_name,
        "query_log": args.query_log,
        "rerank": "off" if args.reranker == "none" else "auto",
    }
    if args.reranker == "keyword":
        config["rerank_backend"] = "keyword"
    if args.reranker == "learned":
        train_learned(work / "learned")
        config |= {"rerank_backend": "learned", "learned_reranker": str(work / "learned")}
    (work / "loader.toml").write_text(
        "".join(f"{name} = {json.dumps(value)}\n" for name, value in config.items()), "utf-8"
    )
    env = {
        **os.environ,
        "OPENSEARCH_URL": settings.opensearch_url,
        "HF_HUB_CACHE": str(work / "hub"),  # no cross-encoder: the reranker is the one asked
        "PYTHONPATH": str(REPOSITORY),
    }
    for pair in args.serve_env:
        name, _, value = pair.partition("=")
        env[name] = value
    args.port = free_port()
    command = [sys.executable, "-m", "loader", "serve", "--port", str(args.port)]
    log = (work / "serve.log").open("wb")
    server = subprocess.Popen(
        [*command, "--config", str(work / "loader.toml")],
        cwd=work,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 600
    while True:
        if server.poll() is not None:
            raise SystemExit(f"loader serve exited {server.returncode}:\n{_tail(work)}")
        try:
            probe = http.client.HTTPConnection("127.0.0.1", args.port, timeout=5)
            probe.request("GET", "/health")
            if probe.getresponse().status == 200:
                probe.close()
                return server
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"loader serve did not answer /health in 600 s:\n{_tail(work)}")
        time.sleep(1)


def _tail(work: Path) -> str:
    return (work / "serve.log").read_text("utf-8", "replace")[-3000:]


def run(args: argparse.Namespace, server: subprocess.Popen, set_ids: dict[str, str]) -> int:
    """Send the requests; print RSS every ``args.every``; the exit code (0: pass)."""
    traffic = Traffic(args, args.port, set_ids)
    traffic.cookies = {tenant: traffic.login(tenant) for tenant in TENANTS}
    samples = [(0, rss_kib(server.pid), 0.0)]
    print(f"{'requests':>9} {'RSS MB':>8} {'seconds':>8}", flush=True)
    print(f"{0:9d} {samples[0][1] / 1024:8.1f} {0.0:8.1f}", flush=True)
    started = time.monotonic()
    deadline = started + args.max_seconds
    done = 0
    done_lock = threading.Lock()

    def one(number: int) -> None:
        nonlocal done
        if time.monotonic() > deadline or server.poll() is not None:
            return  # out of time, or serve is gone: what was measured is reported
        traffic.one(number)
        with done_lock:
            done += 1
            if done % args.every == 0:
                sample = (done, rss_kib(server.pid), time.monotonic() - started)
                samples.append(sample)
                print(f"{sample[0]:9d} {sample[1] / 1024:8.1f} {sample[2]:8.1f}", flush=True)

    with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
        try:
            list(pool.map(one, range(args.requests)))
        except KeyboardInterrupt:
            deadline = 0.0  # the queued requests return at once
            raise
    if server.poll() is not None:
        print(f"FAIL: loader serve exited {server.returncode} after {done} requests")
        return 1
    return verdict(args, traffic, samples, done)


def verdict(
    args: argparse.Namespace, traffic: Traffic, samples: list[tuple[int, int, float]], done: int
) -> int:
    """The statuses, the second half's growth and the pass/fail line; the exit code."""
    print("\nanswers: " + ", ".join(f"{k} x{v}" for k, v in sorted(traffic.statuses.items())))
    print("reranked by: " + ", ".join(f"{k} x{v}" for k, v in sorted(traffic.rerankers.items())))
    failed = False
    if args.reranker != "none" and not traffic.rerankers.get(args.reranker):
        failed = True
        print(f"FAIL: no search answer was reranked by the {args.reranker} reranker")
    if traffic.server_errors:
        failed = True
        print(f"FAIL: {len(traffic.server_errors)} answers were 5xx or no answer; first:")
        print("  " + "\n  ".join(traffic.server_errors[:5]))
    if done < args.requests:
        print(f"cut short at {args.max_seconds:.0f} s: {done} of {args.requests} requests sent")
    half = [s for s in samples if s[0] >= done / 2]
    if len(half) < 2:
        print("FAIL: too few samples for the second half's growth (raise --requests)")
        return 1
    first, last = half[0], samples[-1]
    growth = 100.0 * (last[1] - first[1]) / first[1]
    print(
        f"RSS {samples[0][1] / 1024:.1f} MB before the first request, {first[1] / 1024:.1f} MB "
        f"at {first[0]}, {last[1] / 1024:.1f} MB at {last[0]}: the last {last[0] - first[0]} "
        f"requests added {growth:+.1f} % ({(last[1] - first[1]) / 1024:+.1f} MB)"
    )
    if growth > args.max_growth or done < args.requests:
        failed = True
    print(
        f"{'FAIL' if failed else 'PASS'}: second-half growth {growth:+.1f} % "
        f"(at most {args.max_growth:.1f} %), {len(traffic.server_errors)} server errors"
    )
    return 1 if failed else 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=None, help="a loopback cluster (default: start one)")
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--every", type=int, default=1000, help="requests between RSS samples")
    parser.add_argument("--reranker", choices=("learned", "keyword", "none"), default="learned")
    parser.add_argument("--query-log", choices=("ubi", "off"), default="ubi")
    parser.add_argument("--fixed-question", action="store_true", help="one question, every time")
    parser.add_argument(
        "--fresh-connections",
        dest="fresh",
        type=float,
        default=0.5,
        help="share of the requests sent on a new connection, closed after the answer",
    )
    parser.add_argument("--serve-env", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--max-growth", type=float, default=5.0, help="percent, second half")
    parser.add_argument("--max-seconds", type=float, default=5400.0, help="stop sending after")
    parser.add_argument("--seed", type=int, default=52)
    args = parser.parse_args()
    if args.url and urlsplit(args.url).hostname not in LOOPBACK:
        parser.error(f"--url must point at this machine (127.0.0.1), got {args.url}")
    if not 1 <= args.requests <= MAX_REQUESTS:
        parser.error(f"--requests: 1 to {MAX_REQUESTS}")
    args.every = max(1, min(args.every, args.requests))
    args.concurrency = max(1, min(args.concurrency, 64))
    return args


def main() -> None:
    args = parse_args()
    cleanups: list[Any] = []
    work = Path(tempfile.mkdtemp(prefix="bench-serve-memory-"))
    cleanups.append(lambda: shutil.rmtree(work, ignore_errors=True))
    code = 1
    try:
        url = args.url or start_cluster(cleanups)
        settings = Settings(
            opensearch_url=url, index_name=f"bench-memory-{uuid.uuid4().hex[:8]}", query_log="ubi"
        )
        client = connect(settings)
        cleanups.append(lambda: _delete_owned(client, settings.index_name))
        set_ids = prepare_index(settings, client)
        server = start_serve(args, settings, work)
        cleanups.append(lambda: _stop(server))
        print(
            f"loader serve pid {server.pid} on 127.0.0.1:{args.port}: {args.requests} requests "
            f"at concurrency {args.concurrency}, reranker {args.reranker}, query_log "
            f"{args.query_log}{', one question' if args.fixed_question else ''}"
            f"{', ' + ' '.join(args.serve_env) if args.serve_env else ''}; "
            f"{os.cpu_count()} cpus",
            flush=True,
        )
        code = run(args, server, set_ids)
        if code:
            print(f"serve's log, last lines:\n{_tail(work)[-1500:]}")
    finally:
        for cleanup in reversed(cleanups):
            cleanup()
    raise SystemExit(code)


def _stop(server: subprocess.Popen) -> None:
    if server.poll() is None:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _delete_owned(client: Any, alias: str) -> None:
    """What ``loader apply`` made for ``alias`` (its indices, logs, pipelines, templates), each
    deleted by its exact name, as the tests clean up."""
    from tests.conftest import cleanup_owned

    cleanup_owned(client, alias)


if __name__ == "__main__":
    main()
