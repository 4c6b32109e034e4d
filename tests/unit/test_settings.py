from __future__ import annotations

import pytest

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
