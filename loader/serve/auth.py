"""API keys bound to tenants, for ``loader serve``: the key file, the constant-time lookup, the
key headers, and the middleware that answers 401 before anything else runs; and the judging
page's signed sessions (``Sessions``), whose key is kept beside the key file (``session_key``).

The file is TOML, one ``"<key>" = "<tenant>"`` line per key under a ``[keys]`` table::

    # api-keys.toml (chmod 600): keys of 16 to 4096 printable ASCII characters, no spaces
    [keys]
    "3q2-kZ1u0pY8Vh2m6Zq5WcJr9bqQ0c7F" = "acme"
    "Qm1x9pL0aT4eR7uY2iO5wS8dF3gH6jKl" = "globex"   # a tenant may have several keys
    "Zr8wq2Lm5Xc0Vb7Nn4Jk1Hg6Fd3Sa9Po" = { tenant = "acme", name = "alice" }

A key's ``name`` says who holds it: the judging page stores it with every grade given with that
key (two raters of one tenant grade the same results, each grade kept). A key given as a bare
tenant is named ``key <n>``, its position in the file.

Keys are kept only as SHA-256 digests and a presented key is compared with every one of them by
``hmac.compare_digest`` (constant time, no early exit); no key is ever logged or echoed.

Example::

    keys = ApiKeys.from_file("api-keys.toml")
    app.middleware("http")(require_api_key(keys))   # request.state.tenant: the key's tenant
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import stat
import time
import tomllib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from loader.errors import ConfigError
from loader.settings import tenant_problem
from loader.userfile import read_user_text

log = logging.getLogger(__name__)

MAX_TENANT_CHARS = 256
# API keys: long enough not to be guessed, and safe in an HTTP header.
MIN_KEY_CHARS = 16
MAX_KEY_CHARS = 4096
_KEY_CHARACTERS = re.compile(r"^[\x21-\x7e]+$")
MAX_NAME_CHARS = 64  # of a key's name (a rater's, on the judging page)
_TOML_LOCATION = re.compile(r"\((at line \d+, column \d+|at end of document)\)")
# Requests that need no key.
PUBLIC_ROUTES = frozenset({("GET", "/health"), ("HEAD", "/health")})
# The judging page signs in with a key and checks its own session cookie (loader.serve.judge_page).
JUDGE_PREFIX = "/judge"


class ApiKeys:
    """API keys bound to tenants, kept as SHA-256 digests and looked up in constant time.

    Example::

        keys = ApiKeys.from_file("api-keys.toml")
        keys.tenant_for(presented)      # 'acme', or None for an unknown key

    Raises (``from_file``, ``parse``):
        ConfigError: the file cannot be read, is not TOML, or holds no valid ``[keys]`` table;
            the message names the file and the entry's position, never a key.
    """

    def __init__(self, entries: list[tuple[str, ...]], source: str = "api keys") -> None:
        """``entries``: ``(key, tenant)`` or ``(key, tenant, name)``; unnamed, ``key <n>``."""
        self.source = source
        self._entries = tuple(
            (_digest(key), tenant, rest[0] if rest else f"key {number}")
            for number, (key, tenant, *rest) in enumerate(entries, start=1)
        )

    @classmethod
    def from_file(cls, path: str | Path) -> ApiKeys:
        """The keys of a TOML file with a ``[keys]`` table of ``"<key>" = "<tenant>"``."""
        file = Path(path).expanduser()
        name = f"api_keys_file {str(path)!r}"
        try:
            text = read_user_text(file, "api_keys_file")
        except ConfigError as exc:
            raise ConfigError(
                f"{exc}; point api_keys_file (LOADER_API_KEYS_FILE) at a TOML file with a "
                "[keys] table"
            ) from None
        if file.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            log.warning("%s can be read by other users; chmod 600 it", name)
        return cls.parse(text, source=name)

    @classmethod
    def parse(cls, text: str, source: str = "api keys") -> ApiKeys:
        """The keys of a TOML text (see ``from_file``); ``source`` names it in messages."""
        hint = 'expected a [keys] table of "<key>" = "<tenant>" lines'
        try:
            data = tomllib.loads(text)
        except ValueError as exc:  # TOMLDecodeError, or a number past the int conversion limit
            # tomllib's messages can quote table names, which might be keys: only the position.
            where = _TOML_LOCATION.search(str(exc))
            raise ConfigError(
                f"{source} is not valid TOML ({where.group(1) if where else 'syntax error'}); "
                f"{hint}"
            ) from None
        keys = data.get("keys")
        if set(data) - {"keys"}:
            # Not named: a key written above the [keys] line would be printed.
            raise ConfigError(f"{source} has entries outside the [keys] table; {hint}")
        if not isinstance(keys, dict) or not keys:
            raise ConfigError(f"{source} holds no keys; {hint}")
        entries = []
        for number, (key, value) in enumerate(keys.items(), start=1):
            tenant, name = _tenant_and_name(value, number, source)
            if not isinstance(tenant, str) or not tenant.strip():
                raise ConfigError(
                    f"{source}: the tenant of key number {number} is not a non-empty string"
                )
            if problem := tenant_problem(tenant):  # padded: every search with it is refused
                raise ConfigError(f"{source}: the tenant of key number {number} {problem}")
            if len(tenant) > MAX_TENANT_CHARS:
                raise ConfigError(
                    f"{source}: the tenant of key number {number} is longer than "
                    f"{MAX_TENANT_CHARS} characters"
                )
            if not MIN_KEY_CHARS <= len(key) <= MAX_KEY_CHARS or not _KEY_CHARACTERS.match(key):
                raise ConfigError(
                    f"{source}: key number {number} (tenant {tenant!r}) is not {MIN_KEY_CHARS} to "
                    f"{MAX_KEY_CHARS} printable ASCII characters without spaces; make one with "
                    "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
                )
            entries.append((key, tenant, name))
        return cls(entries, source=source)

    def holder_for(self, key: str | None) -> tuple[str, str] | None:
        """The tenant and name of ``key``, or ``None``. Every stored digest is compared, match
        or not."""
        if not key:
            return None
        presented = _digest(key)
        found = None
        for digest, tenant, name in self._entries:
            if hmac.compare_digest(presented, digest):
                found = (tenant, name)
        return found

    def tenant_for(self, key: str | None) -> str | None:
        """The tenant of ``key``, or ``None``."""
        holder = self.holder_for(key)
        return holder[0] if holder else None

    @property
    def tenants(self) -> list[str]:
        """The tenants that have a key, sorted."""
        return sorted({tenant for _, tenant, _ in self._entries})

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"ApiKeys({len(self)} keys for {len(self.tenants)} tenants, {self.source})"


def _tenant_and_name(value: object, number: int, source: str) -> tuple[object, str]:
    """A ``[keys]`` entry's tenant and name: ``"<tenant>"``, or ``{tenant = ..., name = ...}``.

    Raises:
        ConfigError: a table with other fields, or a name that is no short printable text.
    """
    if not isinstance(value, dict):
        return value, f"key {number}"
    if set(value) - {"tenant", "name"}:
        raise ConfigError(f"{source}: key number {number} has fields other than tenant and name")
    name = value.get("name", f"key {number}")
    if (
        not isinstance(name, str)
        or not name.strip()
        or len(name) > MAX_NAME_CHARS
        or not name.isprintable()
    ):
        raise ConfigError(
            f"{source}: the name of key number {number} is not 1 to {MAX_NAME_CHARS} printable "
            "characters"
        )
    return value.get("tenant"), name


SESSION_KEY_SUFFIX = ".session-key"
SESSION_SECONDS = 12 * 3600  # how long a judging session lasts
SESSION_KEY_BYTES = 32


def session_key_file(api_keys_file: str | Path) -> Path:
    """Where the judging page's signing key lives: beside the API key file, named after it."""
    file = Path(api_keys_file).expanduser()
    return file.with_name(file.name + SESSION_KEY_SUFFIX)


