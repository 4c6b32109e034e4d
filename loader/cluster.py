"""The OpenSearch client, and the translation of its errors into ``LoaderError`` classes.

Every module that talks to OpenSearch gets its client from ``connect`` and wraps calls in
``cluster_errors`` so the user sees one line that names the cluster and the fix, never a traceback.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from urllib.parse import urlsplit

import opensearchpy
from opensearchpy import OpenSearch

from loader.errors import AuthenticationError, ClusterError, ConfigError
from loader.settings import Settings

log = logging.getLogger(__name__)


def safe_url(url: str) -> str:
    """The URL without any user:password part, for messages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return f"{parts.scheme}://{host}{parts.path}".rstrip("/")


def connect(settings: Settings) -> OpenSearch:
    """A client for the configured cluster. TLS certificates are verified unless
    ``insecure_skip_tls_verify`` is set by name."""
    parts = urlsplit(settings.opensearch_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"opensearch_url {settings.opensearch_url!r} is not an http(s) URL; "
            "set OPENSEARCH_URL, e.g. http://127.0.0.1:9200"
        )
    kwargs: dict = {
        "hosts": [safe_url(settings.opensearch_url)],
        "timeout": settings.request_timeout,
        "max_retries": 0,
        "retry_on_timeout": False,
    }
    user = settings.opensearch_user or parts.username
    password = settings.opensearch_password or parts.password
    if user:
        kwargs["http_auth"] = (user, password or "")
    if parts.scheme == "https":
        kwargs["use_ssl"] = True
        kwargs["verify_certs"] = not settings.insecure_skip_tls_verify
        kwargs["ssl_show_warn"] = False
        if settings.ca_certs:
            kwargs["ca_certs"] = settings.ca_certs
    return OpenSearch(**kwargs)


@contextlib.contextmanager
def cluster_errors(settings: Settings, doing: str) -> Iterator[None]:
    """Turn opensearch-py's exceptions raised while ``doing`` into ``ClusterError`` classes."""
    where = safe_url(settings.opensearch_url)
    try:
        yield
    except opensearchpy.AuthenticationException as exc:
        raise AuthenticationError(
            f"{where} rejected the credentials while {doing}; "
            "check OPENSEARCH_USER / OPENSEARCH_PASSWORD"
        ) from exc
    except opensearchpy.AuthorizationException as exc:
        raise AuthenticationError(
            f"{where} refused {doing}: the user lacks permission ({_reason(exc)})"
        ) from exc
    except opensearchpy.ConnectionTimeout as exc:
        raise ClusterError(
            f"{where} did not answer within {settings.request_timeout:g} s while {doing}; "
            "raise request_timeout or check the cluster's health"
        ) from exc
    except opensearchpy.SSLError as exc:
        raise ClusterError(
            f"TLS handshake with {where} failed while {doing}: {exc.info!s:.200}; "
            "point ca_certs at the cluster's CA certificate"
        ) from exc
    except opensearchpy.ConnectionError as exc:
        raise ClusterError(
            f"cannot connect to {where} while {doing}; is OpenSearch running? "
            "(`loader up` starts a local one; OPENSEARCH_URL names another)"
        ) from exc
    except opensearchpy.TransportError as exc:
        raise ClusterError(
            f"{where} answered {exc.status_code} while {doing}: {_reason(exc)}"
        ) from exc


def _reason(exc: opensearchpy.TransportError) -> str:
    """The server's own reason, kept rather than swallowed."""
    info = exc.info
    if isinstance(info, dict):
        error = info.get("error")
        if isinstance(error, dict):
            root = (error.get("root_cause") or [error])[0]
            return f"{root.get('type', '')}: {root.get('reason', '')}".strip(": ")
        if error:
            return str(error)
    return str(exc.error)
