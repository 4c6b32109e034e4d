"""How index size, memory, build time, search latency and HNSW recall grow with the corpus.

    python benchmarks/bench_scale.py --start-node --stop-node \\
        [--sizes 10000,100000,1000000] [--deadline 12:45] [--queries 200] [--recall-queries 50]
    python benchmarks/bench_scale.py --url http://127.0.0.1:9250 --sizes 10000

For each size n it builds the alias ``bench-scale-<n>`` on one node the way a user's first bulk
load would: ``loader.index.apply.apply_config`` puts the project's real mapping (lucene HNSW, m,
ef_construction), ingest pipeline, fusion pipelines and stored templates; the index gets
``refresh_interval: -1`` and 0 replicas (``loader.index.bulk_load``, as ``push --bulk-load``);
chunks are written through ``loader.ingest.bulk.send_bulk`` (``--bulk-threads`` senders, 500
chunks a request) with every field of the strict mapping; then the index's own settings are
restored and the index refreshed, force-merged to one segment,
refreshed and flushed (so the merged-away files are gone before sizes are read).

The corpus (``scale_corpus``): real SciFact text cut into 16,756 units of three sentences, each
embedded ONCE by all-MiniLM-L6-v2 (onnx) and cached in ``~/.cache/loader``; copy 0 of a unit is
the unit itself, later copies shuffle its sentences and borrow one sentence of a random other
unit, with the vector ``normalize(e_a + 0.25 e_b + noise)`` (Gaussian noise of norm 0.35).

Then it reports, per size: store bytes per chunk (``_stats``), the vector and graph segment files
(what the page cache must hold for vector search to stay off the disk), k-NN native graph memory
(``_plugins/_knn/stats``: 0 with the lucene engine, whose graphs are memory-mapped files), JVM
heap used, build wall time and chunks/s, p50/p95 of each mode through ``loader search``'s own path
(stored templates; no rerank; ``--queries`` SciFact test questions after ``--warmup`` train
questions, sequential), without and with the measured per-question embedding time, and recall@10
of ``loader search --mode vector -k 10`` (its k-NN clause asks for ``candidates`` = 50 neighbours
at the template's ef_search) against the exact top 10 on ``--recall-queries`` questions; the
exact top 10 is a numpy scan over the very vectors indexed, checked against OpenSearch's exact
``knn_score`` script scan of the index on ``--exact-check`` questions (a script scan of 1M chunks
per question is too slow for 50 here). Below 0.95 recall, the ef_search values of
``--ef-sweep`` are tried in turn (``apply_config`` puts the templates with each).
A size that cannot be built before ``--deadline`` (UTC, estimated from the previous size) is
extrapolated from the measured ones instead (model in ``scale_report``). Prints a Markdown table,
writes the JSON and the PNG plot (``--plot``). Not a test; traffic only to a loopback ``--url``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale_corpus as corpus  # noqa: E402
import scale_measure as measure  # noqa: E402
import scale_report as report  # noqa: E402

from loader.cluster.client import connect  # noqa: E402
from loader.index.apply import apply_config  # noqa: E402
from loader.index.bulk_load import bulk_loading  # noqa: E402
from loader.ingest.bulk import BulkAction, BulkResult, send_bulk  # noqa: E402
from loader.ingest.fingerprint import chunking_fingerprint  # noqa: E402
from loader.models.embedding import embedder_for  # noqa: E402
from loader.resolve import resolve_settings  # noqa: E402

HERE = Path(__file__).resolve().parent
DEFAULT_DATASET = HERE.parents[1] / "shared" / "datasets" / "scifact"
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
NODE_NAME = "loader-bench-scale"


def start_node(image: str, port: int, heap: str) -> str:
    """A single node of the project's image on 127.0.0.1:``port``, no data volume (removing the
    container removes its data); reused when it already runs. Returns its URL once green/yellow."""
    state = subprocess.run(
        ["docker", "inspect", "--format", "{{.State.Status}}", NODE_NAME],
        capture_output=True,
        text=True,
    )
    if state.returncode != 0:
        subprocess.run(
            ["docker", "run", "-d", "--name", NODE_NAME, "-p", f"127.0.0.1:{port}:9200",
             "-e", "discovery.type=single-node", "-e", "DISABLE_SECURITY_PLUGIN=true",
             "-e", f"OPENSEARCH_JAVA_OPTS=-Xms{heap} -Xmx{heap}", image],
            check=True, capture_output=True,
        )  # fmt: skip
    elif state.stdout.strip() != "running":
        subprocess.run(["docker", "start", NODE_NAME], check=True, capture_output=True)
    return f"http://127.0.0.1:{port}"


def wait_healthy(client, seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            client.cluster.health(params={"wait_for_status": "yellow", "request_timeout": 40})
            return
        except Exception:  # noqa: BLE001 - the node is still starting: connection refused, 503
            if time.monotonic() > deadline:
                raise
            time.sleep(2)


def chunk_actions(index: str, chunks, chunking: str):
    """Bulk index actions with the fields of the strict mapping (as ``sync.chunk_body``)."""
    for i, unit, text, vector in chunks:
        body_text = text.split("\n\n", 1)[1]
        doc_id, chunk = f"scale-{i}", corpus.chunk_id(i)
        document = {
            "chunk_id": chunk, "doc_id": doc_id, "source": f"scifact/{unit.doc_id}.txt",
            "collection": corpus.COLLECTION, "content_hash": f"h{i}", "doc_hash": f"d{i}",
            "tenant": corpus.TENANT, "tags": ["scifact"], "section_id": unit.doc_id,
            "strategy": "structure", "chunking": chunking, "position": 0, "content": text,
            "title": unit.title, "heading_path": unit.title, "body": body_text,
            "embedding": [round(float(x), 6) for x in vector],
        }  # fmt: skip
        yield BulkAction("index", index, chunk, doc_id, document)


def bulk_load(client, index: str, synthetic, size: int, threads: int, chunking: str) -> BulkResult:
    """``threads`` senders over consecutive blocks, so making JSON overlaps the cluster's work."""
    block = synthetic.BLOCK
    per_thread = math.ceil(size / block / threads) * block
    results = [BulkResult() for _ in range(threads)]

    def send(number: int) -> None:
        start, stop = number * per_thread, min(size, (number + 1) * per_thread)
        actions = chunk_actions(index, synthetic.chunks(start, stop), chunking)
        results[number] = send_bulk(client, actions, max_count=500)

    workers = [threading.Thread(target=send, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    total = BulkResult()
    for result in results:
        total.succeeded += result.succeeded
        total.retries += result.retries
        total.errors += result.errors
    return total


def build(settings, client, synthetic, size: int, threads: int) -> dict:
    """Apply the configuration, bulk-load ``size`` chunks, restore settings, refresh, merge."""
    started = time.perf_counter()
    apply_config(settings, dimension=384, client=client)
    index = next(iter(client.indices.get_alias(name=settings.index_name)))
    applied = time.perf_counter()
    # The project's bulk-load mode: refresh off and 0 replicas while writing, the index's own
    # values recorded first and restored (then one refresh) however the block ends.
    with bulk_loading(client, settings):
        result = bulk_load(client, index, synthetic, size, threads, chunking_fingerprint(settings))
    loaded = time.perf_counter()
    client.indices.forcemerge(index=index, params={"max_num_segments": 1, "request_timeout": 3600})
    # the merged segment replaces the old ones only in a new reader; then commit, so their files go
    client.indices.refresh(index=index, params={"request_timeout": 600})
    client.indices.flush(index=index, params={"request_timeout": 600})
    merged = time.perf_counter()
    if result.errors:
        raise SystemExit(f"{len(result.errors)} chunks failed, first: {result.errors[0]}")
    return {
        "index_name": index,
        "apply_seconds": applied - started,
        "bulk_seconds": loaded - applied,
        "refresh_merge_seconds": merged - loaded,
        "build_seconds": merged - started,
        "bulk_retries": result.retries,
    }


def recall_rows(args, settings, client, index, embedder, exact, questions) -> dict[str, float]:
    """Recall@10 at the configured ef_search and, while below 0.95, at each ``--ef-sweep``."""
    recalls = {}
    for ef in [settings.hnsw_ef_search, *args.ef_sweep]:
        swept = settings.replace(hnsw_ef_search=ef)
        if ef != settings.hnsw_ef_search:
            apply_config(swept, dimension=384, client=client)  # puts the templates with ef
        recalls[ef] = measure.hnsw_recall(swept, client, embedder, questions, exact)
        print(f"  recall@10 at ef_search {ef}: {recalls[ef]:.3f}", flush=True)
        if recalls[ef] >= 0.95:
            break
    if settings.hnsw_ef_search != ef:
        apply_config(settings, dimension=384, client=client)
    return recalls


def exact_neighbours(args, client, index, synthetic, size, vectors) -> tuple[list, dict]:
    """Exact top 10 by numpy over the very vectors indexed, checked against OpenSearch's own
    exact ``knn_score`` scan on ``--exact-check`` questions."""
    exact = measure.numpy_tops(synthetic.chunk_vectors(size), vectors, corpus.chunk_id)
    checked = vectors[: args.exact_check]
    scanned, scan_ms = measure.exact_tops(client, index, checked)
    agree = [len(set(a) & set(b)) / len(a) for a, b in zip(scanned, exact, strict=False)]
    check = {"questions": len(checked), "agreement": float(sum(agree) / max(1, len(agree)))}
    check["scan_ms"] = scan_ms
    print(f"  exact: numpy = knn_score scan on {check['agreement']:.3f} of the top 10 "
          f"({len(checked)} questions, {scan_ms:.0f} ms per scan)", flush=True)  # fmt: skip
    return exact, check


def measure_size(args, settings, client, synthetic, size, embedder, queries, embed_ms) -> dict:
    print(f"\n== {size:,} chunks: building {settings.index_name}", flush=True)
    row = {"size": size, **build(settings, client, synthetic, size, args.bulk_threads)}
    print(f"  built in {row['build_seconds']:.0f} s ({size / row['build_seconds']:.0f} chunks/s; "
          f"bulk {row['bulk_seconds']:.0f} s, refresh+merge {row['refresh_merge_seconds']:.0f} s)",
          flush=True)  # fmt: skip
    timed, warmup = queries["timed"], queries["warmup"]
    row["latency"] = measure.latencies(settings, client, embedder, timed, warmup, embed_ms)
    row["index"] = measure.index_figures(client, row["index_name"])
    questions = timed[: args.recall_queries]
    index = row["index_name"]
    exact, row["exact_check"] = exact_neighbours(
        args, client, index, synthetic, size, embedder.embed_queries(questions)
    )
    row["recall"] = recall_rows(args, settings, client, index, embedder, exact, questions)
    print(report.markdown_table([row]), flush=True)
    if not args.keep_indices:
        client.indices.delete(index=row["index_name"])
    return row


def deadline_allows(rows: list[dict], size: int, deadline: dt.datetime | None) -> bool:
    """Whether building and measuring ``size`` ends before ``deadline`` (n log n from the last)."""
    if deadline is None or not rows:
        return True
    last = rows[-1]
    scale = size * math.log(size) / (last["size"] * math.log(last["size"]))
    estimate = last["build_seconds"] * scale * 1.3 + 600  # margin, queries and exact scans
    finish = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=estimate)
    print(f"\n{size:,} chunks: estimated {estimate / 60:.0f} min, done ~{finish:%H:%M} UTC")
    return finish <= deadline


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=None, help="a running node (default: --start-node's)")
    parser.add_argument("--start-node", action="store_true", help=f"run {NODE_NAME} in Docker")
    parser.add_argument("--stop-node", action="store_true", help="remove it at the end")
    parser.add_argument("--port", type=int, default=9250)
    parser.add_argument("--heap", default="4g")
    parser.add_argument("--image", default="loader-opensearch:3.6.0")
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--queries", type=int, default=200, help="timed questions per mode")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--recall-queries", type=int, default=50)
    parser.add_argument("--exact-check", type=int, default=5, help="knn_score scans per size")
    parser.add_argument("--ef-sweep", default="200,400,800")
    parser.add_argument("--bulk-threads", type=int, default=2)
    parser.add_argument("--deadline", default=None, help="UTC HH:MM; later sizes extrapolated")
    parser.add_argument("--keep-indices", action="store_true")
    parser.add_argument("--index-prefix", default="bench-scale", help="aliases <prefix>-<size>")
    parser.add_argument("--report-only", type=Path, default=None, help="a run's JSON to re-render")
    parser.add_argument("--plot", type=Path, default=HERE / "results" / "bench_scale.png")
    parser.add_argument("--json", type=Path, default=HERE / "results" / "bench_scale.json")
    args = parser.parse_args()
    args.sizes = sorted(int(s) for s in args.sizes.split(","))
    args.ef_sweep = [int(s) for s in args.ef_sweep.split(",") if s]
    if args.url and urlsplit(args.url).hostname not in LOOPBACK:
        parser.error(f"--url must point at this machine (127.0.0.1), got {args.url}")
    if not args.url and not args.start_node and not args.report_only:
        parser.error("give --url of a running node or --start-node")
    if args.deadline:
        hour, minute = (int(part) for part in args.deadline.split(":"))
        now = dt.datetime.now(dt.UTC)
        args.deadline = now.replace(hour=hour, minute=minute, second=0, microsecond=0)
    return args


