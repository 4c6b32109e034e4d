"""Peak memory and time of reading one Markdown file at the size limit, by shape.

    python benchmarks/bench_markdown_memory.py [--mb 9.9] [--shapes table4,table20,...]
        [--repo PATH] [--keep DIR]

Generates, into a temporary folder (removed afterwards unless ``--keep``), one Markdown file of
about ``--mb`` megabytes (default 9.9, under the default ``max_file_bytes`` of 10 MB) per shape:

- ``table4``, ``table20``: one pipe table of 4 or 20 columns;
- ``bullets``: one long bullet list of one-line items;
- ``paragraph``: one paragraph of many lines;
- ``fence``: one fenced code block;
- ``mix``: headings, paragraphs (with emphasis, code and reference links), lists and small
  tables, repeated.

Each file is read through the real reader (``loader.ingest.readers.read_document``) in a fresh
Python subprocess, which prints its own peak RSS (``resource.getrusage(RUSAGE_SELF).ru_maxrss``),
its RSS after the imports (what reading added is the difference), the seconds ``read_document``
took, and how many sections and blocks the document has. ``--repo`` runs the child against
another checkout (``--repo /work/main``: the code before a change), through ``PYTHONPATH``.

Not a test: it prints figures, one line per shape (exit 1 if a read failed).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

SHAPES = ("table4", "table20", "bullets", "paragraph", "fence", "mix")
WORDS = ("refund", "order", "parcel", "courier", "invoice", "warehouse", "delay", "customer")
WORDS += ("account", "return", "label", "payment", "address", "tracking", "carrier", "week")

_CHILD = r"""
import json, resource, sys, time
from pathlib import Path
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
from loader.ingest.readers import read_document
imported = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
path = Path(sys.argv[1])
start = time.perf_counter()
document = read_document(path, path.parent, max_bytes=10_000_000)
seconds = time.perf_counter() - start
print(json.dumps({
    "peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    "imported_kb": imported,
    "seconds": seconds,
    "sections": len(document.sections),
    "blocks": sum(len(section.blocks) for section in document.sections),
    "chars": sum(len(block.text) for section in document.sections for block in section.blocks),
}))
"""


def _words(rng: random.Random, count: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(count))


def _lines(shape: str, rng: random.Random):
    """Endless lines of ``shape`` (the caller stops at the size)."""
    if shape in ("table4", "table20"):
        columns = 4 if shape == "table4" else 20
        yield "| " + " | ".join(f"column {n}" for n in range(columns)) + " |"
        yield "|" + " --- |" * columns
        row = 0
        while True:
            row += 1
            cells = [str(row)] + [_words(rng, 2) for _ in range(columns - 1)]
            yield "| " + " | ".join(cells) + " |"
    elif shape == "bullets":
        while True:
            yield f"- {_words(rng, 8)}"
    elif shape == "paragraph":
        while True:
            yield _words(rng, 12)
    elif shape == "fence":
        yield "```python"
        row = 0
        while True:
            row += 1
            yield f"    value_{row} = compute({row}, '{rng.choice(WORDS)}')  # {_words(rng, 3)}"
    elif shape == "mix":
        yield from _mix(rng)
    else:
        raise SystemExit(f"unknown shape {shape!r}; known: {', '.join(SHAPES)}")


def _mix(rng: random.Random):
    """Endless sections of headings, paragraphs, lists, a small table and a fence."""
    section = 0
    while True:
        section += 1
        yield f"## Section {section}: {_words(rng, 3)}"
        yield ""
        yield f"{_words(rng, 10)} *{_words(rng, 2)}* `{rng.choice(WORDS)}`"
        yield f"{_words(rng, 12)} see [the policy][policy] and [this](https://example.org/)."
        yield ""
        for n in range(1, 6):
            yield f"{n}. {_words(rng, 6)}"
        yield ""
        yield "| item | amount |"
        yield "| --- | --- |"
        for _ in range(4):
            yield f"| {rng.choice(WORDS)} | {rng.randint(1, 999)} |"
        yield ""
        yield "```"
        yield f"echo {_words(rng, 4)}"
        yield "```"
        yield ""
        yield f"- {_words(rng, 5)}"
        yield f"  - {_words(rng, 5)}"
        yield f"- {_words(rng, 5)}"
        yield ""
        if section == 1:
            yield "[policy]: https://example.org/policy"
            yield ""


def write_shape(folder: Path, shape: str, size: int) -> Path:
    """Write the file of ``shape``, of at most ``size`` bytes (UTF-8), and return its path."""
    rng = random.Random(shape)
    out: list[str] = []
    total = 0
    for line in _lines(shape, rng):
        total += len(line) + 1
        if total > size:
            break
        out.append(line)
    if shape == "fence":
        out[-1] = "```"
    path = folder / f"{shape}.md"
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path


def measure(path: Path, repo: Path) -> dict:
    """Read ``path`` in a fresh interpreter importing the loader from ``repo``."""
    env = dict(os.environ, PYTHONPATH=str(repo))
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)],
        env=env,
        cwd=repo,  # "-c" puts the working folder first on sys.path
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=9.9, help="size of each file, in MB")
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated shapes")
    parser.add_argument(
        "--repo",
        type=Path,
        default=Path(__file__).resolve().parent.parent,
        help="checkout whose loader the child imports (default: this one)",
    )
    parser.add_argument("--keep", type=Path, help="write the files here and keep them")
    args = parser.parse_args()
    shapes = [shape.strip() for shape in args.shapes.split(",") if shape.strip()]
    failed = False
    with tempfile.TemporaryDirectory(prefix="bench-md-") as scratch:
        folder = args.keep or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        print(f"repo {args.repo}")
        print(f"{'shape':<10} {'bytes':>10} {'peak MB':>8} {'read MB':>8} {'seconds':>8} blocks")
        for shape in shapes:
            path = write_shape(folder, shape, int(args.mb * 1_000_000))
            result = measure(path, args.repo)
            if "error" in result:
                print(f"{shape:<10} {path.stat().st_size:>10} failed: {result['error']}")
                failed = True
                continue
            peak = result["peak_kb"] / 1024
            added = (result["peak_kb"] - result["imported_kb"]) / 1024
            print(
                f"{shape:<10} {path.stat().st_size:>10} {peak:>8.0f} {added:>8.0f} "
                f"{result['seconds']:>8.2f} {result['blocks']} in {result['sections']} sections, "
                f"{result['chars']:,} chars"
            )
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
