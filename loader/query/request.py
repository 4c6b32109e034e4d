"""One search request, checked once, for every front end: the library, ``loader search`` and
``loader serve``.

``SearchRequest`` is a frozen dataclass that validates itself when it is built: a request that
exists is one ``loader.query.search.search`` can send. ``from_settings`` fills what the caller
leaves out (``None``) from the settings::

    request = SearchRequest.from_settings(settings, "How long do UPI refunds take?", tenant="acme")
    request.mode, request.k          # settings.search_mode, settings.top_k
    request = SearchRequest.from_settings(
        settings, "refunds", tenant="acme", mode="bm25", rerank=False,
        filters=SearchFilters(lang="en", published_from="now-1y"),
    )
    search(request, settings)

Every refusal is a ``ConfigError`` naming the parameter (``k must be a positive whole number, got
0``, ``published_from '2020-13-45' is not a date; ...``), raised before any model is loaded or any
request is sent, so a front end answers bad input with a 4xx (or exit code 2) whatever the server
lacks.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from loader.errors import ConfigError
from loader.index.search_params import search_template_params
from loader.models.rerank.check import LEARNED, RerankChoice, choose_reranker, default_rerank
from loader.query.conversation import check_history
from loader.query.identifiers import exact_terms
from loader.settings import EXPANSIONS, MAX_CANDIDATES, SEARCH_MODES, Settings, tenant_problem
from loader.text import first_surrogate, require_unicode

# Characters of a question that are searched; the rest is cut off (the embedder sees at most
# 256 tokens anyway, about 1,000 characters of English).
MAX_QUESTION_CHARS = 2000
# A client's own name for its user's session (the query log's ``client_id``): visible ASCII, no
# spaces, at most this long. Logged only; never a tenant, a key or anything trusted.
MAX_CLIENT_ID_CHARS = 128
CLIENT_ID_PATTERN = rf"^[\x21-\x7e]{{0,{MAX_CLIENT_ID_CHARS}}}$"
# Fields of a request whose default is a setting: field -> setting (and ``rerank``, whose default
# the rerank setting decides: ``default_rerank``).
FROM_SETTINGS = {
    "mode": "search_mode",
    "k": "top_k",
    "candidates": "candidates",
    "exact_match": "exact_match",
}

# What OpenSearch accepts as a date filter (the ``published`` field's default format,
# strict_date_optional_time): an ISO date, its time and zone optional. The parts' ranges are
# checked by ``check_date``, so that 2020-13-45 is refused here, not by the cluster.
_ISO_DATE = re.compile(
    r"(?P<year>\d{4})(-(?P<month>\d{2})(-(?P<day>\d{2})"
    r"(T(?P<hour>\d{2})(:(?P<minute>\d{2})(:(?P<second>\d{2})(\.\d{1,9})?)?)?"
    r"(Z|[+-](?P<zone_hour>\d{2}):?(?P<zone_minute>\d{2}))?)?)?)?",
    re.ASCII,
)
# The largest value of each time part of an ISO date (the date itself is checked by datetime).
_TIME_LIMITS = {"hour": 23, "minute": 59, "second": 59, "zone_hour": 18, "zone_minute": 59}
# Or date math from now: at most 4 steps of at most 6 digits, so the result stays inside the
# range of a date in milliseconds (a larger one overflows on the server).
_DATE_MATH = re.compile(r"now([+-]\d{1,6}[yMwdhHms]){0,4}(/[yMwdhHms])?", re.ASCII)
# A decay scale is a time value: a whole number (OpenSearch refuses fractions) and a unit.
_TIME_VALUE = re.compile(r"(?P<number>\d{1,15})(?P<unit>nanos|micros|ms|s|m|h|d)", re.ASCII)
_NANOS_PER_UNIT = {
    "nanos": 1,
    "micros": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
    "d": 86_400_000_000_000,
}
# A date decay's scale is used in whole milliseconds: 1 ms up to 10,000 days (27 years).
_MAX_DECAY_MS = 10_000 * 86_400_000


def _valid_iso_date(match: re.Match[str]) -> bool:
    parts = {key: int(part) for key, part in match.groupdict().items() if part is not None}
    try:
        datetime.date(parts["year"], parts.get("month", 1), parts.get("day", 1))
    except ValueError:
        return False
    zone_minutes = 60 * parts.get("zone_hour", 0) + parts.get("zone_minute", 0)
    # The server's offsets reach +-18:00 exactly: +18:01 passes both parts' limits but not it.
    return zone_minutes <= 18 * 60 and all(
        parts.get(name, 0) <= limit for name, limit in _TIME_LIMITS.items()
    )


def learned_defaults(
    choice: RerankChoice, given: Mapping[str, Any], defaults: dict[str, Any]
) -> list[str]:
    """A learned model reranks best the candidates it learnt from: its ``base_mode`` and
    ``candidate_depth`` become the request's ``mode`` and ``candidates`` where the caller left
    them out (``defaults`` is updated). What the caller gives is honoured, not refused (an
    explicit comparison, `loader eval`'s rows, an app's choice), with a warning per difference,
    returned.
    """
    if choice.kind != LEARNED:
        return []
    warnings = []
    learnt = "this tenant's learned reranker"  # no folder: the warning reaches HTTP clients
    if choice.base_mode in SEARCH_MODES:
        if "mode" not in given:
            defaults["mode"] = choice.base_mode
        elif given["mode"] != choice.base_mode:
            warnings.append(
                f"mode {given['mode']} asked for: {learnt} learnt from {choice.base_mode}'s "
                "candidates, so it reranks others than it was measured on"
            )
    depth = choice.candidate_depth
    if depth:
        if "candidates" not in given:
            defaults["candidates"] = min(depth, MAX_CANDIDATES)
        elif isinstance(given["candidates"], int) and given["candidates"] < depth:
            warnings.append(
                f"candidates {given['candidates']} asked for: {learnt} learnt at {depth} "
                "candidates a question, so it reranks fewer than it was measured on"
            )
    return warnings


def check_date(name: str, value: object) -> str:
    """``value`` if it is a date filter OpenSearch accepts: an ISO date (``2024-05-01``, with an
    optional ``T10:30:00Z`` time) or date math from now (``now-1y``, ``now-30d/d``).

    Raises:
        ConfigError: naming ``name``, for any other value (``2020-13-45``, ``yesterday``, a number).
    """
    if isinstance(value, datetime.date):  # a date or datetime object: its ISO form
        value = value.isoformat()
    text = value if isinstance(value, str) else None
    match = _ISO_DATE.fullmatch(text) if text is not None else None
    valid = (
        _valid_iso_date(match) if match else text is not None and bool(_DATE_MATH.fullmatch(text))
    )
    if not valid:
        raise ConfigError(
            f"{name} {_shown(value)} is not a date; give an ISO date such as 2024-05-01 "
            "or date math such as now-1y"
        )
    return str(text)


def check_time_value(name: str, value: object) -> str:
    """``value`` if it is a positive time value OpenSearch accepts as a decay scale: a whole
    number and a unit (``nanos``, ``micros``, ``ms``, ``s``, ``m``, ``h``, ``d``), at least 1 ms.

    Raises:
        ConfigError: naming ``name``, for ``0d``, ``1.5d``, ``-1d``, ``180 days``, a number ...
    """
    match = _TIME_VALUE.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise ConfigError(
            f"{name} {_shown(value)} is not a time value; give a whole number and a unit "
            "(nanos, micros, ms, s, m, h, d) such as 180d or 12h"
        )
    nanos = int(match["number"]) * _NANOS_PER_UNIT[match["unit"]]
    if not 1_000_000 <= nanos <= _MAX_DECAY_MS * 1_000_000:
        raise ConfigError(
            f"{name} {_shown(value)} is out of range; give a duration between 1ms and 10000d "
            "(OpenSearch counts it in whole milliseconds and refuses 0)"
        )
    return str(value)


def _shown(value: object, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, for messages about a bad parameter."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_depth(name: str, value: object) -> None:
    """Refuse a ``k`` or ``candidates`` that is not a whole number from 1 to ``MAX_CANDIDATES``
    (OpenSearch's index.max_result_window): the one range of every front end.

    Raises:
        ConfigError: e.g. "k must be a positive whole number, got 0".
    """
    # 0 would reach OpenSearch as size 0, which the hybrid query answers with a server error
    # ("score normalization processor cannot produce final query result").
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be a positive whole number, got {_shown(value)}")
    if value > MAX_CANDIDATES:
        raise ConfigError(f"{name} must be at most {MAX_CANDIDATES}, got {value}")


def truncate_question(question: str, limit: int = MAX_QUESTION_CHARS) -> str:
    """``question`` cut to at most ``limit`` characters, at a word boundary when one is near."""
    if len(question) <= limit:
        return question
    cut = question[:limit]
    space = cut.rfind(" ", limit - 200)
    return (cut[:space] if space > 0 else cut).rstrip()


@dataclass(frozen=True)
class SearchFilters:
    """Optional filters, passed to the search template as parameters.

    Args:
        lang: only chunks of this language (``lang`` field, e.g. ``en``).
        tags: only chunks carrying at least one of these tags.
        published_from: only chunks published on or after this date (``2024-01-01``, ``now-1y``).
        published_to: only chunks published on or before this date.
        decay_scale: favour recent chunks: the score is halved at ``now - decay_scale`` (``180d``).
    """

    lang: str | None = None
    tags: tuple[str, ...] = ()
    published_from: str | None = None
    published_to: str | None = None
    decay_scale: str | None = None

    def template_params(self) -> dict[str, Any]:
        """The filters as search template parameters; empty ones are left out.

        Raises:
            ConfigError: a date or the decay scale is malformed (named in the message).
        """
        params: dict[str, Any] = {}
        if self.lang:
            params["lang"] = str(self.lang)
        tags = [self.tags] if isinstance(self.tags, str) else list(self.tags or ())
        tags = [str(tag) for tag in tags if str(tag)]
        if tags:
            params["tags"] = tags
        for name in ("published_from", "published_to"):
            value = getattr(self, name)
            if value:
                params[name] = check_date(name, value)
        if self.decay_scale:
            params["decay_scale"] = check_time_value("decay_scale", self.decay_scale)
        return params


@dataclass(frozen=True)
class SearchRequest:
    """One search of one tenant; checked when it is built.

    Args:
        question: the user's (latest) message.
        tenant: the tenant to search; required and never widened by any other parameter.
        mode: one of ``loader.settings.SEARCH_MODES`` (the search_mode setting's choices).
        rerank: rerank the candidates with the cross-encoder (``settings.reranker_model``).
        k: results returned, 1 to ``MAX_CANDIDATES``.
        candidates: chunks retrieved per query before the rerank, 1 to ``MAX_CANDIDATES`` (at
            least ``k`` are retrieved).
        filters: language, tags, publication dates and recency decay.
        expand: ``"parent"`` replaces each chunk by its parent section (one hit per section),
            ``"window"`` by its sentence window; ``None`` keeps the chunks.
        merge_adjacent: merge consecutive chunks of one document into one hit.
        prompt_order: return the hits best-at-the-edges ("lost in the middle") instead of best
            first.
        exact_match: find identifiers in each searched query (``loader.query.identifiers``) and
            pass them as the templates' ``exact_terms``, so the chunks holding them rank first.
        one_per_document: at most one hit per document, its best chunk (the templates'
            ``collapse_doc``); ``k`` then counts documents.
        history: earlier chat turns ``[{"role": "user"|"assistant", "content"}]``, given to the
            query rewriter (see ``loader.query.search.search``); checked and kept as a tuple
            (``loader.query.conversation.check_history``).
        warnings: what the result's ``warnings`` start with: why a default left something out
            (``rerank = auto`` without a cross-encoder).
        rerank_unavailable: ``rerank = auto`` left the rerank off because no reranker is
            available here (``default_rerank``); the result says so (``rerank_skipped``).
        client_id: the client's name for its user's session, written to the query log (its
            ``client_id``: the ``worst`` sampler tells one user's follow-ups by it). Visible
            ASCII, at most ``MAX_CLIENT_ID_CHARS``; never used for the tenant or access.

    Build one with ``from_settings``, which takes the settings' defaults for ``mode``,
    ``rerank``, ``k``, ``candidates`` and ``exact_match``.

    Raises:
        ConfigError: a question or tenant that is not a string or is blank, an unknown mode or
            expansion, a number below 1 or above the limit, a flag that is not a bool, a
            malformed date or decay scale; the message names the parameter.
    """

    question: str
    tenant: str
    mode: str
    rerank: bool
    k: int
    candidates: int
    filters: SearchFilters = field(default_factory=SearchFilters)
    expand: str | None = None
    merge_adjacent: bool = False
    prompt_order: bool = False
    history: Sequence[Mapping[str, str]] = ()
    exact_match: bool = True
    one_per_document: bool = False
    warnings: tuple[str, ...] = ()
    rerank_unavailable: bool = False
    client_id: str = ""

    @classmethod
    def from_settings(cls, settings: Settings, question: str, **fields: Any) -> SearchRequest:
        """A request whose fields in ``FROM_SETTINGS`` (``mode``, ``rerank``, ``k``, ``candidates``,
        ``exact_match``) default to those settings; ``None`` for any field means its default, so
        front ends can pass their unset options through. ``rerank`` defaults to the rerank
        setting; with ``auto``, to whether ``reranker_model`` is a cross-encoder on this machine
        (a file-system check, no model loaded), else the tenant's learned model, and a warning
        says so when there is none. A search the tenant's learned model reranks takes the mode
        and candidates it learnt from unless the caller gives them (``learned_defaults``).

        Example::

            SearchRequest.from_settings(settings, "refund", tenant="A", k=None, expand="parent")

        Raises:
            ConfigError: see the class.
            TypeError: a field that ``SearchRequest`` does not have, or no ``tenant``.
        """
        given = {name: value for name, value in fields.items() if value is not None}
        defaults = {name: getattr(settings, setting) for name, setting in FROM_SETTINGS.items()}
        tenant = given.get("tenant")
        tenant = tenant if isinstance(tenant, str) and tenant.strip() else None
        warnings = list(given.pop("warnings", ()))
        if "rerank" not in given:
            defaults["rerank"], warning = default_rerank(settings, tenant)
            if warning:
                warnings.append(warning)
                defaults["rerank_unavailable"] = True
        if given.get("rerank", defaults.get("rerank")) is True and tenant is not None:
            learned = choose_reranker(settings, tenant)
            warnings += learned_defaults(learned, given, defaults)
        if warnings:
            defaults["warnings"] = tuple(warnings)
        return cls(question=question, **(defaults | given))

    def __post_init__(self) -> None:
        if self.filters is None:
            object.__setattr__(self, "filters", SearchFilters())
        object.__setattr__(self, "history", check_history(self.history))
        object.__setattr__(self, "warnings", tuple(str(warning) for warning in self.warnings))
        self._check_text()
        self._check_numbers()
        self._check_options()
        self.filters.template_params()  # the dates and decay scale are checked here

    def _check_text(self) -> None:
        for name in ("question", "tenant"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise ConfigError(
                    f"{name} must be a string, got {type(value).__name__} {_shown(value)}"
                )
            require_unicode(name, value)
        for name, value in (("filters.tags", self.filters.tags), ("history", self.history)):
            if first_surrogate(value) is not None:
                raise ConfigError(f"{name} holds text that is not valid UTF-8 (a lone surrogate)")
        if not self.question.strip():
            raise ConfigError("question is empty; give the text to search for")
        if not self.tenant.strip():
            raise ConfigError(
                "tenant is required: every search is scoped to one tenant (--tenant, or the "
                "tenant setting)"
            )
        if problem := tenant_problem(self.tenant):  # padded: no push files chunks under it
            raise ConfigError(f"tenant {_shown(self.tenant)} {problem}")
        if not isinstance(self.client_id, str) or not re.fullmatch(
            CLIENT_ID_PATTERN, self.client_id
        ):
            raise ConfigError(
                f"client_id {_shown(self.client_id)}: at most {MAX_CLIENT_ID_CHARS} visible "
                "ASCII characters, no spaces (a session name, e.g. a UUID)"
            )
        if self.mode not in SEARCH_MODES:
            raise ConfigError(f"mode {self.mode!r} is not one of {', '.join(SEARCH_MODES)}")

    def _check_numbers(self) -> None:
        for name in ("k", "candidates"):
            check_depth(name, getattr(self, name))

    def _check_options(self) -> None:
        if self.expand not in (None, *EXPANSIONS):
            raise ConfigError(
                f"expand must be one of {', '.join(EXPANSIONS)} or none, got {self.expand!r}"
            )
        flags = ("merge_adjacent", "prompt_order", "exact_match", "one_per_document")
        for name in ("rerank", *flags, "rerank_unavailable"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise ConfigError(f"{name} must be true or false, got {_shown(value)}")
        if not isinstance(self.filters, SearchFilters):
            raise ConfigError(f"filters must be a SearchFilters, got {type(self.filters).__name__}")

    def template_params(
        self,
        query_text: str | None = None,
        query_vector: Sequence[float] | None = None,
        second_query_vector: Sequence[float] | None = None,
    ) -> dict[str, Any]:
        """The stored templates' parameters for one searched query of this request
        (``loader.index.search_params.search_template_params``): the tenant, ``depth`` as
        ``size`` and ``k``, the filters, ``one_per_document`` as ``collapse_doc``, and the
        query's text, its identifiers (``exact_terms``) and its vector (each reader's).

        Example::

            request.template_params(bm25_text(query), vector)   # what search() sends
        """
        return search_template_params(
            self.tenant,
            query_text=query_text,
            query_vector=query_vector,
            second_query_vector=second_query_vector,
            exact_terms=self.exact_terms(query_text) if query_text is not None else (),
            depth=self.depth,
            filters=self.filters.template_params(),
            collapse_doc=self.one_per_document,
        )

    def exact_terms(self, query: str) -> list[str]:
        """The ``exact_terms`` parameter of one searched query: its identifiers
        (``loader.query.identifiers.exact_terms``), none without ``exact_match``."""
        return list(exact_terms(query)) if self.exact_match else []

    @property
    def searched(self) -> str:
        """The question as it is searched: stripped and cut to ``MAX_QUESTION_CHARS``."""
        return truncate_question(self.question.strip())

    @property
    def truncated(self) -> bool:
        """Whether the question is longer than ``MAX_QUESTION_CHARS`` and is cut."""
        return self.searched != self.question.strip()

    @property
    def depth(self) -> int:
        """Chunks retrieved per query: ``candidates``, and at least ``k``."""
        return max(self.candidates, self.k)

    def replace(self, **changes: Any) -> SearchRequest:
        """A copy with ``changes``, checked again."""
        return dataclasses.replace(self, **changes)
