"""Secrets are never printed, whatever characters they hold.

A password in ``OPENSEARCH_URL`` may hold every URL-reserved character, raw or percent-encoded. It
is parsed by one function (``loader.redact.split_url``) and masked everywhere: ``redact_url``,
``safe_url``, ``Settings`` and its repr, ``loader settings`` (text and JSON), error messages and
log lines. Neither the password nor any piece of it (split at the reserved characters) may appear,
nor the base64 of ``user:password`` that an echoed ``Authorization: Basic`` header shows.
"""

from __future__ import annotations

import base64
import html
import json
import logging
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote, quote_plus

import pytest
from click.testing import CliRunner, Result

from loader.cli import cli
from loader.cluster.client import connect, safe_url
from loader.errors import ConfigError
from loader.redact import parse_url, redact_url, scrub_secrets, split_url
from loader.settings import Settings, secret_values
from loader.terminal import printable
from tests.hostile_upstream import PASSWORD as ECHO_PASSWORD
from tests.hostile_upstream import TERMINAL_SEQUENCE, EchoUpstream, assert_no_credential
from tests.hostile_upstream import TOKEN as ECHO_TOKEN
from tests.paths import REPO

RESERVED = ":/?#[]@!$&'()*+,;=% "
# Every reserved character and a space, each between distinctive pieces; '%zz' is not an escape,
# so the raw form decodes to itself.
PASSWORD = "Ab1:Cd2/Ef3?Gh4#Ij5[Kl6]Mn7@Op8!Qr9$St0&Uv1'Wx2(Yz3)Aq4*Bq5+Cq6,Dq7;Eq8=Fq9%zzq Gq0"
assert set(RESERVED) <= set(PASSWORD)
ENCODED = quote(PASSWORD, safe="")
OTHER_PASSWORD = "Zy9#separate/Xw8?env@Vu7"  # OPENSEARCH_PASSWORD, next to a URL password
USER = "admin"


def pieces(secret: str) -> list[str]:
    """The secret and every piece of it of three or more characters, split at reserved ones."""
    parts = re.split(r"[:/?#\[\]@!$&'()*+,;=%\s]+", secret)
    return [secret, *(part for part in parts if len(part) >= 3)]


def assert_secret_free(*texts: str, secrets: tuple[str, ...] = (PASSWORD, OTHER_PASSWORD)) -> None:
    for text in texts:
        for secret in secrets:
            for piece in {*pieces(secret), quote(secret, safe="")}:
                assert piece not in text, (piece, text)


def url_with(password: str, rest: str = "127.0.0.1:9200/prefix") -> str:
    return f"http://{USER}:{password}@{rest}"


def header_token(settings: Settings) -> str:
    """The base64 credentials of the Authorization header the client really sends."""
    header = connect(settings).transport.connection_pool.connection.headers["authorization"]
    assert header.startswith("Basic ")
    return header.removeprefix("Basic ")


