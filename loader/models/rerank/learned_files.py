"""A learned reranker's folder, checked before LightGBM sees a byte of it (``read_checked``), and
its booster tried in a process of its own (``probe_booster``) before this one loads it.

``loader learn --out`` writes two files (``loader.train.model_store.write_model``):
``learned_reranker.txt``, the booster in LightGBM's text format, and ``provenance.json``, whose
``model`` part records what a reader needs (``prior_scale``, ``residual_weight``, the feature
fingerprint, the tree count) and the booster file's size and SHA-256 (``model_file_facts``).

A reader checks, in this order, and refuses with a ``ModelError`` naming the file and what is
wrong:

1. each file is a regular file of at most its cap, read once without blocking
   (``loader.userfile``: a FIFO, ``/dev/zero`` or a folder in its place is refused at once);
2. ``provenance.json`` is a JSON object whose ``model`` values have their types: the fingerprint
   of a feature set this version computes (one reader's or two's: ``features.FEATURE_SETS``),
   the second reader it learnt with when two, finite numbers in range, the size and a SHA-256;
3. the booster's bytes are that size and that SHA-256: damage (a truncated copy, an edit) is
   caught here, before any parsing;
4. the booster's text is one LightGBM reads safely (``booster_text.check_booster_text``) over
   that set's features, with as many trees as recorded.

A folder from before the size and hash were recorded is refused (train it again): without
them, damage cannot be told from a model. Steps 1-4 protect the process from a damaged file;
a hostile one with a consistent provenance passes 1-3, and LightGBM's own parser may still be
fooled where step 4 missed something: ``probe_booster`` loads it in a child process first
(about 0.6 s, once per model file), so a crash kills the child, not a server.

Example::

    checked = read_checked(Path("models/lr"))
    probe_booster(checked)           # ModelError if LightGBM dies or fails on it
    booster = lightgbm.Booster(model_str=checked.text)
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loader.errors import ModelError
from loader.models.rerank.booster_text import check_booster_text
from loader.models.rerank.check import LEARNED_MODEL_FILE
from loader.models.rerank.features import (
    FEATURE_VERSION,
    ONE_READER,
    TWO_READERS,
    FeatureSet,
    feature_fingerprint,
    feature_set_of,
)
from loader.modes import SEARCH_MODES
from loader.userfile import parse_failure, read_user_bytes

PROVENANCE_FILE = "provenance.json"
# A booster of 300 trees of 15 leaves (`loader learn`'s) is about 0.5 MB; 100 times that and
# more is no model of this recipe.
MAX_MODEL_BYTES = 64_000_000
# The sources, settings and figures `loader learn` records: a few KB.
MAX_PROVENANCE_BYTES = 2_000_000
# How long the child process may take to load the booster and predict a few rows.
PROBE_SECONDS = 120
_SHA256 = re.compile(r"[0-9a-f]{64}")
_RETRAIN = "train it again with `loader learn`"


@dataclass(frozen=True)
class CheckedModel:
    """A learned reranker's folder, checked (see the module).

    Attributes:
        folder: the folder.
        text: the booster file's text as checked: LightGBM is given this, never the file again.
        prior_scale, residual_weight: the score's weights (``loader.models.rerank.learned``).
        trees: the booster's trees.
        sha256: the booster file's SHA-256.
        candidate_depth, base_mode, tenant: where it learnt (``loader.models.rerank.tenants``):
            the candidates per question (``None``: not recorded, all of them), the search mode
            and the tenant (``""``: not recorded).
        features: the feature set it learnt on (``ONE_READER`` for every model before two).
        second_reader: the second reader whose cosine it learnt from (``""``: one reader).
        learnt_from: digests of the questions it learnt from (``question_digest``), which the
            guard of a retraining in place judges it on no longer (``None``: not recorded).
        created: when ``loader learn`` wrote it (provenance's ``created``; ``""`` when not
            recorded as a short text: it names the model to a person, it is checked by nothing).
    """

    folder: Path
    text: str
    prior_scale: float
    residual_weight: float
    trees: int
    sha256: str
    candidate_depth: int | None = None
    base_mode: str = ""
    tenant: str = ""
    features: FeatureSet = ONE_READER
    second_reader: str = ""
    learnt_from: frozenset[str] | None = None
    created: str = ""

    @property
    def model_file(self) -> Path:
        return self.folder / LEARNED_MODEL_FILE


def model_file_facts(data: bytes) -> dict[str, Any]:
    """What ``provenance.json`` records of the booster file's bytes, for a reader to check."""
    return {"file_bytes": len(data), "file_sha256": hashlib.sha256(data).hexdigest()}


