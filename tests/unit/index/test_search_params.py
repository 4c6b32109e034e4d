"""The one builder of the stored templates' parameters: what each caller sends, and that the
search path, explain's sub-queries and doctor's probes all go through it."""

from __future__ import annotations

import inspect

import pytest

from loader.doctor import probes
from loader.index.search_params import FILTER_PARAMETERS, search_template_params
from loader.query import explain, search
from loader.query.request import SearchFilters, SearchRequest
from loader.settings import Settings


def test_a_bare_call_names_the_tenant_and_no_exact_terms() -> None:
    assert search_template_params("acme") == {"tenant": "acme", "exact_terms": []}


def test_every_parameter_in_its_template_shape() -> None:
    params = search_template_params(
        "acme",
        query_text="refund R-2207",
        query_vector=(0.5, 0.25),
        exact_terms=("R-2207",),
        depth=7,
        filters={"lang": "en", "tags": ["billing"], "published_from": "now-1y"},
        collapse_doc=True,
    )
    assert params == {
        "tenant": "acme",
        "query_text": "refund R-2207",
        "exact_terms": ["R-2207"],
        "size": 7,
        "k": 7,
        "lang": "en",
        "tags": ["billing"],
        "published_from": "now-1y",
        "collapse_doc": True,
        "query_vector": [0.5, 0.25],
    }


def test_empty_filters_and_a_false_collapse_are_left_out() -> None:
    # collapse_doc: the templates treat any value, even false, as on
    params = search_template_params("acme", filters={"lang": None, "tags": []}, collapse_doc=False)
    assert params == {"tenant": "acme", "exact_terms": []}


def test_a_filter_the_templates_do_not_take_is_refused() -> None:
    with pytest.raises(ValueError, match="take no filter tenant"):
        search_template_params("acme", filters={"tenant": "other"})


def test_the_request_builds_its_query_s_params_with_it() -> None:
    settings = Settings(index_name="docs", rerank="off")
    request = SearchRequest.from_settings(
        settings,
        "q",
        tenant="A",
        candidates=9,
        k=3,
        one_per_document=True,
        filters=SearchFilters(tags=("x",), decay_scale="30d"),
    )
    assert request.template_params("what is E1043", [1.0]) == search_template_params(
        "A",
        query_text="what is E1043",
        query_vector=[1.0],
        exact_terms=["E1043"],
        depth=9,
        filters={"tags": ["x"], "decay_scale": "30d"},
        collapse_doc=True,
    )
    assert set(SearchFilters().template_params()) <= set(FILTER_PARAMETERS)


@pytest.mark.parametrize("module", [search, explain, probes])
def test_no_caller_spells_the_parameters_itself(module) -> None:
    source = inspect.getsource(module)
    for name in ('"query_text":', '"exact_terms":', '"query_vector":', '"collapse_doc":'):
        assert name not in source, (module.__name__, name)
