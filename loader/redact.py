"""Secrets are never printed: credentials are cut out of URLs robustly, and masked in text.

``split_url`` is the one URL parser (it never raises): credentials are everything between
``scheme://`` and the last ``@``, so a password may hold any character. ``parse_url`` adds the
checks a connection needs; ``redact_url`` and ``scrub_secrets`` mask what must not be shown.

Example::

    redact_url("https://admin:s3/cr#t@search.example.com")  # 'https://admin:****@search...'
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from urllib.parse import quote, quote_plus, unquote

from loader.errors import ConfigError
from loader.terminal import printable


def redact_url(url: str) -> str:
    """``url`` with its credentials masked: safe to print or log, even when malformed.

    The password is replaced by ``****`` (a user name before it is kept); a user-info part with no
    ``:`` may be a token and is masked whole. What counts as credentials is decided by
    ``split_url``, so a password with ``/``, ``#``, ``?`` or ``@`` in it is masked whole too.

    Example::

        redact_url("https://admin:s3/cr#t@search.example.com")  # 'https://admin:****@search...'
        redact_url("admin:s3cret@host")                          # 'admin:****@host' (no scheme)
    """
    return split_url(url).redacted()


_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
# A host is a name or IPv4 address (letters, digits, '.', '-', '_'), or an IPv6 address in [].
_HOST = re.compile(r"[\w.-]+|\[[0-9A-Fa-f:.]+(?:%25[\w.~-]+)?\]")
# Where a secret is split into the pieces that must not appear on their own either: reserved
# characters, spaces, and every character an echo may escape (control characters, quotes,
# backslashes), so that a piece reads the same in each form ``_echoed_forms`` lists.
_SECRET_SEPARATORS = re.compile(r"[\s\x00-\x1f\x7f-\x9f:/?#\[\]@!$&'()*+,;=%\"<>\\^`{|}]+")
MASK = "****"


@dataclass(frozen=True)
class UrlParts:
    """A URL cut by ``split_url``: ``scheme://[userinfo@]host[:port]rest``, nothing validated.

    ``userinfo`` is kept as written (still percent-encoded); ``username`` and ``password`` are the
    decoded credentials.
    """

    scheme: str  # lower case; '' when the URL has no 'scheme://'
    userinfo: str | None  # None when the URL has no '@'
    host: str
    port: str | None  # the text after 'host:' (None when there is no ':'), not yet checked
    rest: str  # path, query and fragment: from the first '/', '?' or '#' after the host

    @property
    def username(self) -> str | None:
        if self.userinfo is None:
            return None
        return unquote(self.userinfo.partition(":")[0])

    @property
    def password(self) -> str | None:
        if self.userinfo is None or ":" not in self.userinfo:
            return None
        return unquote(self.userinfo.partition(":")[2])

    @property
    def path(self) -> str:
        return re.split(r"[?#]", self.rest, maxsplit=1)[0]

    def _hostport(self) -> str:
        return self.host if self.port is None else f"{self.host}:{self.port}"

    def _scheme_prefix(self) -> str:
        return f"{self.scheme}://" if self.scheme else ""

    def redacted(self) -> str:
        """The URL as written, with the password (or a bare user-info token) masked."""
        if self.userinfo is None:
            credentials = ""
        elif ":" in self.userinfo:
            credentials = f"{self.userinfo.partition(':')[0]}:{MASK}@"
        else:
            credentials = f"{MASK}@"
        return f"{self._scheme_prefix()}{credentials}{self._hostport()}{self.rest}"

    def without_credentials(self) -> str:
        """``scheme://host[:port]/path``: no user info, query or fragment; no trailing '/'."""
        return f"{self._scheme_prefix()}{self._hostport()}{self.path}".rstrip("/")