def load_inputs(args, settings):
    """Units and their vectors, the questions, their vectors and per-question embedding ms."""
    model = embedder_for(settings)
    units = corpus.read_units(args.dataset)
    vectors = corpus.unit_vectors(units, model, settings.embedding_model)
    test, train = (corpus.read_queries(args.dataset, split) for split in ("test", "train"))
    questions = test + train[:100]
    question_vectors = corpus.query_vectors(questions, model, settings.embedding_model)
    queries = {"timed": test[: args.queries], "warmup": train[: args.warmup]}
    embed_ms = corpus.embedding_ms(queries["timed"], model)
    print(f"{len(units):,} units; query embedding p50 {report.percentile(embed_ms, 50):.1f} ms, "
          f"p95 {report.percentile(embed_ms, 95):.1f} ms", flush=True)  # fmt: skip
    embedder = measure.PrecomputedEmbedder(questions, question_vectors)
    return corpus.SyntheticCorpus(units, vectors), embedder, queries, embed_ms


def write_report(args, rows: list[dict], skipped: list[int], note: str) -> None:
    """The table (printed), the plot and the JSON, with the sizes not built extrapolated."""
    everything = rows + [report.extrapolate(rows, size) for size in skipped]
    print("\n" + report.markdown_table(everything))
    if skipped:
        print(f"\nnot built: {skipped}; rows extrapolated, {report.MODEL}")
        for row in everything[len(rows) :]:
            other = {m: round(v["p50"], 1) for m, v in row["latency_other_model"].items()}
            print(f"{row['size']:,} p50 under the other latency model: {other}")
    report.plot(everything, args.plot, note)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"note": note, "rows": everything}, indent=2, default=str))
    print(f"plot: {args.plot}\njson: {args.json}")


