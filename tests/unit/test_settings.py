from __future__ import annotations

import contextlib
import logging
import os
import re
from dataclasses import fields

import pytest
from click.testing import CliRunner

from loader.cli import cli
from loader.errors import ConfigError
from loader.resolve import NOT_SETTING_VARIABLES, resolve_settings, unknown_variables
from loader.settings import Settings
from tests.paths import REPO


def test_layers_resolve_in_order(tmp_path):
    config = tmp_path / "loader.toml"
    config.write_text('index_name = "from-file"\ncandidates = 80\ntop_k = 7\n', encoding="utf-8")
    env = {"LOADER_CANDIDATES": "90", "OPENSEARCH_URL": "http://127.0.0.1:9999"}
    settings, sources = resolve_settings(config, env=env, overrides={"top_k": 3, "hnsw_m": None})
    assert (settings.index_name, sources["index_name"]) == ("from-file", str(config))
    assert (settings.candidates, sources["candidates"]) == (90, "$LOADER_CANDIDATES")
    assert (settings.opensearch_url, sources["opensearch_url"]) == (
        "http://127.0.0.1:9999",
        "$OPENSEARCH_URL",
    )
    assert (settings.top_k, sources["top_k"]) == (3, "override")
    assert (settings.hnsw_m, sources["hnsw_m"]) == (16, "default")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"LOADER_CANDIDATES": "many"}, "setting 'candidates' from $LOADER_CANDIDATES must be"),
        ({"LOADER_INSECURE_SKIP_TLS_VERIFY": "perhaps"}, "insecure_skip_tls_verify"),
    ],
)
def test_bad_values_name_the_setting_and_source(env, message, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no loader.toml here
    with pytest.raises(ConfigError, match=message.replace("$", r"\$")):
        resolve_settings(None, env=env)


def test_unknown_key_in_config_file(tmp_path):
    config = tmp_path / "loader.toml"
    config.write_text("chunk_size = 10\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="unknown setting 'chunk_size'"):
        resolve_settings(config, env={})


def test_missing_named_config_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        resolve_settings(tmp_path / "nope.toml", env={})


def test_booleans_parse_from_env(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    settings, _ = resolve_settings(None, env={"LOADER_INSECURE_SKIP_TLS_VERIFY": "true"})
    assert settings.insecure_skip_tls_verify is True


def test_secrets_are_masked():
    settings = Settings(opensearch_password="hunter2")
    assert "hunter2" not in repr(settings)
    assert settings.public_items()["opensearch_password"] == "****"


def write_config(tmp_path, text: str):
    config = tmp_path / "loader.toml"
    config.write_text(text, encoding="utf-8")
    return config


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("top_k = true", "'top_k' from {} must be of type int, got True"),
        ("request_timeout = true", "'request_timeout' from {} must be of type float, got True"),
        ('index_name = ["a"]', "'index_name' from {} must be of type str, got ['a']"),
        ("tenant = {a = 1}", "'tenant' from {} must be of type str, got {{'a': 1}}"),
        ("tenant = true", "'tenant' from {} must be of type str, got True"),
        ("tenant = 1.5", "'tenant' from {} must be of type str, got 1.5"),
        (
            "tenant = 1979-05-27",
            "'tenant' from {} must be of type str, got datetime.date(1979, 5, 27)",
        ),
        ("top_k = 5.0", "'top_k' from {} must be of type int, got 5.0"),
    ],
)
def test_a_toml_value_of_another_type_is_refused_not_converted(line, message, tmp_path):
    config = write_config(tmp_path, line + "\n")
    with pytest.raises(ConfigError) as raised:
        resolve_settings(config, env={})
    assert str(raised.value) == "setting " + message.format(config)


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        ('opensearch_password = ["hunter2-pw"]', "a list"),
        ("rewrite_api_key = 12345.678", "a float"),
        ('opensearch_url = {url = "http://u:hunter2-pw@h"}', "a dict"),
    ],
)
def test_a_refused_credential_is_named_by_its_type_only(line, shown, tmp_path):
    config = write_config(tmp_path, line + "\n")
    with pytest.raises(ConfigError) as raised:
        resolve_settings(config, env={})
    name = line.split(" ")[0]
    assert str(raised.value) == f"setting {name!r} from {config} must be of type str, got {shown}"


