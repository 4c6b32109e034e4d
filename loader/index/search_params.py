"""The parameters the stored search templates take (``search_templates/*.json.j2``), built in one
place: every caller of a template -- ``loader search`` and ``loader serve``
(``loader.query.search``), ``loader explain``, ``loader doctor``'s probes and the framework
retrievers (``loader.integrations``) -- gets its ``params`` from ``search_template_params``, so a
parameter is named and shaped (a list, a number) the same way everywhere.

Their URL parameters come from ``template_url_params``, which refuses the search type that
breaks a hybrid query (``REFUSED_SEARCH_TYPES``).

``guide/templates.md`` describes each parameter for applications that call the templates
without this package.

Example::

    search_template_params("acme", query_text="refund", depth=50, filters={"lang": "en"})
    # {'tenant': 'acme', 'query_text': 'refund', 'exact_terms': [], 'size': 50, 'k': 50,
    #  'lang': 'en'}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from loader.errors import ConfigError

# The filter parameters, in the order of search_templates/_parts.j2's filters() and decay.
FILTER_PARAMETERS = ("lang", "tags", "published_from", "published_to", "decay_scale")


def search_template_params(
    tenant: str,
    *,
    query_text: str | None = None,
    query_vector: Sequence[float] | None = None,
    second_query_vector: Sequence[float] | None = None,
    exact_terms: Sequence[str] = (),
    depth: int | None = None,
    filters: Mapping[str, Any] | None = None,
    collapse_doc: bool = False,
) -> dict[str, Any]:
    """The ``params`` of one ``_search/template`` (or ``_render/template``) call.

    Args:
        tenant: the only tenant whose chunks the templates return (they require it).
        query_text: the question, for the BM25 side and the text-only templates.
        query_vector: the question's embedding, for the k-NN side.
        second_query_vector: the question's embedding by the second reader
            (``second_embedding_model``), for its k-NN sub-query; without it the hybrid
            templates search the first reader in its place.
        exact_terms: the question's identifiers; sent even when empty, so every call names
            them (the templates treat ``[]`` as none).
        depth: hits returned (``size``) and k-NN candidates and the hybrid query's depth
            (``k``), which every caller sets alike; ``None`` leaves both to the templates'
            defaults (``top_k``, ``candidates``).
        filters: checked values of ``FILTER_PARAMETERS`` (``SearchFilters.template_params``);
            empty ones are left out.
        collapse_doc: one hit per document; left out when false, since the templates treat any
            value, even ``false``, as on.

    Raises:
        ValueError: a filter that the templates do not take (a programming error: user input is
            checked by ``loader.query.request.SearchFilters`` first).
    """
    params: dict[str, Any] = {"tenant": tenant}
    if query_text is not None:
        params["query_text"] = query_text
    params["exact_terms"] = list(exact_terms)
    if depth is not None:
        params["size"] = params["k"] = depth
    unknown = sorted(set(filters or {}) - set(FILTER_PARAMETERS))
    if unknown:
        raise ValueError(f"the search templates take no filter {', '.join(unknown)}")
    params.update({name: value for name, value in (filters or {}).items() if value})
    if collapse_doc:
        params["collapse_doc"] = True
    if query_vector is not None:
        params["query_vector"] = list(query_vector)
    if second_query_vector is not None:
        params["second_query_vector"] = list(second_query_vector)
    return params


# What each refused search type does to a hybrid query (OpenSearch 3.6; refused by the server
# itself from 3.8, neural-search PR 1873): with more than one shard it runs a DFS_QUERY phase
# instead of the QUERY phase the search pipeline's normalization runs after, so each sub-query's
# raw results come back unfused (neural-search issue 1490).
REFUSED_SEARCH_TYPES = {
    "dfs_query_then_fetch": "it skips the hybrid query's score normalization on an index of "
    "more than one shard and returns each sub-query's raw results (OpenSearch before 3.8)",
}


def template_url_params(pipeline: str | None, search_type: str | None = None) -> dict[str, str]:
    """The URL parameters of one ``_search/template`` call: the fusion pipeline of the hybrid
    modes, and a ``search_type`` only when it is one a hybrid query survives.

    Example::

        template_url_params("chunks-rrf")   # {'search_pipeline': 'chunks-rrf'}

    Raises:
        ConfigError: ``search_type`` is ``dfs_query_then_fetch`` (``REFUSED_SEARCH_TYPES``).
    """
    if search_type in REFUSED_SEARCH_TYPES:
        raise ConfigError(
            f"search_type {search_type} is refused: {REFUSED_SEARCH_TYPES[search_type]}; "
            "leave search_type out (query_then_fetch)"
        )
    params = {"search_pipeline": pipeline} if pipeline else {}
    if search_type:
        params["search_type"] = search_type
    return params
