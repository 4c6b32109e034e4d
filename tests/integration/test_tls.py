"""TLS and basic auth, client side, through nginx in front of the test cluster.

The OpenSearch security plugin cannot be installed on this project's cluster: plugin versions
must match the core exactly, and org.opensearch.plugin:opensearch-security is not published on
Maven Central for 3.6.0.0. So the server side of TLS + basic auth is played by nginx (a Debian
package installed by scripts/setup.sh), started per module on 127.0.0.1 with a CA and a server
certificate made here, an htpasswd file, and proxy_pass to the session's cluster.

Proven through the CLI: HTTPS + basic auth + ca_certs works for apply, push and search;
verification is on by default and off only through the ``insecure_skip_tls_verify`` setting;
a wrong password is the authentication line and exit code 4; the password never appears in
output or logs, --debug included, whether it comes from OPENSEARCH_PASSWORD or the URL; a
password holding every URL-reserved character works raw or percent-encoded.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import hashlib
import ipaddress
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest
from click.testing import CliRunner, Result

from loader.cli import cli
from loader.cluster.client import connect
from loader.errors import AuthenticationError, ClusterError
from loader.settings import Settings

USER = "loader-tester"
PASSWORD = "Pa55-w0rd-7c1e9f"  # distinctive, so any leak is easy to find in output
# A second user whose password holds every URL-reserved character and a space ('%zz' is not an
# escape, so written raw in a URL it is still itself). nginx ends a {PLAIN} password at ':', so
# its htpasswd line holds the {SHA} hash.
RESERVED_USER = "reserved-tester"
RESERVED_PASSWORD = (
    "Ab1:Cd2/Ef3?Gh4#Ij5[Kl6]Mn7@Op8!Qr9$St0&Uv1'Wx2(Yz3)Aq4*Bq5+Cq6,Dq7;Eq8=Fq9%zzq Gq0"
)


def nginx_binary() -> str | None:
    return shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")


pytestmark = pytest.mark.skipif(
    nginx_binary() is None, reason="nginx is missing; scripts/setup.sh installs it"
)


def make_certificates(folder: Path) -> tuple[Path, Path, Path]:
    """A test CA and a server certificate for 127.0.0.1/localhost: (ca.pem, cert.pem, key.pem)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def name(common_name: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(name("loader test CA"))
        .issuer_name(name("loader test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name("127.0.0.1"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = folder / "ca.pem", folder / "server.pem", folder / "server-key.pem"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


NGINX_CONF = """
daemon off;
master_process off;
pid {folder}/nginx.pid;
error_log {folder}/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {folder}/body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;
    client_max_body_size 100m;
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        auth_basic "OpenSearch";
        auth_basic_user_file {htpasswd};
        location / {{
            proxy_pass {upstream};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Authorization "";
        }}
    }}
}}
"""


@dataclass(frozen=True)
class Proxy:
    url: str  # https://127.0.0.1:<port>, no credentials
    ca: Path

    def url_with(self, user: str, password: str) -> str:
        return self.url.replace("https://", f"https://{user}:{password}@")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory, opensearch_url: str) -> Iterator[Proxy]:
    """nginx terminating TLS with basic auth on 127.0.0.1, proxying to the session's cluster."""
    folder = tmp_path_factory.mktemp("nginx")
    ca, cert, key = make_certificates(folder)
    htpasswd = folder / "htpasswd"
    sha = base64.b64encode(hashlib.sha1(RESERVED_PASSWORD.encode()).digest()).decode()
    htpasswd.write_text(  # nginx reads {PLAIN} and {SHA} passwords
        f"{USER}:{{PLAIN}}{PASSWORD}\n{RESERVED_USER}:{{SHA}}{sha}\n"
    )
    port = free_port()
    conf = folder / "nginx.conf"
    conf.write_text(
        NGINX_CONF.format(
            folder=folder, port=port, cert=cert, key=key, htpasswd=htpasswd, upstream=opensearch_url
        )
    )
    process = subprocess.Popen(
        [nginx_binary(), "-p", str(folder), "-c", str(conf), "-e", str(folder / "error.log")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            if process.poll() is not None or time.monotonic() > deadline:
                log = (folder / "error.log").read_text() if (folder / "error.log").exists() else ""
                pytest.fail(f"nginx did not start: {process.stderr.read().decode()} {log}")
            time.sleep(0.05)
        yield Proxy(f"https://127.0.0.1:{port}", ca)
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tls") / "handbook"
    root.mkdir()
    (root / "refunds.md").write_text(
        "# Refunds\n\n## Late deliveries\n\nOrders delayed by more than 45 minutes are "
        "refunded in full within 5 working days.\n",
        encoding="utf-8",
    )
    return root


def invoke(args: list[str], env: dict[str, str | None], cwd: Path) -> Result:
    """`loader ...` in-process from ``cwd`` with only ``env`` deciding the cluster settings."""
    base = {
        "OPENSEARCH_URL": None,
        "OPENSEARCH_USER": None,
        "OPENSEARCH_PASSWORD": None,
        "LOADER_CA_CERTS": None,
        "LOADER_INSECURE_SKIP_TLS_VERIFY": None,
        "LOADER_REQUEST_TIMEOUT": "20",
    }
    with contextlib.chdir(cwd):
        return CliRunner().invoke(cli, args, env={**base, **env})


def secure_env(proxy: Proxy) -> dict[str, str]:
    return {
        "OPENSEARCH_URL": proxy.url,
        "OPENSEARCH_USER": USER,
        "OPENSEARCH_PASSWORD": PASSWORD,
        "LOADER_CA_CERTS": str(proxy.ca),
    }


def assert_no_password(*texts: str) -> None:
    for text in texts:
        assert PASSWORD not in text
        assert PASSWORD[:8] not in text  # not even a prefix of it


def test_https_with_basic_auth_and_the_ca_works_for_apply_push_and_search(
    proxy, folder, unique_name, tmp_path
):
    env = secure_env(proxy)
    applied = invoke(["apply", "--index", unique_name], env, tmp_path)
    assert applied.exit_code == 0, applied.output
    assert " created, 0 updated, 0 deleted, 0 unchanged" in applied.stdout
    pushed = invoke(["push", str(folder), "--index", unique_name, "--tenant", "T"], env, tmp_path)
    assert pushed.exit_code == 0, pushed.output
    assert "1 added" in pushed.stdout
    found = invoke(
        ["search", "late delivery refund", "--index", unique_name, "--tenant", "T",
         "--no-rerank", "--mode", "bm25", "--json"],
        env,
        tmp_path,
    )  # fmt: skip
    assert found.exit_code == 0, found.output
    assert '"source": "refunds.md"' in found.stdout
    # the same with the credentials in the URL instead of the settings
    in_url = {**env, "OPENSEARCH_URL": proxy.url_with(USER, PASSWORD)}
    del in_url["OPENSEARCH_USER"], in_url["OPENSEARCH_PASSWORD"]
    again = invoke(["apply", "--index", unique_name], in_url, tmp_path)
    assert again.exit_code == 0, again.output
    assert again.stdout.endswith("\nno changes\n")
    for result in (applied, pushed, found, again):
        assert_no_password(result.output)


def test_certificates_are_verified_by_default(proxy, tmp_path):
    env = secure_env(proxy)
    del env["LOADER_CA_CERTS"]  # the system CAs do not know the test CA
    result = invoke(["apply", "--index", "tls-never-created"], env, tmp_path)
    assert result.exit_code == ClusterError.exit_code, result.output
    assert result.stderr.startswith(
        f"Error: TLS handshake with {proxy.url} failed while checking that OpenSearch answers: "
        "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"
    )
    assert result.stderr.endswith("; point ca_certs at the cluster's CA certificate\n")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.output
    client = connect(Settings(opensearch_url=proxy.url))
    assert client.transport.connection_pool.connections[0].pool.cert_reqs == "CERT_REQUIRED"


def test_verification_is_off_only_through_the_named_setting(proxy, tmp_path, unique_name):
    env = secure_env(proxy)
    del env["LOADER_CA_CERTS"]
    search = ["search", "anything", "--index", unique_name, "--no-rerank", "--mode", "bm25"]
    # the index does not exist: a 404 proves the request went through TLS and auth
    skipped = invoke(search, {**env, "LOADER_INSECURE_SKIP_TLS_VERIFY": "true"}, tmp_path)
    assert skipped.exit_code == ClusterError.exit_code
    assert "answered 404" in skipped.stderr and "run `loader apply`" in skipped.stderr
    config = tmp_path / "insecure.toml"
    config.write_text("insecure_skip_tls_verify = true\n")
    from_file = invoke([*search, "--config", str(config)], env, tmp_path)
    assert "answered 404" in from_file.stderr
    # anything else keeps verification on
    for value in ("false", "0", ""):
        kept = invoke(search, {**env, "LOADER_INSECURE_SKIP_TLS_VERIFY": value}, tmp_path)
        assert "CERTIFICATE_VERIFY_FAILED" in kept.stderr, (value, kept.output)
    for flag in ("--insecure", "--insecure-skip-tls-verify", "-k"):
        refused = invoke([*search, flag], env, tmp_path)
        assert refused.exit_code == 2 and "No such option" in refused.stderr, flag


def test_a_wrong_password_is_an_authentication_error(proxy, tmp_path):
    wrong = "not-the-Pa55word"
    for env in (
        {**secure_env(proxy), "OPENSEARCH_PASSWORD": wrong},
        {"OPENSEARCH_URL": proxy.url_with(USER, wrong), "LOADER_CA_CERTS": str(proxy.ca)},
        {"OPENSEARCH_URL": proxy.url, "LOADER_CA_CERTS": str(proxy.ca)},  # no credentials
    ):
        for args in (
            ["apply", "--index", "tls-never-created"],
            ["search", "refund", "--index", "tls-never-created", "--no-rerank", "--mode", "bm25"],
        ):
            result = invoke(args, env, tmp_path)
            assert result.exit_code == AuthenticationError.exit_code == 4, result.output
            assert result.stderr.startswith(f"Error: {proxy.url} rejected the credentials while ")
            assert result.stderr.endswith("; check OPENSEARCH_USER / OPENSEARCH_PASSWORD\n")
            assert result.stderr.count("\n") == 1 and "Traceback" not in result.output
            assert wrong not in result.output


def run_process(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    """The real `loader` entry point in a child process: real logging, real tracebacks."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENSEARCH_", "LOADER_"))}
    return subprocess.run(
        [sys.executable, "-c", "from loader.cli import cli; cli()", *args],
        env={**clean, **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_password_never_appears_in_output_or_debug_logs(proxy, folder, unique_name, tmp_path):
    in_settings = secure_env(proxy)
    in_url = {"OPENSEARCH_URL": proxy.url_with(USER, PASSWORD), "LOADER_CA_CERTS": str(proxy.ca)}
    wrong_in_url = {**in_url, "OPENSEARCH_URL": proxy.url_with(USER, PASSWORD + "x")}
    no_ca = {**in_url, "LOADER_CA_CERTS": ""}
    search = ["search", "refund", "--index", unique_name, "--tenant", "T", "--no-rerank",
              "--mode", "bm25"]  # fmt: skip
    outputs = []
    for env in (in_settings, in_url):
        settings = run_process(["settings"], env, tmp_path)
        assert settings.returncode == 0
        assert "opensearch_password = '****'" in settings.stdout or "****@" in settings.stdout
        outputs.append(settings)
        outputs.append(run_process(["settings", "--json"], env, tmp_path))
    applied = run_process(["apply", "--index", unique_name, "--debug"], in_url, tmp_path)
    assert applied.returncode == 0, applied.stderr[-2000:]
    assert "DEBUG" in applied.stderr  # the debug logs were on, and were checked
    outputs.append(applied)
    pushed = run_process(
        ["push", str(folder), "--index", unique_name, "--tenant", "T", "--debug"], in_url, tmp_path
    )
    assert pushed.returncode == 0, pushed.stderr[-2000:]
    outputs.append(pushed)
    found = run_process([*search, "--debug"], in_settings, tmp_path)
    assert found.returncode == 0 and "refunds.md" in found.stdout, found.stderr[-2000:]
    outputs.append(found)
    for env, code in ((wrong_in_url, 4), (no_ca, 3)):
        for extra in (["--debug"], []):  # with --debug: the traceback too, the same exit code
            failed = run_process([*search, *extra], env, tmp_path)
            assert failed.returncode == code, failed.stderr[-2000:]
            assert ("Traceback" in failed.stderr) == bool(extra)
            outputs.append(failed)
    bad_scheme = run_process(
        ["apply", "--debug"], {"OPENSEARCH_URL": f"ftp://{USER}:{PASSWORD}@127.0.0.1"}, tmp_path
    )
    assert bad_scheme.returncode == 2 and f"ftp://{USER}:****@127.0.0.1" in bad_scheme.stderr
    outputs.append(bad_scheme)
    for process in outputs:
        assert_no_password(process.stdout, process.stderr)


def reserved_pieces() -> list[str]:
    """The reserved password, encoded, and each piece of it of three or more characters."""
    pieces = re.split(r"[:/?#\[\]@!$&'()*+,;=%\s]+", RESERVED_PASSWORD)
    return [RESERVED_PASSWORD, quote(RESERVED_PASSWORD, safe="")] + [
        p for p in pieces if len(p) >= 3
    ]


def test_a_password_with_reserved_characters_authenticates_end_to_end(
    proxy, folder, unique_name, tmp_path
):
    """Percent-encoded in OPENSEARCH_URL, raw in OPENSEARCH_PASSWORD, raw in --url: the proxy
    accepts it for apply, push and search, and no output or debug log shows any piece of it."""
    ca = {"LOADER_CA_CERTS": str(proxy.ca)}
    encoded_in_url = {
        **ca,
        "OPENSEARCH_URL": proxy.url_with(RESERVED_USER, quote(RESERVED_PASSWORD, safe="")),
    }
    in_settings = {
        **ca,
        "OPENSEARCH_URL": proxy.url,
        "OPENSEARCH_USER": RESERVED_USER,
        "OPENSEARCH_PASSWORD": RESERVED_PASSWORD,
    }
    raw_url = proxy.url_with(RESERVED_USER, RESERVED_PASSWORD)
    search = ["search", "late delivery refund", "--index", unique_name, "--tenant", "T",
              "--no-rerank", "--mode", "bm25", "--json"]  # fmt: skip
    applied = run_process(["apply", "--index", unique_name, "--debug"], encoded_in_url, tmp_path)
    assert applied.returncode == 0, applied.stderr[-2000:]
    assert " created, 0 updated, 0 deleted, 0 unchanged" in applied.stdout
    assert "DEBUG" in applied.stderr  # the debug logs were on, and were checked
    pushed = invoke(
        ["push", str(folder), "--index", unique_name, "--tenant", "T"], in_settings, tmp_path
    )
    assert pushed.exit_code == 0, pushed.output
    assert "1 added" in pushed.stdout
    found = {}
    for name, env, extra in (
        ("encoded", encoded_in_url, []),
        ("settings", in_settings, []),
        ("raw --url", ca, ["--url", raw_url]),
    ):
        found[name] = invoke([*search, *extra], env, tmp_path)
        assert found[name].exit_code == 0, (name, found[name].output)
        assert '"source": "refunds.md"' in found[name].stdout
    again = invoke(["apply", "--index", unique_name, "--url", raw_url], ca, tmp_path)
    assert again.exit_code == 0 and again.stdout.endswith("\nno changes\n"), again.output
    wrong = invoke(
        ["apply", "--index", unique_name],
        {**in_settings, "OPENSEARCH_PASSWORD": RESERVED_PASSWORD[:-1]},
        tmp_path,
    )
    assert wrong.exit_code == AuthenticationError.exit_code, wrong.output
    shown = [
        run_process(["settings", *flag], env, tmp_path)
        for env in (encoded_in_url, in_settings)
        for flag in ([], ["--json"])
    ]
    assert all(process.returncode == 0 for process in shown)
    texts = [applied.stdout, applied.stderr, *(r.output for r in (pushed, again, wrong))]
    texts += [r.output for r in found.values()] + [p.stdout + p.stderr for p in shown]
    for text in texts:
        for piece in reserved_pieces():
            assert piece not in text, (piece, text[-2000:])
