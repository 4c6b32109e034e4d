"""Latency of server-side query embedding and of `loader serve`, on part of SciFact.

    python benchmarks/bench_text_templates.py --url http://127.0.0.1:9200 --docs 300 --queries 50

Needs a cluster with ml-commons (the project's image). Applies a fresh alias with
server_side_embedding (registers/deploys the embedding model once), pushes the first --docs
SciFact documents, then prints p50 / p95 in milliseconds of:

- ``text``: the text-only hybrid template (<alias>-hybrid_text, RRF), the cluster embeds;
- ``vector``: client-side embedding + the vector-passing hybrid template (<alias>-hybrid);
- ``serve``: POST /search through `loader serve` (uvicorn on 127.0.0.1), without and with rerank
  (a CrossEncoder built locally from the bundled MiniLM weights: no trained reranker exists here).

Request counts are bounded by --queries; traffic goes only to loopback. Everything the run
created is deleted by exact name afterwards.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from loader.cluster.client import connect  # noqa: E402
from loader.eval.datasets import corpus_to_documents, load_beir  # noqa: E402
from loader.index.apply import apply_config  # noqa: E402
from loader.index.render import config_names  # noqa: E402
from loader.ingest.sync import sync_documents  # noqa: E402
from loader.models.embedding import embedder_for, resolve_model_path  # noqa: E402
from loader.settings import Settings  # noqa: E402

DEFAULT_DATASET = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "scifact"
TENANT = "bench"


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"p50 {statistics.median(ordered):7.1f} ms   p95 {p95:7.1f} ms   (n={len(ordered)})"


def timed(call) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def cross_encoder(folder: Path) -> str:
    import torch
    from sentence_transformers import CrossEncoder

    torch.manual_seed(0)
    CrossEncoder(resolve_model_path("all-MiniLM-L6-v2"), num_labels=1).save(str(folder))
    return str(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("OPENSEARCH_URL", "http://127.0.0.1:9200"))
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args()
    if urlsplit(args.url).hostname not in ("127.0.0.1", "localhost", "::1"):
        parser.error("--url must be a loopback address")
    queries = min(max(args.queries, 1), 200)

    dataset = load_beir(args.dataset)
    corpus = dict(list(dataset.corpus.items())[: args.docs])
    questions = list(dataset.queries.values())[:queries]
    alias = f"bench-text-{uuid.uuid4().hex[:8]}"
    settings = Settings(
        opensearch_url=args.url, index_name=alias, server_side_embedding=True, request_timeout=120.0
    )
    client = connect(settings)
    embedder = embedder_for(settings)
    names = config_names(alias)
    try:
        apply_config(settings, dimension=embedder.dimension, client=client)
        report = sync_documents(
            corpus_to_documents(corpus),
            settings,
            collection="scifact",
            tenant=TENANT,
            client=client,
            embedder=embedder,
        )
        print(f"{report.chunks} chunks of {len(corpus)} SciFact documents; {queries} queries")

        def text_call(question: str) -> None:
            client.search_template(
                index=alias,
                body={
                    "id": names.object_name("hybrid_text"),
                    "params": {"query_text": question, "tenant": TENANT, "size": 10, "k": 50},
                },
                params={"search_pipeline": names.rrf_pipeline},
            )

        def vector_call(question: str) -> None:
            vector = embedder.embed_queries([question])[0].tolist()
            client.search_template(
                index=alias,
                body={
                    "id": names.hybrid_template,
                    "params": {
                        "query_text": question,
                        "query_vector": vector,
                        "tenant": TENANT,
                        "size": 10,
                        "k": 50,
                    },
                },
                params={"search_pipeline": names.rrf_pipeline},
            )

        for warm in questions[:3]:  # first calls load caches on both sides
            text_call(warm)
            vector_call(warm)
        text = [timed(lambda q=q: text_call(q)) for q in questions]
        vector = [timed(lambda q=q: vector_call(q)) for q in questions]
        print(f"text-only template (cluster embeds):      {percentiles(text)}")
        print(f"client embedding + vector template:       {percentiles(vector)}")

        serve_figures(settings, questions)
    finally:
        for index in client.indices.get(index=f"{alias}-v*", ignore=[404]):
            if index.startswith(f"{alias}-v"):
                client.indices.delete(index=index)
        for stem in ("rrf", "minmax"):
            client.transport.perform_request(
                "DELETE", f"/_search/pipeline/{names.object_name(stem)}", params={"ignore": 404}
            )
        client.ingest.delete_pipeline(id=names.ingest_pipeline, ignore=[404])
        for stem in ("hybrid", "bm25", "vector", "hybrid_text", "vector_text"):
            client.delete_script(id=names.object_name(stem), ignore=[404])


def serve_figures(settings: Settings, questions: list[str]) -> None:
    import uvicorn

    from loader.serve.app import create_app

    with tempfile.TemporaryDirectory() as folder:
        settings = settings.replace(reranker_model=cross_encoder(Path(folder)))
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        server = uvicorn.Server(
            uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
        )
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.05)
        try:
            for rerank in (False, True):

                def post(question: str, rerank: bool = rerank) -> None:
                    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                    body = json.dumps(
                        {"question": question, "tenant": TENANT, "rerank": rerank, "k": 5}
                    )
                    connection.request(
                        "POST", "/search", body, {"Content-Type": "application/json"}
                    )
                    response = connection.getresponse()
                    response.read()
                    assert response.status == 200, response.status
                    connection.close()

                post(questions[0])
                samples = [timed(lambda q=q: post(q)) for q in questions]
                label = "with rerank (50 candidates)" if rerank else "without rerank"
                print(f"POST /search {label:29} {percentiles(samples)}")
        finally:
            server.should_exit = True
            thread.join(timeout=10)


if __name__ == "__main__":
    main()