def test_numbers_still_convert_where_nothing_is_lost(tmp_path):
    config = write_config(tmp_path, "tenant = 42\nrequest_timeout = 5\n")
    settings, _ = resolve_settings(config, env={"LOADER_TOP_K": " 7 "})
    assert (settings.tenant, settings.request_timeout, settings.top_k) == ("42", 5.0, 7)


def test_a_config_file_that_is_not_utf8_names_the_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "loader.toml").write_bytes(b'# settings\nindex_name = "caf\xe9"\n')
    with pytest.raises(ConfigError) as raised:
        resolve_settings(None, env={})
    assert str(raised.value) == (
        "config file loader.toml is not UTF-8 text (byte 0xe9 on line 2); save it as UTF-8"
    )
    result = CliRunner().invoke(cli, ["settings"])
    assert (result.exit_code, result.output) == (2, f"Error: {raised.value}\n")


def make_directory(path):
    path.mkdir()


def make_dangling_link(path):
    path.symlink_to(path.parent / "gone.toml")


def make_fifo(path):
    os.mkfifo(path)


@pytest.mark.parametrize(
    ("make", "what"),
    [
        (make_directory, "is a directory, not a regular file; give a TOML file"),
        (make_fifo, "is a named pipe, not a regular file; give a TOML file"),
        (make_dangling_link, "is a dangling symbolic link (to {gone})"),
    ],
)
def test_a_loader_toml_that_is_no_regular_file_is_an_error(make, what, tmp_path, monkeypatch):
    """Not silently "no loader.toml": the defaults would apply and push to another index."""
    monkeypatch.chdir(tmp_path)
    make(tmp_path / "loader.toml")
    message = f"config file loader.toml {what.format(gone=tmp_path / 'gone.toml')}"
    with pytest.raises(ConfigError) as raised:
        resolve_settings(None, env={})
    assert str(raised.value) == message
    with pytest.raises(ConfigError) as named:
        resolve_settings(tmp_path / "loader.toml", env={})
    assert str(named.value) == message.replace("loader.toml", str(tmp_path / "loader.toml"), 1)


