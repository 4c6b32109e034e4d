"""What the learned rerank adds to a search's latency: the sample index, 50 candidates.

    loader apply && loader push docs/        # the sample index, default settings
    loader learn ... --out /tmp/learned      # any model folder `loader learn` wrote
    python3 benchmarks/bench_learned_rerank.py --model /tmp/learned \\
        [--index INDEX] [--tenant default] [--rounds 5]

The questions are the 52 standalone questions of ``tests/fixtures/eval/conversations.jsonl``
(about ``docs/``). Each round searches every question once with ``rerank`` off and once with
the learned rerank (``rerank_backend = "learned"``), alternately, so both see the same cluster
load; ``candidates`` 50, the other settings as resolved. One warm-up round is not counted.
Prints p50 / p90 of the end-to-end ``search`` time (``timings["total_ms"]``) without and with
the rerank, their difference and ratio, the rerank stage alone (``rerank_ms``), the model's
readers (a two-reader model also looks up the second reader's cosine) and the machine's load
average before and after; ``--out`` writes them as JSON too.

Not a test. Requests go only to the settings' cluster (a loopback URL).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loader.eval.metrics import percentile  # noqa: E402
from loader.query.request import SearchRequest  # noqa: E402
from loader.query.search import search  # noqa: E402
from loader.resolve import resolve_settings  # noqa: E402
from loader.settings import Settings  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CONVERSATIONS = ROOT / "tests" / "fixtures" / "eval" / "conversations.jsonl"
CANDIDATES = 50


def questions() -> list[str]:
    """The standalone questions about ``docs/``."""
    with CONVERSATIONS.open(encoding="utf-8") as lines:
        return [json.loads(line)["standalone"] for line in lines if line.strip()]


def timed_search(question: str, settings: Settings, tenant: str, rerank: bool) -> dict[str, float]:
    """One search's stage timings (milliseconds) and how many candidates it retrieved."""
    request = SearchRequest.from_settings(
        settings, question=question, tenant=tenant, rerank=rerank, candidates=CANDIDATES
    )
    result = search(request, settings)
    # A question that finds nothing has nothing to rerank (the smoke run's index is not docs/).
    if rerank and not result.reranked and result.rerank_skipped != "nothing to rerank":
        raise SystemExit(
            f"the search of {question!r} was not reranked: {result.rerank_skipped} "
            f"{list(result.warnings)}"
        )
    return {**result.timings, "candidates": float(result.candidates)}


def measure(
    settings: Settings, tenant: str, rounds: int, limit: int | None = None
) -> dict[str, dict[str, list[float]]]:
    """``{"off" | "learned": {"total_ms", "rerank_ms", "candidates": [...]}}`` over ``rounds``
    rounds after one warm-up round, over the first ``limit`` questions (all: ``None``)."""
    times: dict[str, dict[str, list[float]]] = {
        "off": {"total_ms": [], "rerank_ms": [], "candidates": []},
        "learned": {"total_ms": [], "rerank_ms": [], "candidates": []},
    }
    asked = questions()[:limit]
    for round_number in range(rounds + 1):
        for question in asked:
            for name, rerank in (("off", False), ("learned", True)):
                timings = timed_search(question, settings, tenant, rerank)
                if round_number == 0:
                    continue  # warm-up: models loaded, caches filled
                times[name]["total_ms"].append(timings["total_ms"])
                times[name]["rerank_ms"].append(timings.get("rerank_ms", 0.0))
                times[name]["candidates"].append(timings["candidates"])
    return times


def report(times: dict[str, dict[str, list[float]]]) -> list[str]:
    """The printed lines: p50 / p90 without and with the rerank, difference, ratio."""
    off, learned = times["off"]["total_ms"], times["learned"]["total_ms"]
    p50_off, p50_on = percentile(off, 50), percentile(learned, 50)
    p90_off, p90_on = percentile(off, 90), percentile(learned, 90)
    stage = times["learned"]["rerank_ms"]
    return [
        f"searches per configuration: {len(off)} ({CANDIDATES} candidates asked, "
        f"{percentile(times['learned']['candidates'], 50):.0f} reranked at the median)",
        f"search, rerank off:     p50 {p50_off:7.1f} ms   p90 {p90_off:7.1f} ms",
        f"search, learned rerank: p50 {p50_on:7.1f} ms   p90 {p90_on:7.1f} ms",
        f"added by the learned rerank: p50 {p50_on - p50_off:+.1f} ms "
        f"(x {p50_on / p50_off:.2f}), p90 {p90_on - p90_off:+.1f} ms (x {p90_on / p90_off:.2f})",
        f"rerank stage alone: p50 {percentile(stage, 50):.1f} ms   "
        f"p90 {percentile(stage, 90):.1f} ms",
    ]


def figures(times: dict[str, dict[str, list[float]]], model: str, loads: list) -> dict:
    """The JSON of ``report``'s figures."""
    from loader.models.rerank.learned_files import provenance_facts

    facts = provenance_facts(Path(model)) if (Path(model) / "provenance.json").is_file() else {}
    off, learned = times["off"]["total_ms"], times["learned"]["total_ms"]
    return {
        "model": model,
        "readers": facts["features"].readers if facts else None,
        "searches": len(off),
        "candidates_reranked_p50": percentile(times["learned"]["candidates"], 50),
        "off_ms": [round(percentile(off, 50), 1), round(percentile(off, 90), 1)],
        "learned_ms": [round(percentile(learned, 50), 1), round(percentile(learned, 90), 1)],
        "added_p50_ms": round(percentile(learned, 50) - percentile(off, 50), 1),
        "rerank_stage_ms": [
            round(percentile(times["learned"]["rerank_ms"], 50), 1),
            round(percentile(times["learned"]["rerank_ms"], 90), 1),
        ],
        "load_average_before_after": loads,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="The learned reranker's folder.")
    parser.add_argument("--index", default=None, help="Index alias (default: the settings').")
    parser.add_argument("--tenant", default="default", help="Tenant the docs were pushed to.")
    parser.add_argument("--url", default=None, help="OpenSearch URL (default: the settings').")
    parser.add_argument("--rounds", type=int, default=5, help="Rounds over the 52 questions.")
    parser.add_argument("--limit", type=int, default=None, help="Only the first N questions.")
    parser.add_argument("--out", default=None, help="Write the figures as JSON here too.")
    args = parser.parse_args()
    overrides: dict[str, Any] = {"opensearch_url": args.url, "index_name": args.index}
    overrides.update(rerank_backend="learned", learned_reranker=args.model, query_log="off")
    if (Path(args.model) / "learned_reranker.txt").is_file():  # one model: lent to --tenant
        from loader.models.rerank.tenants import recorded_facts

        owner = recorded_facts(Path(args.model))["tenant"]
        overrides["learned_reranker_tenants"] = f"{args.tenant}={owner}"
    settings, _ = resolve_settings(overrides=overrides)
    before = [round(load, 2) for load in os.getloadavg()]
    times = measure(settings, args.tenant, args.rounds, args.limit)
    loads = [before, [round(load, 2) for load in os.getloadavg()]]
    for line in report(times):
        print(line)
    print(f"load average (1, 5, 15 min) before {loads[0]}, after {loads[1]}")
    if args.out:
        text = json.dumps(figures(times, args.model, loads), indent=2)
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