def read_checked(folder: Path) -> CheckedModel:
    """The folder's booster and facts, once every check of the module passed.

    Raises:
        ModelError: naming the file and what is wrong with it.
    """
    facts = provenance_facts(folder)
    model_file = folder / LEARNED_MODEL_FILE
    data = read_user_bytes(
        model_file, "learned reranker", max_bytes=MAX_MODEL_BYTES, error=ModelError
    )
    if len(data) != facts["file_bytes"]:
        raise ModelError(
            f"learned reranker {model_file} is {len(data):,} bytes, and {PROVENANCE_FILE} "
            f"records {facts['file_bytes']:,}: the file is damaged or not the one `loader learn` "
            f"wrote beside it; {_RETRAIN}"
        )
    digest = hashlib.sha256(data).hexdigest()
    if digest != facts["file_sha256"]:
        raise ModelError(
            f"learned reranker {model_file}: its SHA-256 is {digest[:16]}..., and "
            f"{PROVENANCE_FILE} records {facts['file_sha256'][:16]}...: the file is damaged or "
            f"not the one `loader learn` wrote beside it; {_RETRAIN}"
        )
    text = data.decode("ascii", errors="replace")  # check_booster_text refuses what was replaced
    trees = check_booster_text(text, model_file, facts["features"].names)
    if trees != facts["trees"]:
        raise ModelError(
            f"learned reranker {model_file} holds {trees} trees, and {PROVENANCE_FILE} records "
            f"{facts['trees']}; {_RETRAIN}"
        )
    return CheckedModel(
        folder,
        text,
        facts["prior_scale"],
        facts["residual_weight"],
        trees,
        digest,
        facts["candidate_depth"],
        facts["base_mode"],
        facts["tenant"],
        facts["features"],
        facts["second_reader"],
        facts["learnt_from"],
        facts["created"],
    )


def provenance_facts(folder: Path) -> dict[str, Any]:
    """The ``model`` part of the folder's ``provenance.json``, its values checked (types, finite
    numbers, features of a set this version computes, the second reader named when it learnt
    with two, the booster file's size and hash recorded).

    Raises:
        ModelError: naming the file and the value at fault.
    """
    path = folder / PROVENANCE_FILE
    data = read_user_bytes(
        path, "learned reranker provenance", max_bytes=MAX_PROVENANCE_BYTES, error=ModelError
    )
    try:
        document = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ModelError(f"learned reranker provenance {path} is not UTF-8; {_RETRAIN}") from None
    except (ValueError, RecursionError) as exc:
        why = parse_failure(exc) if isinstance(exc, ValueError) else "nested too deeply"
        raise ModelError(f"learned reranker provenance {path} is not JSON ({why})") from None
    facts = document.get("model") if isinstance(document, dict) else None
    if not isinstance(facts, dict):
        raise ModelError(f"learned reranker provenance {path} has no `model` object; {_RETRAIN}")
    features = feature_set_of(facts.get("feature_fingerprint"))
    if features is None:
        raise ModelError(
            f"learned reranker {folder} was trained on features version "
            f"{repr(facts.get('feature_version'))[:20]} "
            f"({str(facts.get('feature_fingerprint'))[:20]}), and this loader computes version "
            f"{FEATURE_VERSION} ({feature_fingerprint()}, or with two readers "
            f"{TWO_READERS.fingerprint()}); {_RETRAIN}"
        )
    second = _text(facts, "second_reader", path)
    if features.readers > 1 and not second:
        raise ModelError(
            f"learned reranker provenance {path}: the model learnt on two readers' features "
            f"and model.second_reader names no model; {_RETRAIN}"
        )
    if "file_sha256" not in facts or "file_bytes" not in facts:
        raise ModelError(
            f"learned reranker provenance {path} records no size and SHA-256 of "
            f"{LEARNED_MODEL_FILE} (a model written before loader recorded them), so a damaged "
            f"file cannot be told from the model; {_RETRAIN}"
        )
    return {
        "prior_scale": _number(facts, "prior_scale", path, 0.0, 100.0),
        "residual_weight": _number(facts, "residual_weight", path, 0.0, 1.0),
        "trees": int(_number(facts, "trees", path, 1, 10**7, integer=True)),
        "file_bytes": int(_number(facts, "file_bytes", path, 1, MAX_MODEL_BYTES, integer=True)),
        "file_sha256": _sha256(facts, path),
        "candidate_depth": _depth(facts, path),
        "base_mode": _base_mode(facts, path),
        "tenant": _text(facts, "tenant", path),
        "features": features,
        "second_reader": second if features.readers > 1 else "",
        "learnt_from": _digests(facts, path),
        "created": _created(document),
    }


