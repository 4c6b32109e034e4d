"""The HTTP body of ``POST /search``: pydantic models that check JSON types strictly and describe
the API in OpenAPI, then become the library's ``loader.query.request.SearchRequest``, which does
every other check (the limits here are only those a JSON schema can state).

Example::

    SearchRequest(question="How long do refunds take?", tenant="acme").to_request(settings, "acme")
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

import loader.query.request as query
from loader.query.conversation import MAX_HISTORY_TURNS, MAX_TURN_CHARS, ROLES
from loader.serve.auth import MAX_TENANT_CHARS
from loader.settings import MAX_CANDIDATES, SEARCH_MODES, Settings

MAX_TAGS = 50

SearchMode = Literal[SEARCH_MODES]  # type: ignore[valid-type]
Expansion = Literal[query.EXPANSIONS]  # type: ignore[valid-type]
Role = Literal[ROLES]  # type: ignore[valid-type]


class FiltersBody(BaseModel):
    """Optional filters (see ``loader.query.request.SearchFilters``)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    lang: str | None = Field(None, max_length=16, description="Only chunks in this language.")
    tags: list[str] = Field(
        default_factory=list, max_length=MAX_TAGS, description="Chunks carrying any of these."
    )
    published_from: str | None = Field(
        None, max_length=40, examples=["2024-01-01", "now-1y"], description="ISO date or now-math."
    )
    published_to: str | None = Field(None, max_length=40)
    decay_scale: str | None = Field(
        None, max_length=16, examples=["180d"], description="Whole number and unit, at least 1ms."
    )


class HistoryTurn(BaseModel):
    """One earlier turn of the conversation."""

    model_config = ConfigDict(extra="forbid", strict=True)

    role: Role
    content: str = Field(..., max_length=MAX_TURN_CHARS)


class SearchRequest(BaseModel):
    """One search. ``tenant`` is required: every search is scoped to exactly one tenant.

    The HTTP body of ``loader.query.request.SearchRequest`` (``to_request`` builds that one):
    fields left out take the server's settings.
    """

    model_config = ConfigDict(extra="forbid", strict=True)

    # max_length is checked by hand (413), so the limit is not declared to pydantic.
    question: str = Field(..., min_length=1, description="The user's question.")
    tenant: str = Field(
        ..., min_length=1, max_length=MAX_TENANT_CHARS, description="Tenant to search."
    )
    mode: SearchMode | None = Field(None, description="Default: the search_mode setting.")
    rerank: bool | None = Field(
        None, description="Rerank the candidates with the cross-encoder (default: the setting)."
    )
    # The CLI's range (--k 1 to 10000): one face for every command.
    k: int | None = Field(None, ge=1, le=MAX_CANDIDATES, description="Results (default: top_k).")
    candidates: int | None = Field(
        None, ge=1, le=query.MAX_CANDIDATES, description="Retrieved before the rerank."
    )
    filters: FiltersBody = Field(default_factory=FiltersBody)
    expand: Expansion | None = Field(None, description="Parent section or sentence window.")
    merge_adjacent: bool = False
    prompt_order: bool = False
    one_per_document: bool = Field(False, description="At most one hit per document.")
    exact_match: bool | None = Field(None, description="Identifiers' chunks first (setting).")
    history: list[HistoryTurn] = Field(
        default_factory=list,
        max_length=MAX_HISTORY_TURNS,
        description="Earlier turns, oldest first: the question is a follow-up to them.",
    )
    client_id: str = Field(
        "",
        max_length=query.MAX_CLIENT_ID_CHARS,
        pattern=query.CLIENT_ID_PATTERN,
        examples=["5f1c2a9e-web"],
        description="The user's session as the client names it (visible ASCII, no spaces): "
        "written to the query log, so one user's follow-ups are told apart; never a tenant.",
    )

    def to_request(self, settings: Settings, tenant: str) -> query.SearchRequest:
        """The library's request for ``tenant``; unset fields take ``settings``' defaults.

        Raises:
            ConfigError: the library's checks refused it (the message names the field).
        """
        filters = self.filters.model_dump()
        return query.SearchRequest.from_settings(
            settings,
            self.question,
            **self.model_dump(exclude={"question", "tenant", "filters"}),
            tenant=tenant,
            filters=query.SearchFilters(**filters | {"tags": tuple(filters["tags"])}),
        )


class KeyedSearchRequest(SearchRequest):
    """One search with an API key: the tenant is the key's; a body ``tenant`` must be the same."""

    tenant: str | None = Field(  # type: ignore[assignment]
        None,
        min_length=1,
        max_length=MAX_TENANT_CHARS,
        description="Optional: the API key's tenant; any other is refused (403).",
    )


class EventBody(BaseModel):
    """One event against a logged search (``POST /events``, with ``query_log = "ubi"``): the
    ``query_id`` the search answered with, what happened (``click``, ``answered``...) and, for a
    result, its chunk id and 1-based position."""

    model_config = ConfigDict(extra="forbid", strict=True)

    query_id: str = Field(..., min_length=1, max_length=64)
    action_name: str = Field(..., min_length=1, max_length=64, examples=["click", "answered"])
    object_id: str = Field("", max_length=256, description="The chunk id the event concerns.")
    position: int | None = Field(None, ge=1, le=MAX_CANDIDATES)
    client_id: str = Field("", max_length=128, description="The user's session, not a person.")
    tenant: str | None = Field(
        None, min_length=1, max_length=MAX_TENANT_CHARS, description="Without API keys: required."
    )
