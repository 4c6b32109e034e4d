"""The OpenSearch client, and the translation of its errors into ``LoaderError`` classes.

Every module that talks to OpenSearch gets its client from ``connect`` and wraps calls in
``cluster_errors`` so the user sees one line that names the cluster and the fix, never a traceback.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import opensearchpy
from opensearchpy import OpenSearch, Transport

from loader.errors import AuthenticationError, ClusterError, ClusterUnavailableError, ConfigError
from loader.redact import parse_url, scrub_secrets, split_url
from loader.settings import Settings, secret_values

if TYPE_CHECKING:  # needs aiohttp, which only the framework extras install
    from opensearchpy import AsyncOpenSearch

log = logging.getLogger(__name__)

_TAGS = re.compile(r"<[^>]*>")


def safe_url(url: str) -> str:
    """``scheme://host[:port]/path`` of ``url``, with no credentials, query or fragment: for
    messages. Never raises, even for a malformed URL (see ``loader.redact.split_url`` for how
    the credentials are told from the host).

    Example::

        safe_url("https://admin:p/ss#w@search.example.com:9200/")  # 'https://search...com:9200'
    """
    return split_url(url).without_credentials()


class JsonTransport(Transport):
    """opensearch-py's transport, refusing an answer that is not the JSON OpenSearch sends.

    opensearch-py deserializes a ``text/plain`` answer (a proxy's or web server's page) to a
    ``str``, and an empty one to ``""``; every caller then fails on it with an ``AttributeError``
    far from the request. OpenSearch answers every API with a JSON object, and ``_cat`` (with
    ``format=json``) with an array: anything else is a ``SerializationError`` here, which
    ``cluster_errors`` turns into the ``ClusterError`` of an answer that is not OpenSearch's JSON.
    """

    def perform_request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        return json_answer(method, url, super().perform_request(method, url, *args, **kwargs))


def json_answer(method: str, url: str, answer: Any) -> Any:
    """``answer`` if it is what OpenSearch answers ``method url`` with (see ``JsonTransport``).

    Raises:
        opensearchpy.SerializationError: an answer of another type.
    """
    if method == "HEAD":  # a bool: whether the object exists
        return answer
    if url.startswith("/_cat/"):
        expected, what = (dict, list), "a JSON object or array"
    else:
        expected, what = dict, "a JSON object"
    if not isinstance(answer, expected):
        raise opensearchpy.SerializationError(
            f"{method} {url} was answered with a {type(answer).__name__}, not {what}"
        )
    return answer


def connect(settings: Settings, *, connections: int = 10) -> OpenSearch:
    """A client for the configured cluster. TLS certificates are verified unless
    ``insecure_skip_tls_verify`` is set by name. ``connections``: how many requests may be in
    flight at once without opening a connection each time (urllib3's pool size; serve's
    worker threads all share one client).

    Credentials come from ``opensearch_user`` / ``opensearch_password`` when set, else from the
    URL's user info (percent-decoded); the client is given the URL without them.

    Raises:
        ConfigError: ``opensearch_url`` is malformed (one line, its password masked),
            ``ca_certs`` is not a file, or the credentials are not Latin-1 (never shown).
    """
    options = _client_options(settings)
    return OpenSearch(**options, pool_maxsize=connections, transport_class=JsonTransport)


def connect_async(settings: Settings, *, connections: int = 10) -> AsyncOpenSearch:
    """``connect``'s client on asyncio: opensearch-py's ``AsyncOpenSearch``, the same URL,
    credentials, TLS checks and timeout, and the same refusal of an answer that is not JSON.

    Its connections (aiohttp's) belong to the event loop of its first request: make one per
    loop and ``await client.close()`` when done with it.

    Raises:
        ConfigError: as ``connect``; or opensearch-py's async support is not installed (it needs
            aiohttp: ``pip install 'opensearch-py[async]'``, which the framework extras of
            ``loader`` bring).
    """
    try:
        from opensearchpy import AsyncOpenSearch, AsyncTransport
    except ImportError as exc:  # opensearch-py leaves them out without aiohttp
        raise ConfigError(
            "searching with asyncio needs opensearch-py's async client: pip install "
            "'opensearch-py[async]' (or one of loader's extras langchain, llamaindex, "
            f"haystack) ({exc})"
        ) from None

    class AsyncJsonTransport(AsyncTransport):
        async def perform_request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            answer = await super().perform_request(method, url, *args, **kwargs)
            return json_answer(method, url, answer)

    options = _client_options(settings)
    return AsyncOpenSearch(**options, maxsize=connections, transport_class=AsyncJsonTransport)


def _client_options(settings: Settings) -> dict[str, Any]:
    """The options ``connect`` and ``connect_async`` give their client (see ``connect``)."""
    parts = parse_url(settings.opensearch_url)
    if settings.ca_certs and not Path(settings.ca_certs).is_file():
        # Checked here: the client would only fail at the first request, with a vaguer reason.
        raise ConfigError(
            f"ca_certs {settings.ca_certs!r} is not a file; point it at the PEM file of the "
            "CA that signed the cluster's certificate"
        )
    kwargs: dict = {
        "hosts": [parts.without_credentials()],
        "timeout": settings.request_timeout,
        "max_retries": 0,
        "retry_on_timeout": False,
    }
    user = settings.opensearch_user or parts.username
    password = settings.opensearch_password or parts.password
    if user:
        try:
            # What urllib3 encodes the Basic header in: it would fail at the first request, with
            # a message showing the character and where it sits in the password.
            f"{user}:{password or ''}".encode("latin-1")
        except UnicodeEncodeError:
            raise ConfigError(
                "the OpenSearch user or password holds a character HTTP Basic authentication "
                "cannot carry (only Latin-1 letters); choose credentials without it"
            ) from None
        kwargs["http_auth"] = (user, password or "")
    if parts.scheme == "https":
        kwargs["use_ssl"] = True
        kwargs["verify_certs"] = not settings.insecure_skip_tls_verify
        kwargs["ssl_show_warn"] = False
        if settings.ca_certs:
            kwargs["ca_certs"] = settings.ca_certs
    return kwargs


# Seconds the first request waits for the cluster's banner (at most request_timeout): a node
# answers GET / in milliseconds, and a user waiting on a wrong URL learns it soon.
PROBE_TIMEOUT = 5.0


def require_cluster(client: OpenSearch, settings: Settings) -> tuple[int, int] | None:
    """Make sure the cluster answers, and as OpenSearch does, before any slow work: a command
    that loads a model first would make a user wait for it, then report a model error, when the
    thing to fix is the URL or the cluster.

    Returns:
        The cluster's (major, minor), as ``cluster_version`` reads it from the same answer.

    Raises:
        ClusterUnavailableError: nothing answers (exit code 3; the URL named, credentials
            removed: "is OpenSearch running?").
        AuthenticationError: the credentials are refused (401, exit code 4); a 403 (a user
            allowed to search but not to read the banner) is an answer, not an error.
        ClusterError: something else answers (a web server's page, JSON without a version).
    """
    timeout = min(settings.request_timeout, PROBE_TIMEOUT)
    try:
        with cluster_errors(settings, CLUSTER_CHECK):
            answer = client.info(request_timeout=timeout)
    except AuthenticationError as exc:
        if _may_search(exc):
            return None
        raise
    _require_banner(answer, settings.opensearch_url)
    return version_of(answer)


def cluster_version(client: OpenSearch, settings: Settings) -> tuple[int, int] | None:
    """The cluster's (major, minor) from its banner; ``None`` when the banner cannot be read (a
    user allowed to search but not to GET /) or names no version.

    Raises:
        ClusterError: the cluster does not answer.
    """
    try:
        with cluster_errors(settings, "reading OpenSearch's version"):
            return version_of(client.info())
    except AuthenticationError:
        return None


def version_of(banner: Any) -> tuple[int, int] | None:
    """(major, minor) of a ``GET /`` answer's ``version.number``; ``None`` when it names none."""
    try:
        number = str(banner["version"]["number"])
    except (KeyError, TypeError):
        return None
    parts = number.split(".")
    if len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        return None
    return int(parts[0]), int(parts[1])


