"""The guard a push calls before it writes: is the alias's index built for this embedding model
(dimension and fingerprint) and this document id scheme? ``check_index_compatible`` refuses
anything else with ``IncompatibleIndexError``, naming the index and the fix (``loader apply``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opensearchpy import OpenSearch

from loader.cluster.client import cluster_errors, safe_url
from loader.documents import DOC_ID_SCHEME
from loader.errors import IncompatibleIndexError
from loader.index.diff import describe_fingerprint, normalize
from loader.index.state import get_or_none
from loader.models.readers import FIRST_FIELD, SECOND_FIELD, reader_dimension, reader_settings
from loader.models.registry import EMBEDDING_META_KEY, SECOND_READER_META_KEY, index_fingerprint
from loader.settings import Settings


def _vector_dimensions(properties: Mapping[str, Any]) -> dict[str, int]:
    """``{field: dimension}`` of the ``knn_vector`` fields among mapping ``properties``."""
    return {
        name: int(spec["dimension"])
        for name, spec in properties.items()
        if isinstance(spec, Mapping) and spec.get("type") == "knn_vector" and "dimension" in spec
    }


def _check_model_fingerprint(
    index: str, alias: str, body: Mapping[str, Any], settings: Settings, dimension: int
) -> None:
    """Refuse an index whose vectors are another model's (``_meta.embedding_model``)."""
    have = ((body.get("mappings") or {}).get("_meta") or {}).get(EMBEDDING_META_KEY)
    want = index_fingerprint(settings, dimension)
    if have is None:
        raise IncompatibleIndexError(
            f"index {index} (alias {alias!r}) does not record which embedding model made its "
            f"vectors; run `loader apply` (it records {describe_fingerprint(want)} when the "
            "dimension fits), then push"
        )
    if normalize(have) != normalize(want):
        raise IncompatibleIndexError(
            f"index {index} (alias {alias!r}) holds vectors of {describe_fingerprint(have)}, but "
            f"the settings embed with {describe_fingerprint(want)}; mixing them would make "
            "searches compare two models' vectors. Run `loader apply` (it plans a new, empty "
            "index version), then push again"
        )


def _check_second_reader(
    index: str,
    alias: str,
    body: Mapping[str, Any],
    settings: Settings,
    stored: int | None,
) -> None:
    """Refuse an index that lacks the settings' second reader, or holds another one's vectors in
    ``second_embedding`` (``_meta.second_embedding_model``). An index with a second reader the
    settings do not name is left as it is: a push then writes chunks without its vectors."""
    second = reader_settings(settings)
    if second is None:
        return
    if stored is None:
        raise IncompatibleIndexError(
            f"index {index} (alias {alias!r}) has no {SECOND_FIELD!r} field for the second reader "
            f"{second.embedding_model!r} (second_embedding_model); run `loader apply` (it adds "
            "the field in place; a project's own mappings/chunks.json.j2 must declare it), then "
            "push: only the second reader's vectors are embedded"
        )
    have = ((body.get("mappings") or {}).get("_meta") or {}).get(SECOND_READER_META_KEY)
    want = index_fingerprint(second, reader_dimension(second.embedding_model))
    if have is None or normalize(have) != normalize(want):
        held = describe_fingerprint(have) if have else "vectors of no recorded model"
        raise IncompatibleIndexError(
            f"index {index} (alias {alias!r}) holds {held} in {SECOND_FIELD!r}, but the settings' "
            f"second reader is {describe_fingerprint(want)}; run `loader apply`, then push again"
        )


def check_index_compatible(client: OpenSearch, settings: Settings, dimension: int) -> str:
    """Refuse to push into an index built for another model (its fingerprint: model, backend,
    dimension, passage instruction) or another document id scheme.

    Args:
        client: from ``connect``.
        settings: ``index_name`` is the alias written to; ``embedding_model`` names the model.
        dimension: the dimension of the configured model's vectors.

    Returns:
        The concrete index the alias points at.

    Raises:
        IncompatibleIndexError: the index is missing, holds vectors of another model or
            dimension, or was built with another document id scheme (``DOC_ID_SCHEME``).
        ConfigError: ``embedding_location = cluster`` but the index's ingest pipeline does not
            embed (``loader.index.ml_model.check_push_embedding``).
    """
    alias = settings.index_name
    where = safe_url(settings.opensearch_url)
    with cluster_errors(settings, f"reading the mapping of {alias}"):
        mappings = get_or_none(client.indices.get_mapping, index=alias)
    if not mappings:
        raise IncompatibleIndexError(
            f"index {alias!r} does not exist on {where}; run `loader apply` to create it, then push"
        )
    for index, body in sorted(mappings.items()):
        scheme = ((body.get("mappings") or {}).get("_meta") or {}).get("doc_id_scheme")
        if scheme != DOC_ID_SCHEME:
            raise IncompatibleIndexError(
                f"index {index} (alias {alias!r}) was built with document ids "
                f"{'that ignore the tenant' if scheme is None else f'of scheme {scheme!r}'}; "
                "pushing into it could overwrite another tenant's documents. Run `loader apply` "
                "(it plans a new, empty index version), then push each tenant's folder again"
            )
        properties = (body.get("mappings") or {}).get("properties") or {}
        dimensions = _vector_dimensions(properties)
        if not dimensions:
            raise IncompatibleIndexError(
                f"index {index} (alias {alias!r}) has no knn_vector field; run `loader apply` "
                "to create a new index version from the mapping files, then push"
            )
        stored = dimensions.get(FIRST_FIELD)
        if stored is not None and stored != dimension:
            raise IncompatibleIndexError(
                f"index {index} (alias {alias!r}) stores {stored}-dimensional vectors in "
                f"{FIRST_FIELD!r}, but embedding model {settings.embedding_model!r} makes "
                f"{dimension}-dimensional ones; run `loader apply` to create a new index "
                "version for this model, then push again"
            )
        _check_model_fingerprint(index, alias, body, settings, dimension)
        _check_second_reader(index, alias, body, settings, dimensions.get(SECOND_FIELD))
    if settings.embedding_location == "cluster":
        from loader.index import ml_model as ml

        ml.check_push_embedding(client, settings)
    return sorted(mappings)[0]
