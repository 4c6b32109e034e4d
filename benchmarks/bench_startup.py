"""Start-up time of the ``loader`` command: medians of the wall time from process start to exit
for ``loader --help`` and for one search against a node, then the ten slowest imports of
``--help`` (``python -X importtime``).

Each run is a fresh process (``python -m loader`` from this checkout), so the figures include the
interpreter's own start, every import and, for the search, loading the embedding model. The
machine's load average is printed with them: on a busy machine quote medians and that load.

Usage::

    OPENSEARCH_URL=http://127.0.0.1:9200 LOADER_INDEX_NAME=kb \\
        python3 benchmarks/bench_startup.py --runs 7 --question "How long do refunds take?"

The search runs with ``--no-rerank`` and ``--mode hybrid-rrf`` against the index of
``LOADER_INDEX_NAME`` (push some documents first); without ``OPENSEARCH_URL`` it is skipped.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def wall_seconds(args: list[str], runs: int) -> list[float]:
    """Wall time of ``python -m loader <args>`` per run; a run that fails stops the benchmark."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "loader", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        times.append(time.perf_counter() - started)
        if done.returncode != 0:
            raise SystemExit(f"loader {' '.join(args)} exited {done.returncode}: {done.stderr}")
    return times


def slowest_imports(args: list[str], count: int = 10) -> list[tuple[int, str]]:
    """The ``count`` imports with the largest cumulative time (microseconds) for ``args``."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "loader", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line[len("import time:") :].split("|")
        rows.append((int(cumulative), name.strip()))
    return sorted(rows, reverse=True)[:count]


def describe(name: str, times: list[float]) -> str:
    return (
        f"{name}: median {statistics.median(times):.3f} s "
        f"(min {min(times):.3f}, max {max(times):.3f}, {len(times)} runs)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="Processes started per command.")
    parser.add_argument(
        "--question", default="How long do refunds take for late deliveries?", help="Searched."
    )
    options = parser.parse_args()
    print(f"load average: {' '.join(f'{load:.2f}' for load in os.getloadavg())}")
    wall_seconds(["--help"], 1)  # warm the file cache: the figures are of a warm start
    print(describe("loader --help", wall_seconds(["--help"], options.runs)))
    if os.environ.get("OPENSEARCH_URL"):
        search = ["search", options.question, "--no-rerank", "--mode", "hybrid-rrf"]
        wall_seconds(search, 1)
        print(describe("loader search --no-rerank", wall_seconds(search, options.runs)))
    else:
        print("loader search: skipped (set OPENSEARCH_URL and LOADER_INDEX_NAME)")
    print("slowest imports of --help (cumulative):")
    for micros, name in slowest_imports(["--help"]):
        print(f"  {micros / 1000:8.1f} ms  {name}")
    print(f"load average after: {' '.join(f'{load:.2f}' for load in os.getloadavg())}")


if __name__ == "__main__":
    main()