def token_of(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


PASSWORD_FORMS = pytest.mark.parametrize("written", [PASSWORD, ENCODED], ids=["raw", "encoded"])


def test_the_pieces_are_many():
    assert len(pieces(PASSWORD)) == 22  # the whole and 21 pieces: the test checks something


@PASSWORD_FORMS
def test_split_url_finds_the_credentials_before_the_last_at(written):
    parts = split_url(url_with(written))
    assert (parts.scheme, parts.username, parts.password) == ("http", USER, PASSWORD)
    assert (parts.host, parts.port, parts.rest, parts.path) == (
        "127.0.0.1",
        "9200",
        "/prefix",
        "/prefix",
    )
    assert parse_url(url_with(written)) == parts


@PASSWORD_FORMS
def test_redact_url_and_safe_url_hide_every_piece(written):
    url = url_with(written)
    assert redact_url(url) == f"http://{USER}:****@127.0.0.1:9200/prefix"
    assert safe_url(url) == "http://127.0.0.1:9200/prefix"
    assert_secret_free(redact_url(url), safe_url(url))


@PASSWORD_FORMS
def test_connect_sends_the_decoded_password_and_a_url_without_it(written):
    client = connect(Settings(opensearch_url=url_with(written)))
    connection = client.transport.connection_pool.connection
    assert connection.host == "http://127.0.0.1:9200"
    assert connection.url_prefix == "/prefix"
    expected = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    assert connection.headers["authorization"] == f"Basic {expected}"
    assert client.transport.hosts == [{"host": "127.0.0.1", "port": 9200, "url_prefix": "/prefix"}]


def test_settings_password_wins_over_the_urls_and_is_sent_as_given():
    settings = Settings(opensearch_url=url_with(ENCODED), opensearch_password="raw%41 " + PASSWORD)
    connection = connect(settings).transport.connection_pool.connection
    expected = base64.b64encode(f"{USER}:raw%41 {PASSWORD}".encode()).decode()  # not decoded
    assert connection.headers["authorization"] == f"Basic {expected}"


@pytest.mark.parametrize(
    ("url", "user", "password", "host", "port", "rest"),
    [
        ("http://127.0.0.1:9200", None, None, "127.0.0.1", "9200", ""),
        ("https://search.example.com/", None, None, "search.example.com", None, "/"),
        ("http://u:p%40ss@h:1?x=1#f", "u", "p@ss", "h", "1", "?x=1#f"),
        ("http://u:p@ss@h", "u", "p@ss", "h", None, ""),  # a raw '@' in the password
        ("http://u%3Ax:p%25zz@h", "u:x", "p%zz", "h", None, ""),  # %3A, %25: literal ':' and '%'
        ("http://u:a/b@c/d", "u", "a/b", "c", None, "/d"),
        ("http://u:@h", "u", "", "h", None, ""),
        ("http://token@h", "token", None, "h", None, ""),
        ("http://u:p@[::1]:9200/x", "u", "p", "[::1]", "9200", "/x"),
        ("HTTPS://h", None, None, "h", None, ""),
    ],
)
def test_split_url_cases(url, user, password, host, port, rest):
    parts = split_url(url)
    assert (parts.username, parts.password, parts.host, parts.port, parts.rest) == (
        user,
        password,
        host,
        port,
        rest,
    )


def test_an_at_in_the_path_must_be_encoded_or_it_is_taken_as_credentials():
    """The documented rule fails safe: everything before the last '@' is masked."""
    assert split_url("http://h:9200/a%40b").host == "h"
    parts = split_url("http://h:9200/a@b")
    assert (parts.host, parts.userinfo) == ("b", "h:9200/a")
    assert redact_url("http://h:9200/a@b") == "http://h:****@b"


def test_a_user_info_without_a_colon_is_masked_whole():
    assert redact_url("https://sometoken@h:9200") == "https://****@h:9200"
    assert redact_url("http://u:@h") == "http://u:****@h"
    assert redact_url("http://h:9200/x") == "http://h:9200/x"


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        (f"{USER}:{PASSWORD}@127.0.0.1:9200", "no scheme"),
        ("127.0.0.1:9200", "no scheme"),
        ("not a url", "no scheme"),
        (f"ftp://{USER}:{PASSWORD}@127.0.0.1", "scheme 'ftp'"),
        (f"http://{USER}:{PASSWORD}@", "no host"),
        (f"https://{USER}:{ENCODED}@/x", "no host"),
        (f"http://{USER}:{PASSWORD}@127.0.0.1:99999", "invalid port '99999'"),
        (f"http://{USER}:{ENCODED}@127.0.0.1:abc", "invalid port 'abc'"),
        (f"http://{USER}:{PASSWORD}@127.0.0.1:0", "invalid port '0'"),
        (f"http://{USER}:{PASSWORD}@127.0.0.1:９２００", "invalid port '９２００'"),
        (f"http://{USER}:{PASSWORD}@my host:9200", "invalid host 'my host'"),
        (f"http://{USER}:{PASSWORD}@[::1:9200", "invalid host '[::1:9200'"),
    ],
)
def test_a_malformed_url_is_one_config_error_without_the_password(url, problem):
    with pytest.raises(ConfigError) as raised:
        parse_url(url)
    message = str(raised.value)
    assert message == (
        f"opensearch_url {redact_url(url)!r} is not an http(s) URL ({problem}"
        + (": not a number from 1 to 65535" if "port" in problem else "")
        + "); set OPENSEARCH_URL, e.g. http://127.0.0.1:9200"
    )
    assert "\n" not in message
    assert_secret_free(message, redact_url(url), safe_url(url))
    with pytest.raises(ConfigError):
        connect(Settings(opensearch_url=url))


@PASSWORD_FORMS
def test_settings_repr_and_public_items_mask_both_passwords(written):
    settings = Settings(opensearch_url=url_with(written), opensearch_password=OTHER_PASSWORD)
    items = settings.public_items()
    assert items["opensearch_url"] == f"http://{USER}:****@127.0.0.1:9200/prefix"
    assert items["opensearch_password"] == "****"
    assert_secret_free(repr(settings), str(settings), json.dumps(items), str(items))