def _created(document: dict[str, Any]) -> str:
    """The provenance's ``created`` time when it is a short text, else ``""``."""
    created = document.get("created")
    return created if isinstance(created, str) and len(created) <= 40 else ""


def question_digest(question: str) -> str:
    """How a model's provenance names a question it learnt from (``model.learnt_from``): 16 hex
    digits of its text, spaces and case aside, so a questions file exported again, or moved,
    names the same questions."""
    return hashlib.sha256(" ".join(question.split()).casefold().encode()).hexdigest()[:16]


_DIGEST = re.compile(r"[0-9a-f]{16}")
MAX_LEARNT_FROM = 20_000  # `loader learn` searches at most 10,000 questions (MAX_QUESTIONS)


def _digests(facts: dict[str, Any], path: Path) -> frozenset[str] | None:
    value = facts.get("learnt_from")
    if value is None:  # a model trained before they were recorded
        return None
    if (
        not isinstance(value, list)
        or len(value) > MAX_LEARNT_FROM
        or not all(isinstance(item, str) and _DIGEST.fullmatch(item) for item in value)
    ):
        raise ModelError(
            f"learned reranker provenance {path}: model.learnt_from is not a list of at most "
            f"{MAX_LEARNT_FROM:,} question digests (16 hex digits each); {_RETRAIN}"
        )
    return frozenset(value)


def _depth(facts: dict[str, Any], path: Path) -> int | None:
    if facts.get("candidate_depth") is None:  # a model trained before it was recorded
        return None
    return int(_number(facts, "candidate_depth", path, 1, 10_000, integer=True))


def _base_mode(facts: dict[str, Any], path: Path) -> str:
    """The search mode it learnt from (``""``: not recorded): searches take it as their mode,
    and a retraining searches in it, so a mode no search has is a damaged file."""
    mode = _text(facts, "base_mode", path)
    if mode and mode not in SEARCH_MODES:
        raise ModelError(
            f"learned reranker provenance {path}: model.base_mode is {mode[:40]!r}, not a search "
            f"mode ({', '.join(SEARCH_MODES)}); {_RETRAIN}"
        )
    return mode


def _text(facts: dict[str, Any], key: str, path: Path) -> str:
    value = facts.get(key)
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > 1_000:
        raise ModelError(
            f"learned reranker provenance {path}: model.{key} is {repr(value)[:40]}, not a "
            f"name; {_RETRAIN}"
        )
    return value


def _number(
    facts: dict[str, Any], key: str, path: Path, low: float, high: float, integer: bool = False
) -> float:
    value = facts.get(key)
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value):
        what = "an integer" if integer else "a finite number"
        raise ModelError(
            f"learned reranker provenance {path}: model.{key} is {repr(value)[:40]}, not "
            f"{what}; {_RETRAIN}"
        )
    if not low <= value <= high:
        raise ModelError(
            f"learned reranker provenance {path}: model.{key} is {value}, not between {low} and "
            f"{high}; {_RETRAIN}"
        )
    return float(value)


def _sha256(facts: dict[str, Any], path: Path) -> str:
    value = facts.get("file_sha256")
    if not isinstance(value, str) or not _SHA256.fullmatch(value):
        raise ModelError(
            f"learned reranker provenance {path}: model.file_sha256 is {repr(value)[:70]}, not "
            f"a SHA-256 (64 hex digits); {_RETRAIN}"
        )
    return value


def probe_booster(checked: CheckedModel) -> None:
    """Load the booster and predict a few rows in a child process (``booster_probe.py``), so
    that a model LightGBM crashes on kills the child, never this process.

    Raises:
        ModelError: LightGBM died on it (naming the signal), refused it, or took too long.
    """
    script = Path(__file__).with_name("booster_probe.py")
    # One thread: a probe's rows need no more, and a busy server keeps its cores.
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    try:
        done = subprocess.run(
            [sys.executable, "-P", str(script), str(len(checked.features.names))],
            input=checked.text.encode("ascii"),
            capture_output=True,
            timeout=PROBE_SECONDS,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ModelError(
            f"learned reranker {checked.model_file}: LightGBM did not load it and score a row in "
            f"{PROBE_SECONDS} s (in a process of its own); {_RETRAIN}"
        ) from None
    if done.returncode == 0:
        return
    if done.returncode < 0:
        name = signal.Signals(-done.returncode).name
        why = f"LightGBM crashed on it ({name}, in a process of its own: this one is unharmed)"
    else:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        why = f"LightGBM refused it ({said[-1][:300] if said else f'status {done.returncode}'})"
    raise ModelError(f"learned reranker {checked.model_file}: {why}; {_RETRAIN}")
