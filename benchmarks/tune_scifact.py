"""`loader eval --tune` on SciFact: tuned on the train split, the winner against the starting
settings on the test split, with the budget and the wall time.

    python benchmarks/tune_scifact.py --url http://127.0.0.1:9200 [--budget 8] [--limit 200]
        [--space candidates=50,100 --space rrf_rank_constant=20,60] [--out /tmp/tune.json]

The same code as ``loader eval ../shared/datasets/scifact --tune --budget 8`` (through
``loader.eval.tune.tune_settings``). Every combination of index-side settings (chunking) the
descent tries costs a push of the 5,183 abstracts (minutes of embedding on 2 cores), each
configuration a search per train query (809, or --limit): keep --budget small, or restrict
--space to query-time settings (one push in all). Prints the train trials, the test table and the
wall time; --out writes the result as JSON. Nothing is written into loader.toml.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from loader.eval.tune import TuneRequest, render_tune, tune_settings  # noqa: E402
from loader.resolve import resolve_settings  # noqa: E402

DEFAULT_DATASET = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "scifact"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=None, help="OpenSearch URL (default: the settings').")
    parser.add_argument("--dataset", default=str(DEFAULT_DATASET))
    parser.add_argument("--budget", type=int, default=8)
    parser.add_argument("--limit", type=int, default=None, help="Only the first N queries.")
    parser.add_argument("--space", action="append", default=[], metavar="SETTING=V1,V2")
    parser.add_argument("--metric", default="ndcg@10")
    parser.add_argument("--out", default=None, help="Write the result JSON here.")
    parser.add_argument("--index-prefix", default="eval", help="The eval indices' prefix.")
    args = parser.parse_args()
    settings, _ = resolve_settings(overrides={"opensearch_url": args.url, "rerank": False})
    request = TuneRequest(
        args.dataset,
        budget=args.budget,
        metric=args.metric,
        space=tuple(args.space),
        limit=args.limit,
        index_prefix=args.index_prefix,
    )
    started = time.perf_counter()
    result = tune_settings(request, settings, on_event=print)
    print(render_tune(result))
    winner, start = result.test["winner"][args.metric], result.test["start"][args.metric]
    print(
        f"\n{args.metric} on test: {start:.4f} (starting settings) -> {winner:.4f} (tuned: "
        f"{result.changes or 'no change'}); budget {args.budget}, "
        f"{time.perf_counter() - started:.0f} s wall"
    )
    if args.out:
        Path(args.out).write_text(json.dumps(result.to_dict(), indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
