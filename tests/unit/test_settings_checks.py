"""Values a setting can never take are refused where they come from, naming the setting and its
source (loader.toml, ``$LOADER_X``, an override such as ``--index``), and when ``Settings`` is
built directly: bounds, non-finite floats, index names, blank tenants."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from loader.cli import cli
from loader.errors import ConfigError
from loader.resolve import resolve_settings
from loader.settings import Settings, setting_help, settings_in_scope


def refused(tmp_path, **kwargs) -> str:
    """The message of resolving ``kwargs`` (``env``, ``overrides``, ``toml``) from ``tmp_path``."""
    config = tmp_path / "loader.toml"
    config.write_text(kwargs.pop("toml", ""), encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        resolve_settings(config, env=kwargs.pop("env", {}), **kwargs)
    return str(raised.value)


# --- finite floats ---------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["nan", "NaN", "inf", "-inf", "Infinity"])
@pytest.mark.parametrize("name", ["bm25_weight", "request_timeout", "semantic_threshold"])
def test_a_float_setting_refuses_nan_and_infinity_from_the_environment(name, text, tmp_path):
    var = f"LOADER_{name.upper()}"
    message = refused(tmp_path, env={var: text})
    assert message == f"setting {name!r} from ${var} must be a finite number, got {float(text)!r}"


@pytest.mark.parametrize("literal", ["nan", "inf", "-inf"])
def test_a_float_setting_refuses_toml_nan_and_infinity(literal, tmp_path):
    message = refused(tmp_path, toml=f"rrf_bm25_weight = {literal}\n")
    assert message.startswith(f"setting 'rrf_bm25_weight' from {tmp_path / 'loader.toml'} must be")
    assert message.endswith(f"a finite number, got {float(literal)!r}")


# --- bounds ----------------------------------------------------------------------------------

# Every bounded setting, the nearest values outside and inside, and its bound as the message says.
BOUNDS = [
    ("request_timeout", (0.0, -1.0), (0.001,), "greater than 0"),
    ("local_port", (0, 65536), (1, 65535), "between 1 and 65535"),
    ("number_of_shards", (0, -1), (1,), "at least 1"),
    ("number_of_replicas", (-1,), (0,), "at least 0"),
    ("hnsw_m", (1, -3), (2,), "at least 2"),
    ("hnsw_ef_construction", (0,), (1,), "at least 1"),
    ("hnsw_ef_search", (0,), (1,), "at least 1"),
    ("embedding_batch_size", (0,), (1,), "at least 1"),
    ("max_file_bytes", (0,), (1,), "at least 1"),
    ("bulk_batch_size", (0,), (1,), "at least 1"),
    ("candidates", (0, 10_001), (1, 10_000), "between 1 and 10000"),
    ("top_k", (0, 10_001), (1, 10_000), "between 1 and 10000"),
    ("rrf_rank_constant", (0,), (1,), "at least 1"),
    ("bm25_weight", (-0.1, 1.5), (0.0, 1.0), "between 0 and 1"),
    ("rrf_bm25_weight", (-0.1, 1.01), (0.0, 1.0), "between 0 and 1"),
    ("exact_weight", (-0.5, 2.0), (0.0, 1.0), "between 0 and 1"),
]
OUTSIDE = [(name, value, bound) for name, bad, _, bound in BOUNDS for value in bad]
INSIDE = [(name, value) for name, _, good, _ in BOUNDS for value in good]


@pytest.mark.parametrize(("name", "value", "bound"), OUTSIDE)
def test_a_value_out_of_bounds_is_refused_from_file_environment_and_override(
    name, value, bound, tmp_path
):
    config = tmp_path / "loader.toml"
    expected = f"must be {bound}, got {value!r}"
    message = refused(tmp_path, toml=f"{name} = {value}\n")
    assert message == f"setting {name!r} from {config} {expected}"
    var = f"LOADER_{name.upper()}"
    assert refused(tmp_path, env={var: str(value)}) == f"setting {name!r} from ${var} {expected}"
    assert (
        refused(tmp_path, overrides={name: value}) == f"setting {name!r} from override {expected}"
    )


@pytest.mark.parametrize(("name", "value", "bound"), OUTSIDE)
def test_settings_built_directly_or_replaced_check_the_bounds_too(name, value, bound):
    """A flag or an eval sweep that replaces a value cannot skip the check."""
    with pytest.raises(ConfigError) as raised:
        Settings(**{name: value})
    assert str(raised.value) == f"setting {name!r} must be {bound}, got {value!r}"
    with pytest.raises(ConfigError):
        Settings().replace(**{name: value})


@pytest.mark.parametrize(("name", "value"), INSIDE)
def test_the_bounds_themselves_are_accepted(name, value, tmp_path):
    config = tmp_path / "loader.toml"
    config.write_text(f"{name} = {value}\n", encoding="utf-8")
    settings, _ = resolve_settings(config, env={})
    assert getattr(settings, name) == value


def test_the_help_states_the_bounds():
    helps = setting_help()
    for name, _, _, bound in BOUNDS:
        assert helps[name].endswith(f" {bound[0].upper()}{bound[1:]}."), helps[name]


def test_settings_checked_by_their_consumers_get_no_second_bound():
    """The chunking settings, push_workers, the rerank and rewrite numbers keep their own checks
    (and messages, which name the flag or the related setting)."""
    bounded = {name for name, *_ in BOUNDS}
    own_checks = {
        *settings_in_scope("chunking"),
        "push_workers",
        "rerank_max_tokens",
        "rerank_batch_size",
        "rewrite_timeout",
        "rewrite_max_queries",
    }
    assert not bounded & own_checks
    helps = setting_help()
    assert not any(helps[name].endswith(("At least 1.", "At least 0.")) for name in own_checks)
    assert Settings().replace(push_workers=0, chunk_max_tokens=-1).push_workers == 0


# --- index names -----------------------------------------------------------------------------

BAD_INDEX_NAMES = [
    ("", "it is empty"),
    ("audit-*", "it holds '*'"),
    ("Upper", "it holds uppercase letters"),
    ("_x", "it starts with '_'"),
    ("-x", "it starts with '-'"),
    ("+x", "it starts with '+'"),
    (".", "it is '.'"),
    ("..", "it is '..'"),
    ("a,b", "it holds ','"),
    ("my docs", "it holds ' '"),
    ("a\tb", "it holds '\\t'"),
    ("a#b", "it holds '#'"),
    ("a:b", "it holds ':'"),
    ('a"b', "it holds '\"'"),
    ("a\\b", "it holds '\\\\'"),
    ("a/b", "it holds '/'"),
    ("a?b", "it holds '?'"),
    ("a<b>", "it holds '<', '>'"),
    ("a|b", "it holds '|'"),
    (
        "a" * 249,
        "it is 249 bytes long; at most 248 leave room for its versions' suffix -v<N> within "
        "OpenSearch's 255",
    ),
    ("é" * 125, "it is 250 bytes long; at most 248"),
]


@pytest.mark.parametrize(("name", "reason"), BAD_INDEX_NAMES)
def test_an_invalid_index_name_is_refused_wherever_it_comes_from(name, reason, tmp_path):
    def expected(origin: str) -> str:
        return f"setting 'index_name' from {origin} is not a valid index name ({reason}"

    toml = f"index_name = {json.dumps(name)}\n"  # a JSON string is a TOML basic string
    assert refused(tmp_path, toml=toml).startswith(expected(str(tmp_path / "loader.toml")))
    assert refused(tmp_path, overrides={"index_name": name}).startswith(expected("override"))
    if name:  # an empty variable counts as unset
        env = {"LOADER_INDEX_NAME": name}
        assert refused(tmp_path, env=env).startswith(expected("$LOADER_INDEX_NAME"))
    with pytest.raises(ConfigError, match="is not a valid index name"):
        Settings(index_name=name)


@pytest.mark.parametrize("name", ["docs", "kb-v1", "a.b", "x_y-z", "café", "a" * 248, "é" * 124])
def test_valid_index_names_are_accepted(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert Settings(index_name=name).index_name == name
    assert resolve_settings(None, env={"LOADER_INDEX_NAME": name})[0].index_name == name


def test_cli_index_flag_is_checked_before_any_request(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["apply", "--dry-run", "--index", "audit-*"])
    assert (result.exit_code, result.output) == (
        2,
        "Error: setting 'index_name' from override is not a valid index name (it holds '*'), "
        "got 'audit-*'\n",
    )


# --- tenant ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tenant", "problem"),
    [
        ("", "must not be empty or blank"),
        (" ", "must not be empty or blank"),
        ("\t\n", "must not be empty or blank"),
        (" acme", "must not start or end with whitespace"),
        ("acme ", "must not start or end with whitespace"),
        ("\x00", "must not hold the control character U+0000"),
        ("ac\x1fme", "must not hold the control character U+001F"),
    ],
)
def test_a_blank_padded_or_unprintable_tenant_is_refused(tenant, problem, tmp_path):
    """Push would write chunks under it that no search can find (a NUL is no name either)."""
    config = tmp_path / "loader.toml"
    toml = f"tenant = {json.dumps(tenant)}\n"
    expected = f"{problem}, got {tenant!r}"
    assert refused(tmp_path, toml=toml) == f"setting 'tenant' from {config} {expected}"
    assert refused(tmp_path, overrides={"tenant": tenant}) == (
        f"setting 'tenant' from override {expected}"
    )
    if tenant:
        assert refused(tmp_path, env={"LOADER_TENANT": tenant}) == (
            f"setting 'tenant' from $LOADER_TENANT {expected}"
        )


def test_a_tenant_with_inner_spaces_and_the_default_are_fine(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_settings(None, env={})[0].tenant == "default"
    assert resolve_settings(None, env={"LOADER_TENANT": "acme corp"})[0].tenant == "acme corp"