def split_url(url: str) -> UrlParts:
    """Cut ``url`` into scheme, user info, host, port and the rest. Never raises.

    The one URL parser of the package: ``redact_url``, ``cluster.safe_url`` and
    ``cluster.connect`` all go through it (``parse_url`` adds the checks).

    The rule: a host never contains ``@``, so the user info is everything between ``scheme://``
    and the **last** ``@`` of the URL. A password may therefore hold any character (``/ # ? @ :
    %`` and spaces included), raw or percent-encoded. The price: an ``@`` in the path, query or
    fragment must be written ``%40``; otherwise everything before it is taken as credentials, which
    fails safe (it is masked, never printed). The user name ends at the first ``:`` of the user
    info (write a ``:`` in a user name as ``%3A``); both are percent-decoded, so a literal ``%``
    followed by two hex digits must be written ``%25``. The host ends at the first ``/``, ``?`` or
    ``#`` after that ``@``; a port follows the host's last ``:`` (after the ``]`` of an IPv6
    address).

    Example::

        parts = split_url("https://admin:p%2Fss/w#rd@search.example.com:9200/prefix")
        parts.password   # 'p/ss/w#rd'
        parts.host, parts.port, parts.rest   # ('search.example.com', '9200', '/prefix')
    """
    match = _SCHEME.match(url)
    scheme = match.group(1).lower() if match else ""
    remainder = url[match.end() :] if match else url
    userinfo, at, after = remainder.rpartition("@")
    if not at:
        userinfo, after = None, remainder
    end = re.search(r"[/?#]", after)
    hostport, rest = (after[: end.start()], after[end.start() :]) if end else (after, "")
    if hostport.startswith("["):  # IPv6: the port follows the closing bracket
        close = hostport.find("]") + 1 or len(hostport)
        host, tail = hostport[:close], hostport[close:]
        port = tail[1:] if tail.startswith(":") else (tail or None)
    else:
        host, colon, port_text = hostport.partition(":")
        port = port_text if colon else None
    return UrlParts(scheme=scheme, userinfo=userinfo, host=host, port=port, rest=rest)


def parse_url(url: str, name: str = "opensearch_url") -> UrlParts:
    """``split_url`` plus the checks a cluster URL must pass.

    Raises:
        ConfigError: one line naming the setting ``name``, its redacted value, what is wrong and
            the fix: no scheme, a scheme other than http or https, no host, a host with a space
            or another character no host has, a port that is not a number from 1 to 65535.
    """
    parts = split_url(url)
    problem = None
    if not parts.scheme:
        problem = "no scheme"
    elif parts.scheme not in ("http", "https"):
        problem = f"scheme {parts.scheme!r}"
    elif not parts.host:
        problem = "no host"
    elif not _HOST.fullmatch(parts.host):
        problem = f"invalid host {parts.host!r}"
    elif parts.port is not None and not (
        parts.port.isascii() and parts.port.isdigit() and 0 < int(parts.port) <= 65535
    ):
        problem = f"invalid port {parts.port!r}: not a number from 1 to 65535"
    if problem:
        raise ConfigError(
            f"{name} {parts.redacted()!r} is not an http(s) URL ({problem}); "
            "set OPENSEARCH_URL, e.g. http://127.0.0.1:9200"
        )
    return parts


def scrub_secrets(text: str, secrets: list[str], pieces: bool = True) -> str:
    """``text`` with each secret in every form an echo may take (``_echoed_forms``: raw,
    percent-encoded, JSON- and Python-escaped, HTML-escaped, escaped for the terminal) replaced by
    ``****``; with ``pieces``, also each piece of it of three or more characters (split at
    URL-reserved characters, spaces, quotes, backslashes and control characters), in each form,
    and each run of three or more ASCII letters, digits and ``._~-`` in it.

    For text the package did not write itself (an unexpected exception, a library's log line, a
    server's answer): the package's own messages are built from ``redact_url`` and never hold a
    secret.

    Example::

        scrub_secrets('{"reason": "bad pass\\u001bword"}', ["pass\\x1bword"])
        # '{"reason": "bad ****"}'
    """
    masked: set[str] = set()
    for secret in secrets:
        masked.update(_echoed_forms(secret))
        if pieces:
            for piece in _SECRET_SEPARATORS.split(secret):
                if len(piece) >= 3:
                    masked.update(_echoed_forms(piece))
            # Its ASCII runs read the same however often the text around them was escaped (a
            # JSON body quoting a JSON-escaped echo: 'pass\\u00e9'), or a piece of it cut.
            masked.update(re.findall(r"[A-Za-z0-9._~-]{3,}", secret))
    for piece in sorted((p for p in masked if p), key=len, reverse=True):
        text = text.replace(piece, MASK)
    return text


def _echoed_forms(secret: str) -> set[str]:
    """``secret`` as a server, a proxy or a library may echo it back: as it is; percent-encoded
    (a URL, a form); JSON-escaped with and without ``ensure_ascii`` (an answer's text, the body
    opensearch-py logs at debug level); escaped as Python's ``repr`` writes it, with and without
    its quotes escaped (an exception's text, a traceback); escaped as ``printable`` writes it (the
    line a terminal shows); HTML-escaped (a proxy's error page)."""
    python = repr(secret)[1:-1]
    return {
        secret,
        quote(secret, safe=""),
        quote(secret),
        quote_plus(secret),
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        python,
        python.replace("\\'", "'"),
        python.replace('"', '\\"'),
        secret.encode("unicode_escape").decode("ascii"),
        printable(secret),
        html.escape(secret),
        html.escape(secret, quote=False),
    }