async def require_cluster_async(client: AsyncOpenSearch, settings: Settings) -> None:
    """``require_cluster`` with the async client (``connect_async``); the same errors."""
    timeout = min(settings.request_timeout, PROBE_TIMEOUT)
    try:
        with cluster_errors(settings, CLUSTER_CHECK):
            answer = await client.info(request_timeout=timeout)
    except AuthenticationError as exc:
        if _may_search(exc):
            return
        raise
    _require_banner(answer, settings.opensearch_url)


CLUSTER_CHECK = "checking that OpenSearch answers"


def _may_search(exc: AuthenticationError) -> bool:
    """A 403: the security plugin knows the user, who may search without the right to GET /
    (cluster:monitor/main); the cluster answered, which is all the check asks."""
    return isinstance(exc.__cause__, opensearchpy.AuthorizationException)


def _require_banner(answer: dict[str, Any], opensearch_url: str) -> None:
    if not isinstance(answer.get("version"), dict):
        raise ClusterError(
            f"{safe_url(opensearch_url)} answered without a version, so it is not an "
            "OpenSearch cluster; check that OPENSEARCH_URL points at one",
            public_reason="OpenSearch's address answered something that is not OpenSearch",
        )


@contextlib.contextmanager
def cluster_errors(settings: Settings, doing: str) -> Iterator[None]:
    """Turn opensearch-py's exceptions raised while ``doing`` into ``ClusterError`` classes."""
    try:
        yield
    except (opensearchpy.TransportError, opensearchpy.SerializationError) as exc:
        raise translate_error(exc, settings, doing) from exc