def test_config_dev_null_says_what_it_is(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as raised:
        resolve_settings("/dev/null", env={})
    message = "config file /dev/null is a character device, not a regular file; give a TOML file"
    assert str(raised.value) == message
    result = CliRunner().invoke(cli, ["settings", "--config", "/dev/null"])
    assert (result.exit_code, result.output) == (2, f"Error: {message}\n")


def test_no_loader_toml_means_the_defaults(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    settings, sources = resolve_settings(None, env={})
    assert settings == Settings() and set(sources.values()) == {"default"}


# --- LOADER_* variables that name no setting ---------------------------------------------------


@pytest.mark.parametrize(
    ("var", "warning"),
    [
        (
            "LOADER_EMBEDING_MODEL",
            "LOADER_EMBEDING_MODEL is not a setting "
            "(did you mean LOADER_EMBEDDING_MODEL?); ignored",
        ),
        ("LOADER_TOPK", "LOADER_TOPK is not a setting (did you mean LOADER_TOP_K?); ignored"),
        (
            "LOADER_OPENSEARCH_PASWORD",
            "LOADER_OPENSEARCH_PASWORD is not a setting "
            "(did you mean LOADER_OPENSEARCH_PASSWORD?); ignored",
        ),
        ("loader_top_k", "loader_top_k is not a setting (did you mean LOADER_TOP_K?); ignored"),
        ("LOADER_FOO", "LOADER_FOO is not a setting; ignored"),
        ("LOADER_URL", "LOADER_URL is not a setting; ignored"),
    ],
)
def test_an_unknown_loader_variable_is_named_with_the_setting_it_probably_meant(var, warning):
    assert unknown_variables({var: "hunter2-secret"}) == [warning]


def test_settings_conventional_names_and_the_projects_own_variables_are_no_warning():
    env = {f"LOADER_{f.name.upper()}": "x" for f in fields(Settings)}
    env.update({"OPENSEARCH_URL": "x", "HOME": "x", "MY_LOADER_TOPK": "x"})
    env.update({"LOADER_CACHE_DIR": "x", "LOADER_TEST_START_TIMEOUT": "x"})
    env.update({"LOADER_CONSTRAINTS": "none", "LOADER_TEST_WHEELHOUSE": "x"})
    assert unknown_variables(env) == []


# A LOADER_* name read in a shell script (${LOADER_X:-...}) or set for one (LOADER_X=...), and one
# a Python file reads from os.environ.
SHELL_VARIABLE = re.compile(r"\$\{?(LOADER_[A-Z_]+)|\b(LOADER_[A-Z_]+)=")
PYTHON_VARIABLE = re.compile(r"environ(?:\.get\(|\[)\s*[\"'](LOADER_[A-Z_]+)")


def test_every_variable_the_projects_scripts_and_tests_read_is_no_warning():
    """Else a run that sets it (.ci/run sets LOADER_TEST_WHEELHOUSE, setup.sh reads
    LOADER_CONSTRAINTS) prints a warning on every command's stderr, and the tests that read that
    stderr fail (issue #52)."""
    shell = [REPO / ".ci" / "run", *(REPO / "scripts").glob("*.sh")]
    shell += sorted((REPO / "opensearch").glob("*.sh"))
    read = {
        name
        for path in shell
        for match in SHELL_VARIABLE.findall(path.read_text(encoding="utf-8"))
        for name in match
        if name
    }
    read |= {
        name
        for folder in ("loader", "tests", "benchmarks")
        for path in (REPO / folder).rglob("*.py")
        for name in PYTHON_VARIABLE.findall(path.read_text(encoding="utf-8"))
    }
    assert {"LOADER_CONSTRAINTS", "LOADER_TEST_WHEELHOUSE", "LOADER_CACHE_DIR"} <= read
    assert unknown_variables(dict.fromkeys(read, "x")) == []


def test_the_projects_own_variables_are_not_settings():
    assert {f"LOADER_{f.name.upper()}" for f in fields(Settings)} & NOT_SETTING_VARIABLES == set()


def test_unknown_variables_come_in_name_order():
    warnings = unknown_variables({"LOADER_ZZZ": "1", "LOADER_AAA": "2"})
    assert warnings == [
        "LOADER_AAA is not a setting; ignored",
        "LOADER_ZZZ is not a setting; ignored",
    ]


def test_resolving_warns_once_per_call_and_ignores_the_variable(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    env = {"LOADER_EMBEDING_MODEL": "bge-small-en-v1.5", "LOADER_TOP_K": "3"}
    with caplog.at_level(logging.WARNING, logger="loader.resolve"):
        settings, sources = resolve_settings(None, env=env)
    assert caplog.messages == [
        "LOADER_EMBEDING_MODEL is not a setting (did you mean LOADER_EMBEDDING_MODEL?); ignored"
    ]
    assert (settings.embedding_model, sources["embedding_model"]) == ("all-MiniLM-L6-v2", "default")
    assert settings.top_k == 3


@contextlib.contextmanager
def logging_as_outside_pytest():
    """The root logger without pytest's capture handlers, as a command finds it when run from a
    shell: its ``logging.basicConfig`` then writes to the stderr ``CliRunner`` captures."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    root.handlers.clear()
    try:
        yield
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers[:] = handlers
        root.setLevel(level)


TYPO = "WARNING loader.resolve: LOADER_EMBEDING_MODEL is not a setting (did you mean "
TYPO += "LOADER_EMBEDDING_MODEL?); ignored\n"


@pytest.mark.parametrize(
    ("args", "exit_code", "error"),
    [
        (["settings"], 0, ""),
        (
            ["apply", "--dry-run", "--url", "http://127.0.0.1:9"],
            3,
            "Error: cannot connect to http://127.0.0.1:9 while checking that OpenSearch answers; "
            "is OpenSearch running? (`loader up` starts a local one; OPENSEARCH_URL names "
            "another)\n",
        ),
    ],
)
def test_a_command_warns_once_of_a_mistyped_variable_and_never_of_the_projects_own(
    args, exit_code, error, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    for var in [var for var in os.environ if var.upper().startswith("LOADER_")]:
        monkeypatch.delenv(var)
    own = {"LOADER_CACHE_DIR": str(tmp_path), "LOADER_TEST_START_TIMEOUT": "300"}
    with logging_as_outside_pytest():
        typo = CliRunner().invoke(cli, args, env={"LOADER_EMBEDING_MODEL": "s3cret-value", **own})
        clean = CliRunner().invoke(cli, args, env=own)
    assert (typo.exit_code, typo.stderr) == (exit_code, TYPO + error)
    assert "s3cret-value" not in typo.output
    assert (clean.exit_code, clean.stderr) == (exit_code, error)
