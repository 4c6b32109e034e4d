"""The synthetic corpus of ``bench_scale.py``: real SciFact text and real MiniLM vectors, repeated.

Nothing of SciFact is copied into the repository: the corpus is read from the dataset folder at run
time and the vectors are cached outside it (``~/.cache/loader/bench-scale/``).

- **Units.** Each SciFact abstract is cut into sentences and the sentences into groups of
  ``SENTENCES_PER_UNIT`` (~14-16k units of about 65 words, the size of the chunks a push makes);
  a unit's text starts with its document's title, like a pushed chunk.
- **Unit vectors.** Every unit is embedded ONCE by the default model (all-MiniLM-L6-v2, onnx), as a
  push would embed it, and cached by the hash of the texts and the model's name.
- **Chunk i** (of any size n) is a copy of unit ``a = order[i % U]``. Copy 0 of each unit is the
  unit as it is (text and vector). A later copy ``c > 0`` shuffles the unit's sentences and appends
  one sentence of another random unit ``b`` (so BM25 sees varied term statistics, not one text
  repeated), and its vector is ``normalize(e_a + MIX_WEIGHT * e_b + g)`` with ``g`` Gaussian noise
  of expected norm ``NOISE_NORM``: near its unit, as a paraphrase would be, but a distinct point,
  so the copies of one unit do not collapse into a tie that no exact top 10 could order.
  Everything is seeded: chunk i is the same in every run and at every size.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SENTENCES_PER_UNIT = 3
MIX_WEIGHT = 0.25
NOISE_NORM = 0.35
SEED = 19
TENANT = "bench"
COLLECTION = "scifact-scale"
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(])")


@dataclass(frozen=True)
class Unit:
    doc_id: str
    title: str
    sentences: tuple[str, ...]

    @property
    def text(self) -> str:
        return f"{self.title}\n\n{' '.join(self.sentences)}"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    folder = Path(base) / "loader" / "bench-scale"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def read_units(dataset: Path) -> list[Unit]:
    """The SciFact abstracts as units of ``SENTENCES_PER_UNIT`` sentences, in corpus order."""
    units = []
    with gzip.open(dataset / "corpus.jsonl.gz", "rt", encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            sentences = [s.strip() for s in SENTENCE_END.split(record["text"]) if s.strip()]
            for start in range(0, len(sentences), SENTENCES_PER_UNIT):
                group = tuple(sentences[start : start + SENTENCES_PER_UNIT])
                units.append(Unit(str(record["_id"]), record["title"].strip(), group))
    return units


def read_queries(dataset: Path, split: str) -> list[str]:
    """The query texts of a qrels split (``test``, ``train``), in queries.jsonl order."""
    wanted = set()
    with (dataset / "qrels" / f"{split}.tsv").open(encoding="utf-8") as rows:
        for row in rows:
            fields = row.split("\t")
            if fields and fields[0] != "query-id":
                wanted.add(fields[0])
    with (dataset / "queries.jsonl").open(encoding="utf-8") as lines:
        records = (json.loads(line) for line in lines)
        return [r["text"] for r in records if r["_id"] in wanted]


def _cached(name: str, texts: list[str], embed) -> np.ndarray:
    digest = hashlib.sha256("\n\x00".join([name, *texts]).encode("utf-8")).hexdigest()[:16]
    path = cache_dir() / f"{name}-{digest}.npy"
    if path.is_file():
        return np.load(path)
    vectors = np.asarray(embed(texts), dtype=np.float32)
    np.save(path, vectors)
    return vectors


def unit_vectors(units: list[Unit], embedder, model: str) -> np.ndarray:
    """Unit-norm passage vectors of every unit (embedded once, then read from the cache)."""
    vectors = _cached(
        f"units-{model}", [u.text for u in units], lambda t: embedder.embed_passages(t)
    )
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def query_vectors(queries: list[str], embedder, model: str) -> np.ndarray:
    return _cached(f"queries-{model}", queries, lambda t: embedder.embed_queries(t))


def embedding_ms(queries: list[str], embedder) -> list[float]:
    """Milliseconds to embed each question alone, as ``loader search`` does once per question."""
    embedder.embed_queries(queries[:3])  # warm-up: first calls allocate the session's buffers
    times = []
    for question in queries:
        started = time.perf_counter()
        embedder.embed_queries([question])
        times.append((time.perf_counter() - started) * 1000)
    return times


def chunk_id(i: int) -> str:
    """The id (``_id`` and ``chunk_id``) of chunk i: document ``scale-<i>``, position 0."""
    return f"scale-{i}-0"


class SyntheticCorpus:
    """Chunk i of the benchmark: text and vector, deterministic (see the module docstring)."""

    BLOCK = 1000

    def __init__(self, units: list[Unit], vectors: np.ndarray) -> None:
        self.units = units
        self.vectors = vectors
        self.order = np.random.default_rng(SEED).permutation(len(units))

    def _block(self, block_start: int, stop: int):
        """Units a and b, the rng (for the texts' shuffles) and the unit vectors of one block."""
        size, dim = len(self.units), self.vectors.shape[1]
        block = np.arange(block_start, min(stop, block_start + self.BLOCK))
        rng = np.random.default_rng([SEED, block_start])
        first, second = self.order[block % size], rng.integers(0, size, len(block))
        noise = rng.standard_normal((len(block), dim)).astype(np.float32)
        mixed = (
            self.vectors[first]
            + MIX_WEIGHT * self.vectors[second]
            + noise * (NOISE_NORM / np.sqrt(dim))
        )
        mixed /= np.linalg.norm(mixed, axis=1, keepdims=True)
        original = block < size
        mixed[original] = self.vectors[first[original]]
        return block, first, second, rng, mixed

    def chunk_vectors(self, count: int) -> np.ndarray:
        """The vectors of chunks 0 .. count-1, as ``chunks`` yields them (for exact search)."""
        return np.concatenate(
            [self._block(start, count)[4] for start in range(0, count, self.BLOCK)]
        )

    def chunks(self, start: int, stop: int) -> Iterator[tuple[int, Unit, str, np.ndarray]]:
        """``(i, unit, text, vector)`` for chunks start .. stop-1 (start a multiple of BLOCK)."""
        if start % self.BLOCK:
            raise ValueError(f"start must be a multiple of {self.BLOCK}, got {start}")
        for block_start in range(start, stop, self.BLOCK):
            block, first, second, rng, vectors = self._block(block_start, stop)
            for offset, i in enumerate(block.tolist()):
                unit = self.units[int(first[offset])]
                if i < len(self.units):
                    yield i, unit, unit.text, vectors[offset]
                    continue
                sentences = list(unit.sentences)
                rng.shuffle(sentences)
                borrowed = self.units[int(second[offset])].sentences[0]
                text = f"{unit.title}\n\n{' '.join([*sentences, borrowed])}"
                yield i, unit, text, vectors[offset]