def session_key(api_keys_file: str | Path) -> bytes | None:
    """The key that signs the judging page's session cookies, kept in ``session_key_file``
    so that a restart of ``loader serve`` signs no one out: read, or made once (32 random bytes,
    hex, created owner-only and atomically: a server starting beside this one reads the same).
    ``None`` (a warning says so) when the folder takes no new file: the server then signs with
    a key of its own process, and a restart signs everyone out.

    Raises:
        ConfigError: the file is not a regular file, can be read by the group or others, or is
            not the key this function writes; the message names it and the fix, never the key.
    """
    path = session_key_file(api_keys_file)
    with contextlib.suppress(FileNotFoundError):
        return _read_session_key(path)
    try:
        _create_session_key(path)
    except OSError as exc:
        log.warning(
            "cannot keep the judging page's session key in %r (%s): a restart of loader serve "
            "signs every judge out",
            str(path),
            exc.strerror or exc,
        )
        return None
    return _read_session_key(path)


def _read_session_key(path: Path) -> bytes:
    name = f"the judging page's session key {str(path)!r}"
    fix = "delete it and restart loader serve to make a new one (everyone signs in again)"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise  # session_key makes it
    except OSError as exc:  # a symbolic link (ELOOP), no permission
        raise ConfigError(f"{name} cannot be read ({exc.strerror or exc}); {fix}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"{name} is not a regular file; {fix}")
        if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ConfigError(
                f"{name} can be read or written by other users (mode "
                f"{stat.S_IMODE(info.st_mode):03o}); chmod 600 it, or {fix}"
            )
        text = os.read(fd, 4 * SESSION_KEY_BYTES).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    if not re.fullmatch(f"[0-9a-f]{{{2 * SESSION_KEY_BYTES}}}", text):
        raise ConfigError(f"{name} does not hold a key of {SESSION_KEY_BYTES} hex bytes; {fix}")
    return bytes.fromhex(text)


def _create_session_key(path: Path) -> None:
    """Write a new key to a private temporary file, then link it into place: the key file is
    whole and owner-only from its first moment, and of two servers starting at once the second
    finds the first's file (and reads it)."""
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        try:
            os.write(fd, (secrets.token_hex(SESSION_KEY_BYTES) + "\n").encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        with contextlib.suppress(FileExistsError):
            os.link(temporary, path)
    finally:
        os.unlink(temporary)


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


def presented_key(headers: Any) -> tuple[str | None, str | None]:
    """``(key, None)`` from ``Authorization: Bearer <key>`` or ``X-API-Key``, else
    ``(None, reason)`` with why none was taken (the reason never quotes the header)."""
    authorization = headers.get("authorization")
    header_key = headers.get("x-api-key")
    bearer = None
    if authorization is not None:
        scheme, _, value = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            return None, "the Authorization header must be 'Bearer <key>'"
        bearer = value.strip()
    if bearer is not None and header_key is not None and header_key.strip() != bearer:
        return None, "send one API key: Authorization and X-API-Key disagree"
    key = bearer if bearer is not None else (header_key or "").strip()
    if not key:
        return None, "an API key is required: send Authorization: Bearer <key> (or X-API-Key)"
    return key, None


Middleware = Callable[[Any, Callable[[Any], Awaitable[Any]]], Awaitable[Any]]


def require_api_key(api_keys: ApiKeys) -> Middleware:
    """An HTTP middleware that answers 401 to every request but ``PUBLIC_ROUTES`` without a known
    key, and otherwise sets ``request.state.tenant`` to the key's tenant.

    Add it last (``app.middleware("http")(require_api_key(keys))``), so that it runs first.
    """
    from fastapi.responses import JSONResponse

    async def check_api_key(request: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        path = request.url.path
        if (
            (request.method, path) in PUBLIC_ROUTES
            or path == JUDGE_PREFIX
            or path.startswith(f"{JUDGE_PREFIX}/")
        ):
            return await call_next(request)
        key, reason = presented_key(request.headers)
        tenant = api_keys.tenant_for(key)
        if tenant is None:
            return JSONResponse(
                status_code=401,
                content={"error": reason or "unknown API key"},
                headers={"WWW-Authenticate": 'Bearer realm="loader"'},
            )
        request.state.tenant = tenant
        return await call_next(request)

    return check_api_key


class Sessions:
    """Signed session cookies (``v2.<[tenant, rater] JSON, b64>.<expiry>.<hmac>``; a cookie of
    the older ``<tenant b64>.<expiry>.<hmac>`` is read as the tenant's, no rater) and their
    CSRF tokens, signed
    with ``secret`` (with API keys, ``session_key``: kept across restarts);
    without one, a key of this process, so a restart signs everyone out."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret or secrets.token_bytes(32)

    def _sign(self, text: str) -> str:
        return hmac.new(self._secret, text.encode(), hashlib.sha256).hexdigest()

    def issue(self, tenant: str, now: float | None = None, rater: str = "") -> str:
        expiry = int((now or time.time()) + SESSION_SECONDS)
        holder = json.dumps([tenant, rater]).encode()
        encoded = base64.urlsafe_b64encode(holder).decode().rstrip("=")  # no quoting
        payload = f"v2.{encoded}.{expiry}"
        return f"{payload}.{self._sign(payload)}"

    def holder(self, cookie: str | None, now: float | None = None) -> tuple[str, str] | None:
        """The tenant and rater of a valid, unexpired cookie, else ``None``."""
        if not cookie or cookie.count(".") not in (2, 3):
            return None
        *payload, expiry, signature = cookie.split(".")
        if not same_text(self._sign(".".join([*payload, expiry])), signature):
            return None
        if not expiry.isdigit() or int(expiry) < (now or time.time()):
            return None
        if len(payload) == 2 and payload[0] != "v2":
            return None
        encoded = payload[-1]
        text = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
        if len(payload) == 1:  # issued before raters: the tenant's, no rater
            return text, ""
        tenant, rater = json.loads(text)
        return tenant, rater

    def tenant(self, cookie: str | None, now: float | None = None) -> str | None:
        """The tenant of a valid, unexpired cookie, else ``None``."""
        holder = self.holder(cookie, now)
        return holder[0] if holder else None

    def csrf(self, cookie: str) -> str:
        return self._sign(f"csrf|{cookie}")


def same_text(expected: str, presented: str) -> bool:
    """A constant-time comparison of a signature with what a client sent. On bytes: a header
    arrives as Latin-1 text, and ``hmac.compare_digest`` raises ``TypeError`` on non-ASCII
    strings (a forged cookie of ``é`` was a 500)."""
    return hmac.compare_digest(expected.encode(), presented.encode("utf-8", "surrogatepass"))