def report_only(args) -> None:
    """Re-render the report from an earlier run's JSON (its measured rows) for ``--sizes``."""
    saved = json.loads(args.report_only.read_text(encoding="utf-8"))
    rows = [row for row in saved["rows"] if not row.get("extrapolated")]
    measured = {row["size"] for row in rows}
    write_report(args, rows, [n for n in args.sizes if n not in measured], saved["note"])


def main() -> None:
    args = parse_args()
    if args.report_only:
        return report_only(args)
    url = args.url or start_node(args.image, args.port, args.heap)
    base, _ = resolve_settings(overrides={"opensearch_url": url})
    client = connect(base)
    wait_healthy(client)
    synthetic, embedder, queries, embed_ms = load_inputs(args, base)
    rows, skipped = [], []
    try:
        for size in args.sizes:
            if skipped or not deadline_allows(rows, size, args.deadline):
                skipped.append(size)
                continue
            settings = base.replace(index_name=f"{args.index_prefix}-{size}")
            rows.append(
                measure_size(args, settings, client, synthetic, size, embedder, queries, embed_ms)
            )
    finally:
        if args.stop_node and not args.url:
            subprocess.run(["docker", "rm", "--force", NODE_NAME], capture_output=True)
    note = (
        f"{base.vector_engine} HNSW m={base.hnsw_m} ef_construction={base.hnsw_ef_construction} "
        f"ef_search={base.hnsw_ef_search}; 1 node, heap {args.heap}; 2 cores shared with tests; "
        f"query embedding p50 {report.percentile(embed_ms, 50):.1f} ms"
    )
    write_report(args, rows, skipped, note)


if __name__ == "__main__":
    main()
