"""The learned reranker's booster file (LightGBM's text format) checked line by line, before
LightGBM reads a byte of it: pure, no LightGBM imported.

LightGBM trusts its model file. It slices the trees by the header's ``tree_sizes``, reads each
tree's arrays without checking their lengths, follows ``left_child``/``right_child`` and indexes
the row by ``split_feature`` as written; a truncated file or one wrong number kills the process
(SIGSEGV, SIGABRT from an exception inside its OpenMP loop, SIGFPE for
``num_tree_per_iteration=0``), with no message. So ``check_booster_text`` accepts only what
``loader learn`` writes, and every number LightGBM will use is checked against what it means:

- the header: one class, one tree per iteration, ``lambdarank``, exactly the feature names of
  the set the model records (``features.ONE_READER`` or ``TWO_READERS``), one ``feature_infos``
  entry per feature, one ``tree_sizes`` entry per tree;
- each tree exactly where ``tree_sizes`` says (``Tree=<i>`` then its lines, then a blank line);
  its arrays of the lengths ``num_leaves`` implies, numbers that parse (finite floats), features
  that exist, numeric splits only (no categorical ones: ``num_cat=0``, no linear trees), and
  children that form one binary tree from the root (no cycle, no node twice, no leaf missing);
- ``end of trees`` right after the last tree, then only the sections LightGBM writes there, to
  the file's last line (``pandas_categorical:null``): a file cut short anywhere is refused.

Example::

    trees = check_booster_text(text, Path("models/lr/learned_reranker.txt"))
    # ModelError: "learned reranker models/lr/learned_reranker.txt, line 57 (tree 2):
    #  split_feature 99 is no feature (0 to 23); train it again with `loader learn`"
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from loader.errors import ModelError
from loader.models.rerank.features import FEATURE_NAMES

# Far above the 15 leaves `loader learn` trains; bounds the depth LightGBM's SHAP values recurse
# to (``pred_contrib``, for `loader explain`) and the memory they take.
MAX_LEAVES = 1024
_HEADER_KEYS = {
    "version", "num_class", "num_tree_per_iteration", "label_index", "max_feature_idx",
    "objective", "feature_names", "feature_infos", "tree_sizes",
}  # fmt: skip


def _expected_header(names: Sequence[str]) -> dict[str, str]:
    """The header values a learned reranker over the features ``names`` has."""
    return {
        "version": "v4",
        "num_class": "1",
        "num_tree_per_iteration": "1",
        "label_index": "0",
        "max_feature_idx": str(len(names) - 1),
        "objective": "lambdarank",
        "feature_names": " ".join(names),
    }


_INT = re.compile(r"-?\d{1,10}")
_FLOAT = re.compile(r"-?(\d+\.?\d*|\.\d+)([eE][-+]?\d{1,3})?")
_FEATURE_INFO = re.compile(r"none|\[[-+.\deE]+:[-+.\deE]+\]")
_LINE = re.compile(r"([a-z_]+)=(.*)")
# Per node (num_leaves - 1 values) and per leaf (num_leaves values): each array's parser.
_NODE_INTS = ("split_feature", "decision_type", "left_child", "right_child", "internal_count")
_NODE_FLOATS = ("split_gain", "threshold", "internal_value", "internal_weight")
_LEAF_INTS = ("leaf_count",)
_LEAF_FLOATS = ("leaf_value", "leaf_weight")
_TREE_KEYS = {
    "num_leaves", "num_cat", "is_linear", "shrinkage",
    *_NODE_INTS, *_NODE_FLOATS, *_LEAF_INTS, *_LEAF_FLOATS,
}  # fmt: skip
_SPLIT_KEYS = ("left_child", "right_child", "split_feature", "threshold")
# A numeric split's decision_type: bit 0 categorical (never), bit 1 default left, bits 2-3 the
# missing-value type (0 none, 1 zero, 2 NaN).
_NUMERIC_DECISIONS = {missing << 2 | left << 1 for missing in range(3) for left in range(2)}
# What LightGBM writes after the trees (feature importances, the training parameters).
_TAIL_LINE = re.compile(
    r"|end of trees|feature_importances:|[A-Za-z_]\w*=\d+|parameters:|\[[a-z_0-9]+: [^\n]*\]"
    r"|end of parameters|pandas_categorical:null"
)
# How the file ends: the end of LightGBM's part, then its Python side's (no pandas categories).
_LAST_LINES = "end of parameters\n\npandas_categorical:null\n"
_RETRAIN = "train it again with `loader learn`"


class _Fault(Exception):
    """What is wrong, and on which line (1-based) of the file."""

    def __init__(self, line: int, what: str) -> None:
        super().__init__(what)
        self.line, self.what = line, what


def check_booster_text(text: str, path: Path, names: Sequence[str] = FEATURE_NAMES) -> int:
    """The number of trees of the LightGBM text model ``text`` (the file ``path``'s), once it is
    known to be one LightGBM reads safely as a learned reranker over the features ``names``
    (those of the set its provenance records; see the module).

    Raises:
        ModelError: naming ``path``, the line and what is wrong on it.
    """
    if not text.isascii() or re.search(r"[^\n\x20-\x7e]", text):
        bad = re.search(r"[^\n\x20-\x7e]", text) or re.search(r"[^\x00-\x7f]", text)
        line = text[: bad.start() if bad else 0].count("\n") + 1
        raise ModelError(
            f"learned reranker {path}, line {line}: a byte that is no printable ASCII; a "
            f"LightGBM text model holds none; {_RETRAIN}"
        )
    try:
        return _check(text, tuple(names))
    except _Fault as fault:
        message = f"learned reranker {path}, line {fault.line}: {fault.what}; {_RETRAIN}"
        raise ModelError(message) from None


def _check(text: str, names: tuple[str, ...]) -> int:
    lines = text.split("\n")
    first_tree = next((i for i, line in enumerate(lines) if line.startswith("Tree=")), None)
    if not lines[0] == "tree":
        raise _Fault(1, "not a LightGBM text model (it starts with no `tree` line)")
    if first_tree is None:
        raise _Fault(len(lines), "no `Tree=` line: the file ends before its trees")
    sizes = _header(lines[1:first_tree], names)
    start = sum(len(line) + 1 for line in lines[:first_tree])
    for number, size in enumerate(sizes):
        line = text.count("\n", 0, start) + 1
        _tree(text[start : start + size], number, line, len(names))
        start += size
    tail = text[start:].split("\n")
    if tail[0] != "end of trees":
        line = text.count("\n", 0, start) + 1
        raise _Fault(line, f"no `end of trees` after the {len(sizes)} trees tree_sizes names")
    first_tail = text.count("\n", 0, start) + 1
    if not text.endswith(_LAST_LINES):
        raise _Fault(text.count("\n") + 1, f"the file ends before its last lines, {_LAST_LINES!r}")
    for offset, line in enumerate(tail):
        linear = line.startswith("[linear_tree: ") and line != "[linear_tree: 0]"
        if linear or not _TAIL_LINE.fullmatch(line):
            raise _Fault(first_tail + offset, f"{line[:60]!r} is no line LightGBM writes there")
    return len(sizes)


def _header(lines: Sequence[str], names: tuple[str, ...]) -> list[int]:
    """The tree sizes, once every header line (line 2 on) is what this version writes."""
    expected_header = _expected_header(names)
    values: dict[str, tuple[str, int]] = {}
    for number, line in enumerate(lines, start=2):
        if not line:
            continue
        match = _LINE.fullmatch(line)
        if match is None or match[1] not in _HEADER_KEYS or match[1] in values:
            raise _Fault(number, f"{line[:60]!r} is no header line of a learned reranker")
        values[match[1]] = (match[2], number)
        expected = expected_header.get(match[1])
        if expected is not None and match[2] != expected:
            raise _Fault(number, f"{match[1]} is {match[2][:60]!r}, not {expected[:60]!r}")
    missing = sorted(_HEADER_KEYS - set(values))
    if missing:
        raise _Fault(len(lines) + 2, f"the header has no {', '.join(missing)}")
    infos, line = values["feature_infos"]
    if (
        not all(map(_FEATURE_INFO.fullmatch, infos.split(" ")))
        or infos.count(" ") != len(names) - 1
    ):
        raise _Fault(line, f"feature_infos is not one range for each of {len(names)}")
    sizes = _numbers(*values["tree_sizes"], int, "tree_sizes")
    if not sizes or min(sizes) < 1:
        raise _Fault(values["tree_sizes"][1], "tree_sizes names no tree, or one of no bytes")
    return sizes


def _tree(block: str, number: int, line: int, features: int) -> None:
    """One tree's text, ``Tree=<number>`` to its blank lines, as ``tree_sizes`` cut it."""
    head = f"Tree={number}"
    if not block.startswith(head + "\n"):
        seen = block.split("\n", 1)[0][:40]
        raise _Fault(line, f"tree {number} should start here (tree_sizes), not {seen!r}")
    if not block.endswith("\n\n\n"):
        raise _Fault(line, f"tree {number} does not end where tree_sizes says it does")
    body = block[len(head) + 1 : -3].split("\n")
    values: dict[str, tuple[str, int]] = {}
    for offset, text in enumerate(body, start=line + 1):
        match = _LINE.fullmatch(text)
        if match is None or match[1] not in _TREE_KEYS or match[1] in values:
            raise _Fault(offset, f"{text[:60]!r} is no line of tree {number}")
        values[match[1]] = (match[2], offset)
    try:
        _tree_values(values, line, features)
    except _Fault as fault:
        raise _Fault(fault.line, f"tree {number}: {fault.what}") from None


def _tree_values(values: dict[str, tuple[str, int]], line: int, features: int) -> None:
    for key in ("num_leaves", "num_cat", "leaf_value"):
        if key not in values:
            raise _Fault(line, f"no {key}")
    leaves = _numbers(*values["num_leaves"], int, "num_leaves", expected=1)[0]
    if not 1 <= leaves <= MAX_LEAVES:
        raise _Fault(values["num_leaves"][1], f"num_leaves {leaves} is not 1 to {MAX_LEAVES}")
    for key in ("num_cat", "is_linear"):
        if key in values and values[key][0] != "0":
            raise _Fault(values[key][1], f"{key} is {values[key][0][:20]!r}, not 0")
    if "shrinkage" in values:
        _numbers(*values["shrinkage"], float, "shrinkage", expected=1)
    arrays = _arrays(values, leaves)
    if leaves > 1:
        for key in _SPLIT_KEYS:
            if key not in values:
                raise _Fault(line, f"no {key}, and it has {leaves} leaves")
        _splits(arrays, values, features)
        _children(arrays["left_child"], arrays["right_child"], leaves, values["left_child"][1])


def _arrays(values: dict[str, tuple[str, int]], leaves: int) -> dict[str, list]:
    """Every array of the tree, parsed: one value per node (``leaves - 1``) or per leaf."""
    arrays: dict[str, list] = {}
    for keys, count, kind in (
        (_NODE_INTS, leaves - 1, int),
        (_NODE_FLOATS, leaves - 1, float),
        (_LEAF_INTS, leaves, int),
        (_LEAF_FLOATS, leaves, float),
    ):
        for key in keys:
            if key in values:
                arrays[key] = _numbers(*values[key], kind, key, expected=count)
    return arrays


def _splits(arrays: dict[str, list], values: dict[str, tuple[str, int]], features: int) -> None:
    for feature in arrays["split_feature"]:
        if not 0 <= feature < features:
            where = values["split_feature"][1]
            raise _Fault(where, f"split_feature {feature} is no feature (0 to {features - 1})")
    for decision in arrays.get("decision_type", ()):
        if decision not in _NUMERIC_DECISIONS:
            where = values["decision_type"][1]
            raise _Fault(where, f"decision_type {decision} is no numeric split's")
    for key in ("leaf_count", "internal_count"):
        if min(arrays.get(key, [0])) < 0:
            raise _Fault(values[key][1], f"{key} holds a negative count")


def _children(left: list[int], right: list[int], leaves: int, line: int) -> None:
    """The nodes' children form one binary tree from node 0: every node and every leaf (``~k``,
    negative) reached once, so LightGBM's walk from the root ends at a leaf, always."""
    seen_nodes, seen_leaves, todo = {0}, set(), [0]
    while todo:
        node = todo.pop()
        for child in (left[node], right[node]):
            if child >= 0:
                if child >= leaves - 1 or child in seen_nodes:
                    raise _Fault(
                        line, f"node {node}'s child {child} is no node, or a second path to it"
                    )
                seen_nodes.add(child)
                todo.append(child)
            else:
                if ~child >= leaves or ~child in seen_leaves:
                    raise _Fault(
                        line, f"node {node}'s child {child} is no leaf, or a second path to it"
                    )
                seen_leaves.add(~child)
    if len(seen_nodes) != leaves - 1 or len(seen_leaves) != leaves:
        raise _Fault(line, "some nodes or leaves are not reached from the root")


def _numbers(value: str, line: int, kind: Callable, key: str, expected: int | None = None) -> list:
    """``value``'s space-separated numbers: ``expected`` of them (``None``: any), ints in int32,
    floats finite."""
    parts = value.split(" ") if value else []
    if expected is not None and len(parts) != expected:
        raise _Fault(line, f"{key} holds {len(parts)} values, not {expected}")
    pattern = _INT if kind is int else _FLOAT
    numbers = []
    for part in parts:
        number = kind(part) if pattern.fullmatch(part) else None
        if number is None or kind is int and not -(2**31) <= number < 2**31:
            raise _Fault(line, f"{key} holds {part[:30]!r}, which is no {kind.__name__} here")
        if kind is float and not math.isfinite(number):
            raise _Fault(line, f"{key} holds {part[:30]!r}, which is not finite")
        numbers.append(number)
    return numbers