def test_secret_values_and_scrub_secrets():
    settings = Settings(opensearch_url=url_with(ENCODED), opensearch_password=OTHER_PASSWORD)
    assert set(secret_values(settings)) == {
        OTHER_PASSWORD,
        ENCODED,
        PASSWORD,
        token_of(USER, OTHER_PASSWORD),  # the Authorization header sent
        token_of(USER, PASSWORD),  # the URL's own pair
    }
    leaky = f"failed: {PASSWORD} / {ENCODED} / {PASSWORD[8:20]} / {OTHER_PASSWORD[:6]} ok"
    scrubbed = scrub_secrets(leaky, secret_values(settings))
    assert_secret_free(scrubbed)
    assert scrubbed.startswith("failed: ****") and scrubbed.endswith(" ok")
    whole_only = scrub_secrets(f"x {PASSWORD} Ab1 y", [PASSWORD], pieces=False)
    assert whole_only == "x **** Ab1 y"


def cli_env(url: str, password: str | None = None) -> dict[str, str | None]:
    return {"OPENSEARCH_URL": url, "OPENSEARCH_PASSWORD": password, "OPENSEARCH_USER": None}


@PASSWORD_FORMS
def test_loader_settings_masks_both_passwords(written, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    env = cli_env(url_with(written), OTHER_PASSWORD)
    text = CliRunner().invoke(cli, ["settings"], env=env)
    assert text.exit_code == 0, text.output
    assert (
        f"opensearch_url = 'http://{USER}:****@127.0.0.1:9200/prefix'  [$OPENSEARCH_URL]"
        in text.stdout
    )
    assert "opensearch_password = '****'  [$OPENSEARCH_PASSWORD]" in text.stdout
    as_json = CliRunner().invoke(cli, ["settings", "--json"], env=env)
    assert as_json.exit_code == 0, as_json.output
    values = json.loads(as_json.stdout)
    assert values["opensearch_url"]["value"] == f"http://{USER}:****@127.0.0.1:9200/prefix"
    assert values["opensearch_password"]["value"] == "****"
    assert_secret_free(text.output, as_json.output)


def test_loader_settings_prints_a_malformed_url_masked(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["settings"], env=cli_env(f"{USER}:{PASSWORD}@h:abc"))
    assert result.exit_code == 0
    assert f"opensearch_url = '{USER}:****@h:abc'  [$OPENSEARCH_URL]" in result.stdout
    assert_secret_free(result.output)


def assert_one_line(result: Result, exit_code: int, start: str) -> None:
    assert result.exit_code == exit_code, (result.output, result.exception)
    assert result.stderr.startswith(f"Error: {start}"), result.stderr
    assert result.stderr.count("\n") == 1
    assert "Traceback" not in result.output
    assert_secret_free(result.output)


@pytest.mark.parametrize(
    "args", [["apply", "--dry-run"], ["search", "x", "--no-rerank"], ["push", "{folder}"]]
)
@pytest.mark.parametrize("written", [PASSWORD, ENCODED], ids=["raw", "encoded"])
def test_cluster_commands_with_a_malformed_url_are_one_line(args, written, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    (tmp_path / "docs").mkdir()
    args = [arg.format(folder=tmp_path / "docs") for arg in args]
    url = f"http://{USER}:{written}@127.0.0.1:99999"
    for env, extra in ((cli_env(url, OTHER_PASSWORD), []), (cli_env("http://h"), ["--url", url])):
        result = CliRunner().invoke(cli, [*args, *extra], env=env)
        assert_one_line(
            result, ConfigError.exit_code, f"opensearch_url 'http://{USER}:****@127.0.0.1:99999'"
        )
    assert_secret_free(caplog.text)


def test_an_unexpected_error_is_one_scrubbed_line(monkeypatch, tmp_path, caplog):
    """Text the package did not write (here a library's ValueError and log line) is scrubbed."""
    import loader.index.apply

    def explode(settings, **_):
        logging.getLogger("some.library").warning("connecting with %s", PASSWORD)
        raise ValueError(f"Port could not be cast to integer value as {PASSWORD[20:]!r}")

    monkeypatch.setattr(loader.index.apply, "apply_config", explode)
    monkeypatch.chdir(tmp_path)
    caplog.set_level(logging.DEBUG)
    result = CliRunner().invoke(cli, ["apply"], env=cli_env(url_with(ENCODED), OTHER_PASSWORD))
    assert_one_line(result, 1, "unexpected ValueError: Port could not be cast to integer value")
    assert result.stderr.endswith("; run with --debug for the traceback\n")
    assert "connecting with ****" in caplog.text
    assert_secret_free(caplog.text)
    debug = CliRunner().invoke(cli, ["apply", "--debug"], env=cli_env(url_with(ENCODED)))
    # --debug: the traceback first, its secrets masked too, and the same exit code.
    assert debug.exit_code == 1 and "Traceback (most recent call last)" in debug.stderr
    assert "ValueError: Port could not be cast to integer value as" in debug.stderr
    assert_secret_free(debug.output)


# A password whose Authorization header a proxy echoed: `loader apply --dry-run` printed
# "Proxy error. Basic YWRtaW46cEBzczp3L3JkJTQwIic=", which is base64 of admin:<this>.
ECHOED_PASSWORD = "p@ss:w/rd%40\"'"


@pytest.mark.parametrize(
    "settings",
    [
        Settings(opensearch_user=USER, opensearch_password=ECHOED_PASSWORD),
        Settings(opensearch_url=url_with(quote(ECHOED_PASSWORD, safe=""))),
        Settings(opensearch_url=url_with("old"), opensearch_password=ECHOED_PASSWORD),
        Settings(opensearch_url=url_with(quote(ECHOED_PASSWORD)), opensearch_user="other"),
    ],
    ids=["settings", "url", "url-user-settings-password", "settings-user-url-password"],
)
def test_the_basic_auth_token_sent_is_masked(settings):
    token = header_token(settings)
    assert base64.b64decode(token).decode().endswith(":" + ECHOED_PASSWORD)
    assert token in secret_values(settings)
    for pieces in (True, False):
        scrubbed = scrub_secrets(f"Proxy error. Basic {token}.", secret_values(settings), pieces)
        assert scrubbed == "Proxy error. Basic ****."


def test_the_urls_own_credentials_are_masked_when_the_settings_win():
    url = url_with(quote(ECHOED_PASSWORD))
    settings = Settings(opensearch_url=url, opensearch_password="other-pw")
    assert header_token(settings) == token_of(USER, "other-pw")
    assert token_of(USER, ECHOED_PASSWORD) in secret_values(settings)
    assert token_of(USER, ECHOED_PASSWORD) == "YWRtaW46cEBzczp3L3JkJTQwIic="  # the echoed one


def test_a_non_ascii_password_is_masked_as_latin1_and_utf8():
    """urllib3 encodes the header as Latin-1; a proxy or another client may use UTF-8."""
    settings = Settings(opensearch_user=USER, opensearch_password="pässwörd")
    latin1 = base64.b64encode(f"{USER}:pässwörd".encode("latin-1")).decode()
    assert header_token(settings) == latin1
    assert {latin1, token_of(USER, "pässwörd")} <= set(secret_values(settings))


def test_no_user_no_token():
    assert secret_values(Settings()) == []
    assert secret_values(Settings(opensearch_password="only-pw")) == ["only-pw"]


@pytest.mark.parametrize("preamble", ["Proxy error.", "Proxy error." + " upstream" * 5])
def test_a_proxy_page_echoing_the_header_is_masked(tmp_path, monkeypatch, preamble):
    """End to end: a loopback 'proxy' answers every request 502 with its Authorization header;
    with the longer preamble the page is cut in the middle of the token, after masking."""

    class EchoHandler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = f"{preamble} {self.headers.get('Authorization')}".encode()
            self.send_response(502)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_HEAD = do_PUT = do_POST = do_GET

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), EchoHandler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.chdir(tmp_path)
    env = {
        "OPENSEARCH_URL": f"http://127.0.0.1:{server.server_address[1]}",
        "OPENSEARCH_USER": USER,
        "OPENSEARCH_PASSWORD": ECHOED_PASSWORD,
    }
    try:
        result = CliRunner().invoke(cli, ["apply", "--dry-run"], env=env)
    finally:
        server.shutdown()
        server.server_close()
    assert result.exit_code == 3, result.output
    assert f"({preamble} Basic ****)" in result.stderr
    token = token_of(USER, ECHOED_PASSWORD)
    assert not any(token[:n] in result.output for n in range(8, len(token) + 1))
    assert ECHOED_PASSWORD not in result.output


def test_a_password_basic_auth_cannot_carry_is_a_config_error_that_shows_none_of_it():
    result = CliRunner().invoke(
        cli,
        ["apply", "--dry-run", "--url", "http://127.0.0.1:9"],
        env={"OPENSEARCH_USER": "admin", "OPENSEARCH_PASSWORD": "p€ss-wörd-秘密"},
    )
    assert result.exit_code == 2, result.output
    assert "cannot carry (only Latin-1 letters)" in result.stderr
    for piece in ("€", "秘", "position", "p€ss"):
        assert piece not in result.output


def test_the_rewriters_url_credentials_are_masked_like_the_clusters(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "loader.toml").write_text(
        'rewrite_url = ["http://bob:hunter2pass@127.0.0.1:9/v1"]\n', encoding="utf-8"
    )
    wrong_type = CliRunner().invoke(cli, ["settings"])
    assert wrong_type.exit_code == 2 and "must be of type str, got a list" in wrong_type.output
    assert "hunter2pass" not in wrong_type.output
    (tmp_path / "loader.toml").unlink()
    env = {"LOADER_REWRITE_URL": "http://bob:hunter2pass@127.0.0.1:9/v1"}
    for args in (["settings"], ["settings", "--json"]):
        result = CliRunner().invoke(cli, args, env=env)
        assert result.exit_code == 0, result.output
        assert "hunter2pass" not in result.output and "bob:****@127.0.0.1:9" in result.output
    assert "hunter2pass" in secret_values(Settings(rewrite_url=env["LOADER_REWRITE_URL"]))


def echoed_forms(secret: str) -> dict[str, str]:
    """``secret`` as servers, proxies and libraries write it back, each inside some text."""
    json_escaped = json.dumps(secret)
    return {
        "raw": secret,
        "json": json_escaped,
        "json-utf8": json.dumps(secret, ensure_ascii=False),
        "json-twice": json.dumps(json_escaped),  # a JSON body quoting an escaped echo
        "python-repr": repr(secret),
        "dict-repr": repr({"reason": secret}),  # an exception's args in a traceback
        "exception": repr(ValueError(f"bad password {secret!r}")),
        "terminal": printable(secret),
        "url": quote(secret),
        "url-all": quote(secret, safe=""),
        "form": quote_plus(secret),
        "html": html.escape(secret),
    }


@pytest.mark.parametrize("form", echoed_forms(ECHO_PASSWORD))
def test_every_form_an_echo_takes_is_masked(form):
    """A password holding an ESC, both quotes, a backslash and a Latin-1 letter, echoed back in
    each form: the scrubbed text, as the terminal shows it, holds no word of it."""
    text = f"upstream said: {echoed_forms(ECHO_PASSWORD)[form]} (Basic {ECHO_TOKEN})."
    secrets = secret_values(Settings(opensearch_user=USER, opensearch_password=ECHO_PASSWORD))
    scrubbed = scrub_secrets(text, secrets)
    assert scrubbed.startswith("upstream said: ") and scrubbed.endswith(" (Basic ****).")
    assert_no_credential(scrubbed, printable(scrubbed))
    if form not in ("json-twice", "exception"):  # escaped once: masked whole without pieces
        assert_no_credential(scrub_secrets(text, secrets, pieces=False))


ECHO_COMMANDS = {
    "apply": ["apply", "--dry-run"],
    "push": ["push", "."],
    "search": ["search", "refund", "--no-rerank", "--mode", "bm25"],
    "doctor": ["doctor"],
}


@pytest.mark.parametrize(("status", "kind"), [(400, "json"), (401, "text"), (503, "page")])
def test_debug_prints_no_form_of_an_echoed_password(tmp_path, status, kind):
    """The real entry point with --debug (tracebacks, opensearch-py's log of every answer's body)
    against a proxy echoing the credentials: no word of the password, no piece of its Basic
    token, and no raw terminal control sequence, for every command."""
    (tmp_path / "refunds.md").write_text("# Refunds\n\nLate orders are refunded.\n")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("OPENSEARCH_", "LOADER_"))},
        "PYTHONPATH": str(REPO),
        "OPENSEARCH_USER": USER,
        "OPENSEARCH_PASSWORD": ECHO_PASSWORD,
        "LOADER_INDEX_NAME": "echo-kb",
    }
    with EchoUpstream(status, kind) as upstream:
        env["OPENSEARCH_URL"] = upstream.url
        for name, args in ECHO_COMMANDS.items():
            done = subprocess.run(
                [sys.executable, "-m", "loader", *args, "--debug"],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            output = done.stdout + done.stderr
            assert done.returncode in (3, 4, 11), (name, done.returncode, output[-2000:])
            assert "DEBUG opensearch: <" in output, name  # the answer's body was logged
            assert_no_credential(output)
            assert TERMINAL_SEQUENCE not in output and "\x1b" not in output, name
