"""The readings behind `loader doctor`'s hybrid hazard checks, on recorded answers: the saved
configuration that sets ``search_type=dfs_query_then_fetch``, nested fields, and the security
plugin's roles that put DLS on the alias (the answer of ``GET _plugins/_security/api/roles`` for
the secure test image's roles, opensearch/secure/security/roles.yml), and the refusal of that
search type in the templates' URL parameters."""

from __future__ import annotations

import pytest

from loader.doctor.hybrid import (
    dls_roles,
    nested_fields,
    search_type_mentions,
    wrapped_scores_check,
)
from loader.errors import ConfigError
from loader.index.search_params import template_url_params

DFS = "dfs_query_then_fetch"
# GET _plugins/_security/api/roles on the secure image: its two tenant roles, and two of the
# plugin's own (no DLS).
ROLES = {
    "tenant_acme": {
        "reserved": False,
        "hidden": False,
        "description": "Tenant acme: read its own chunks",
        "cluster_permissions": ["cluster_composite_ops_ro"],
        "index_permissions": [
            {
                "index_patterns": ["chunks*"],
                "dls": '{"term": {"tenant": "acme"}}',
                "fls": [],
                "masked_fields": [],
                "allowed_actions": ["read"],
            }
        ],
        "tenant_permissions": [],
        "static": False,
    },
    "tenant_globex": {
        "reserved": False,
        "hidden": False,
        "cluster_permissions": ["cluster_composite_ops_ro"],
        "index_permissions": [
            {
                "index_patterns": ["chunks*"],
                "dls": '{"term": {"tenant": "globex"}}',
                "fls": [],
                "masked_fields": [],
                "allowed_actions": ["read"],
            }
        ],
        "tenant_permissions": [],
        "static": False,
    },
    "all_access": {
        "reserved": True,
        "hidden": False,
        "cluster_permissions": ["*"],
        "index_permissions": [
            {"index_patterns": ["*"], "fls": [], "masked_fields": [], "allowed_actions": ["*"]}
        ],
        "tenant_permissions": [],
        "static": True,
    },
    "logs_reader": {
        "reserved": False,
        "hidden": False,
        "index_permissions": [
            {"index_patterns": ["logs-*"], "dls": '{"match_all": {}}', "allowed_actions": ["read"]}
        ],
        "static": False,
    },
}


def test_the_roles_that_put_dls_on_the_alias_or_its_index():
    assert dls_roles(ROLES, ["chunks", "chunks-v3"]) == ["tenant_acme", "tenant_globex"]
    assert dls_roles(ROLES, ["faq", "faq-v1"]) == []
    regex = {"r": {"index_permissions": [{"index_patterns": ["/faq-v[0-9]+/"], "dls": "{}"}]}}
    assert dls_roles(regex, ["faq", "faq-v1"]) == ["r"]


def test_dls_roles_warn_before_3_9_and_not_after():
    names = ["chunks", "chunks-v1"]
    check = wrapped_scores_check([], ROLES, names, True, (3, 6))
    assert check.status == "warn"
    assert check.detail.startswith("roles tenant_acme, tenant_globex put a DLS query on chunks: ")
    assert wrapped_scores_check([], ROLES, names, True, (3, 9)).status == "ok"
    assert wrapped_scores_check([], {}, names, False, (3, 6)).status == "ok"


def test_roles_that_cannot_be_read_are_a_warning():
    check = wrapped_scores_check([], None, ["chunks"], True, (3, 6))
    assert check.status == "warn" and "roles cannot be read" in check.detail


def test_nested_fields_at_any_depth():
    mapping = {
        "properties": {
            "title": {"type": "text"},
            "meta": {"properties": {"reviews": {"type": "nested", "properties": {}}}},
            "parts": {"type": "nested", "properties": {"notes": {"type": "nested"}}},
        }
    }
    assert nested_fields(mapping) == ["meta.reviews", "parts", "parts.notes"]
    check = wrapped_scores_check(["parts"], {}, ["chunks"], False, (3, 6))
    assert check.detail.startswith("the mapping has nested fields (parts): ")


def test_the_saved_configuration_that_sets_dfs():
    bodies = {
        "chunks-rrf (stored)": {
            "request_processors": [{"script": {"source": f"ctx.search_type = '{DFS}'"}}]
        },
        "chunks-hybrid (files)": {"script": {"lang": "mustache", "source": '{"query": {}}'}},
        "chunks-bm25 (stored)": {
            "script": {"source": f'{{"search_type": "{DFS}", "query": {{}}}}'}
        },
        "chunks-v1 settings (stored)": {"index.search.idle.after": "30s"},
    }
    assert search_type_mentions(bodies) == ["chunks-bm25 (stored)", "chunks-rrf (stored)"]


def test_the_templates_url_parameters_refuse_dfs():
    assert template_url_params("chunks-rrf") == {"search_pipeline": "chunks-rrf"}
    assert template_url_params(None, search_type="query_then_fetch") == {
        "search_type": "query_then_fetch"
    }
    with pytest.raises(ConfigError, match=f"search_type {DFS} is refused: it skips"):
        template_url_params("chunks-rrf", search_type=DFS)


def test_no_front_end_lets_a_caller_pass_a_search_type():
    # The retrievers' options and the HTTP body are the only ways in besides the library's
    # SearchRequest, which has no such field: each refuses it by name.
    from pydantic import ValidationError

    from loader.integrations.core import TenantSearch
    from loader.serve.body import SearchRequest as SearchBody
    from loader.settings import Settings

    with pytest.raises(ConfigError, match="unknown search option search_type"):
        TenantSearch("A", settings=Settings(), search_type=DFS)
    with pytest.raises(ValidationError, match="search_type"):
        SearchBody.model_validate({"question": "q", "tenant": "A", "search_type": DFS})


class _Transport:
    """The one call the roles reading makes, answering as a cluster whose user is not an admin
    (the security plugin's 403), or with a recorded answer."""

    def __init__(self, answer):
        self.answer = answer

    def perform_request(self, method, path):
        assert (method, path) == ("GET", "/_plugins/_security/api/roles")
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_roles_a_non_admin_may_not_read_are_none_not_a_doctor_failure():
    import opensearchpy

    from loader.doctor.hybrid import _roles
    from loader.settings import Settings

    refused = opensearchpy.AuthorizationException(403, "security_exception", {})
    client = type("Client", (), {"transport": _Transport(refused)})()
    assert _roles(client, Settings()) is None
    client.transport = _Transport(ROLES)
    assert _roles(client, Settings()) == ROLES
