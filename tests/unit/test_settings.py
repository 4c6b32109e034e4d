from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from loader.cli import cli
from loader.errors import ConfigError
from loader.resolve import resolve_settings
from loader.settings import Settings


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