def translate_error(exc: Exception, settings: Settings, doing: str) -> ClusterError:
    """The ``ClusterError`` for an opensearch-py exception: a message for the CLI that names the
    cluster (credentials removed) and the fix, and a public reason for HTTP clients."""
    where = safe_url(settings.opensearch_url)
    # The server's own text is masked before it is cut short: a page echoing the request's
    # Authorization header, cut in the middle of the token, would show part of it.
    secrets = secret_values(settings)
    if isinstance(exc, opensearchpy.AuthenticationException):
        return AuthenticationError(
            f"{where} rejected the credentials while {doing}; "
            "check OPENSEARCH_USER / OPENSEARCH_PASSWORD"
        )
    if isinstance(exc, opensearchpy.AuthorizationException):
        return AuthenticationError(
            f"{where} refused {doing}: the user lacks permission ({_reason(exc, secrets)})"
        )
    if isinstance(exc, opensearchpy.ConnectionError):
        return _connection_error(exc, settings.request_timeout, where, doing)
    if isinstance(exc, opensearchpy.SerializationError):
        # A 2xx answer that is not JSON: a web server or proxy page, not OpenSearch.
        return ClusterError(
            f"{where} answered something that is not OpenSearch's JSON while {doing}; "
            "check that OPENSEARCH_URL points at an OpenSearch cluster",
            public_reason="OpenSearch's address answered something that is not OpenSearch's "
            "JSON (a proxy's or web server's page); the server's log has the reason",
        )
    return _answer_error(exc, where, doing, secrets)


def _connection_error(
    exc: opensearchpy.ConnectionError, request_timeout: float, where: str, doing: str
) -> ClusterError:
    """No answer at all: a timeout, a failed TLS handshake, or no connection."""
    if isinstance(exc, opensearchpy.ConnectionTimeout):
        return ClusterUnavailableError(
            f"{where} did not answer within {request_timeout:g} s while {doing}; "
            "raise request_timeout or check the cluster's health",
            public_reason="OpenSearch did not answer in time; try again later",
        )
    if isinstance(exc, opensearchpy.SSLError):
        return ClusterUnavailableError(
            f"TLS handshake with {where} failed while {doing}: {exc.info!s:.200}; "
            "point ca_certs at the cluster's CA certificate",
            public_reason="cannot connect to OpenSearch; try again later",
        )
    return ClusterUnavailableError(
        f"cannot connect to {where} while {doing}; is OpenSearch running? "
        "(`loader up` starts a local one; OPENSEARCH_URL names another)",
        public_reason="cannot connect to OpenSearch; try again later",
    )


def _answer_error(
    exc: opensearchpy.TransportError, where: str, doing: str, secrets: list[str]
) -> ClusterError:
    """An error answer: OpenSearch's own (JSON), or a page from something else."""
    page = exc.error if exc.info is None else exc.info  # the raw body when not JSON
    if isinstance(page, str) and page.strip() and not isinstance(exc.info, dict):
        # OpenSearch explains every error in JSON; an HTML or text page comes from something
        # else (another web server, or a proxy that cannot reach the cluster).
        return ClusterError(
            f"{where} answered {exc.status_code} with a page that is not OpenSearch's JSON "
            f"({_page_text(page, secrets)}) while {doing}; check that OPENSEARCH_URL points at an "
            "OpenSearch cluster (or that the proxy in front of it can reach it)"
        )
    message = f"{where} answered {exc.status_code} while {doing}: {_reason(exc, secrets)}"
    if exc.status_code == 429:
        return ClusterUnavailableError(
            message, public_reason="OpenSearch is overloaded (429); try again later"
        )
    if exc.status_code == 404:
        return ClusterError(
            message,
            public_reason="the index or its search templates are missing on OpenSearch "
            "(loader apply)",
        )
    return ClusterError(
        message,
        public_reason=f"OpenSearch failed the request ({exc.status_code}); the server's log "
        "has the reason",
    )


def _page_text(page: object, secrets: list[str], limit: int = 80) -> str:
    """The first words of a non-JSON error page, tags removed, ``secrets`` masked."""
    text = scrub_secrets(" ".join(_TAGS.sub(" ", str(page)).split()), secrets)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _reason(exc: opensearchpy.TransportError, secrets: list[str]) -> str:
    """The server's own reason, kept rather than swallowed, ``secrets`` masked."""
    info = exc.info
    reason = str(exc.error)
    if isinstance(info, dict):
        error = info.get("error")
        if isinstance(error, dict):
            root = (error.get("root_cause") or [error])[0]
            reason = f"{root.get('type', '')}: {root.get('reason', '')}".strip(": ")
        elif error:
            reason = str(error)
    return scrub_secrets(reason, secrets)


def bad_request_reason(
    exc: opensearchpy.TransportError, settings: Settings, limit: int = 300
) -> str:
    """The reason of OpenSearch's 400, on one line: the root cause's type and reason, the
    settings' secrets masked before it is cut short (a cluster or proxy may echo the request's
    credentials in it, and ``loader serve`` shows it to HTTP clients)."""
    error = exc.info.get("error") if isinstance(exc.info, dict) else None
    if isinstance(error, dict):
        root = (error.get("root_cause") or [error])[0]
        reason = f"{root.get('type', '')}: {root.get('reason', '')}".strip(": ")
    else:
        reason = str(error or exc.error)
    reason = " ".join(scrub_secrets(reason, secret_values(settings)).split())
    return reason if len(reason) <= limit else reason[: limit - 3] + "..."
