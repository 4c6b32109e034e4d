"""How an existing index differs from the rendered index body: what can change in place (a new
field, a dynamic setting such as ``number_of_replicas``) and what needs a new index version (vector
dimension, analyzer, field type, shards, the document id scheme, the embedding model's
fingerprint). Pure.

Only the keys the files set are compared, so defaults the server fills in never show up as a
difference; values compare in the server's string form (``1`` equals ``"1"``, ``True``
``"true"``).

Example::

    diff = diff_index(desired.index, state.index)
    diff.incompatible     # ['vector field embedding: dimension 384 -> 768']
    diff.new_fields       # {} (nothing to add in place)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from loader.models.readers import SECOND_FIELD
from loader.models.registry import EMBEDDING_META_KEY, SECOND_READER_META_KEY

# Index settings OpenSearch lets us change on an open index; any other difference needs a new
# index version.
DYNAMIC_INDEX_SETTINGS = frozenset(
    {
        "index.number_of_replicas",
        "index.auto_expand_replicas",
        "index.refresh_interval",
        "index.max_result_window",
        "index.default_pipeline",
        "index.final_pipeline",
        "index.search.default_pipeline",
        "index.knn.algo_param.ef_search",
    }
)
# Mapping parameters put_mapping accepts on an existing index.
DYNAMIC_MAPPING_PARAMS = frozenset({"dynamic"})


@dataclass
class IndexDiff:
    """How an existing index differs from the rendered index body."""

    new_fields: dict[str, Any] = field(default_factory=dict)  # properties to add in place
    mapping_params: dict[str, Any] = field(default_factory=dict)  # e.g. {"dynamic": "strict"}
    settings_updates: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # key: (old, new)
    incompatible: list[str] = field(default_factory=list)  # why a new version is needed
    dimension_change: tuple[int, int] | None = None  # (cluster, files)
    id_scheme_change: tuple[str | None, str] | None = None  # (cluster, files): doc_id_scheme
    model_change: tuple[dict, dict] | None = None  # (cluster, files): the model fingerprint
    # Another second reader (model, runtime or dimension): its vectors alone are useless.
    second_reader_change: bool = False
    meta_keys: list[str] = field(default_factory=list)  # the _meta keys an update sets anew

    @property
    def in_place(self) -> bool:
        return bool(self.new_fields or self.mapping_params or self.settings_updates)


# --- comparing values --------------------------------------------------------------------------


def normalize(value: Any) -> Any:
    """Comparable form of a JSON value: settings come back as strings ("1", "true")."""
    if isinstance(value, Mapping):
        return {str(key): normalize(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [normalize(item) for item in value]
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower()
    return value


def first_difference(desired: Any, current: Any, path: str = "") -> tuple[str, Any, Any] | None:
    """The first place where ``desired`` is not contained in ``current``, ignoring keys only
    ``current`` has (server defaults). Returns ``(path, desired, current)`` or ``None``."""
    if isinstance(desired, Mapping):
        if not isinstance(current, Mapping):
            return path, desired, current
        for key, want in desired.items():
            sub = f"{path}.{key}" if path else str(key)
            if key not in current:
                return sub, want, None
            found = first_difference(want, current[key], sub)
            if found:
                return found
        return None
    if isinstance(desired, list | tuple):
        if not isinstance(current, list | tuple) or len(desired) != len(current):
            return path, desired, current
        for position, (want, have) in enumerate(zip(desired, current, strict=True)):
            found = first_difference(want, have, f"{path}[{position}]")
            if found:
                return found
        return None
    if normalize(desired) != normalize(current):
        return path, desired, current
    return None


def flatten_settings(settings: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"index": {"knn": true}}`` -> ``{"index.knn": true}``; every key gets an ``index.``
    prefix, as in the server's ``flat_settings`` answer."""
    flat: dict[str, Any] = {}
    for key, value in settings.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten_settings(value, f"{name}."))
        else:
            flat[name] = value
    if not prefix:
        flat = {(k if k.startswith("index.") else f"index.{k}"): v for k, v in flat.items()}
    return flat


# --- diffing an index --------------------------------------------------------------------------


def diff_index(desired: Mapping[str, Any], current: Mapping[str, Any]) -> IndexDiff:
    """Compare the rendered index body with an existing index.

    Args:
        desired: ``{"settings": ..., "mappings": ...}`` from ``mappings/chunks.json.j2``.
        current: the cluster's ``{"settings": <flat settings>, "mappings": ...}``.

    Returns:
        What can change in place and what needs a new index version.
    """
    diff = IndexDiff()
    _diff_settings(desired.get("settings") or {}, current.get("settings") or {}, diff)
    desired_mappings = desired.get("mappings") or {}
    current_mappings = current.get("mappings") or {}
    _diff_mapping_params(desired_mappings, current_mappings, diff)
    _diff_properties(
        desired_mappings.get("properties") or {}, current_mappings.get("properties") or {}, diff
    )
    return diff


def _diff_settings(desired: Mapping[str, Any], current: Mapping[str, Any], diff: IndexDiff) -> None:
    for key, want in flatten_settings(desired).items():
        have = current.get(key)
        if normalize(want) == normalize(have):
            continue
        if key in DYNAMIC_INDEX_SETTINGS:
            diff.settings_updates[key] = (have, want)
        else:
            diff.incompatible.append(f"setting {key}: {have!r} -> {want!r}")


def _diff_mapping_params(
    desired: Mapping[str, Any], current: Mapping[str, Any], diff: IndexDiff
) -> None:
    """The mapping's top-level parameters other than ``properties`` (``dynamic``, ``_meta``...)."""
    for key, want in desired.items():
        if key == "properties":
            continue
        if key == "_meta":
            _diff_meta(want, current.get("_meta") or {}, diff)
            continue
        if first_difference(want, current.get(key)) is None:
            continue
        if key in DYNAMIC_MAPPING_PARAMS:
            diff.mapping_params[key] = want
        else:
            diff.incompatible.append(f"mapping {key}: {current.get(key)!r} -> {want!r}")


def _diff_meta(desired: Mapping[str, Any], current: Mapping[str, Any], diff: IndexDiff) -> None:
    """``_meta.doc_id_scheme`` names how document ids are made: another scheme needs a new,
    empty index version (copied documents would keep ids of the old scheme). ``_meta.
    embedding_model`` fingerprints the vectors (model, backend, dimension, passage instruction):
    another one needs a new, empty version too (copied vectors would mix two models). An index
    built before fingerprints has none: it is recorded in place (only its dimension was known,
    and that is compared on the vector field). ``_meta.second_embedding_model`` fingerprints the
    second reader's vectors: a first one is added in place (with its field; ``loader push`` then
    fills in its vectors), another one needs a new, empty version."""
    want = desired.get("doc_id_scheme")
    have = current.get("doc_id_scheme")
    if want != have:
        diff.id_scheme_change = (have, want)
        diff.incompatible.append(f"document id scheme: {have or 'source path only'} -> {want}")
    want_model = desired.get(EMBEDDING_META_KEY)
    have_model = current.get(EMBEDDING_META_KEY)
    if have_model is not None and _without_dimension(want_model) != _without_dimension(have_model):
        diff.model_change = (dict(have_model), dict(want_model or {}))
        diff.incompatible.append(
            f"embedding model: {describe_fingerprint(have_model)} -> "
            f"{describe_fingerprint(want_model or {})}"
        )
    want_second = desired.get(SECOND_READER_META_KEY)
    have_second = current.get(SECOND_READER_META_KEY)
    if (
        have_second is not None
        and want_second is not None
        and normalize(want_second) != normalize(have_second)
    ):
        diff.second_reader_change = True
        diff.incompatible.append(
            f"second reader: {describe_fingerprint(have_second)} -> "
            f"{describe_fingerprint(want_second)}"
        )
    handled = ("doc_id_scheme", *((EMBEDDING_META_KEY,) if have_model is not None else ()))
    changed = [k for k, value in desired.items() if k not in handled and current.get(k) != value]
    if changed:
        diff.mapping_params["_meta"] = {**current, **desired}
        diff.meta_keys = changed


def _without_dimension(fingerprint: Mapping[str, Any] | None) -> Any:
    """The fingerprint but its dimension, which the vector field's own comparison reports."""
    return normalize({k: v for k, v in (fingerprint or {}).items() if k != "dimension"})


def describe_fingerprint(fingerprint: Mapping[str, Any]) -> str:
    """``bge-small-en-v1.5 (onnx, 384 dims)`` for plans and errors."""
    prefix = fingerprint.get("passage_prefix")
    return (
        f"{fingerprint.get('model')} ({fingerprint.get('backend')}"
        f"{f' {recipe}' if (recipe := fingerprint.get('int8_recipe')) else ''}, "
        f"{fingerprint.get('dimension')} dims{f', passages prefixed {prefix!r}' if prefix else ''})"
    )


def _diff_properties(
    desired: Mapping[str, Any], current: Mapping[str, Any], diff: IndexDiff, path: str = ""
) -> None:
    for name, spec in desired.items():
        full = f"{path}{name}"
        have = current.get(name)
        if have is None:
            if path:
                diff.incompatible.append(f"new sub-field {full} (objects are rebuilt in a copy)")
            else:
                diff.new_fields[name] = spec
            continue
        found = first_difference(spec, have)
        if found is None:
            continue
        where, want, got = found
        if spec.get("type") == "knn_vector" and where == "dimension" and name == SECOND_FIELD:
            diff.second_reader_change = True
            diff.incompatible.append(
                f"second reader's vector field {full}: dimension {got} -> {want}"
            )
        elif spec.get("type") == "knn_vector" and where == "dimension":
            diff.dimension_change = (int(got), int(want))
            diff.incompatible.append(f"vector field {full}: dimension {got} -> {want}")
        else:
            diff.incompatible.append(f"field {full}: {where} {got!r} -> {want!r}")
