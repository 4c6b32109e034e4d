from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from loader.cli import cli


def command_names() -> list[str]:
    return sorted(cli.commands)


def test_top_level_help_lists_every_command():
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for name in command_names():
        assert f"  {name}" in result.output


@pytest.mark.parametrize("name", command_names())
def test_every_command_has_help(name):
    result = CliRunner().invoke(cli, [name, "--help"])
    assert result.exit_code == 0, result.output
    assert cli.commands[name].help, f"`loader {name}` has no help text"
    assert "Usage: cli " in result.output or f"Usage: loader {name}" in result.output


@pytest.mark.parametrize("name", ["eval", "search", "explain", "serve"])
def test_the_help_of_every_command_that_reranks_names_all_three_rerankers(name):
    """Issue #52: their help named the cross-encoder (and at most keyword), never the learned
    model that ``rerank = auto`` falls back to."""
    result = CliRunner().invoke(cli, [name, "--help"], terminal_width=200)
    text = " ".join(result.output.split())
    for reranker in ("cross-encoder", "reranker_model", "learned_reranker", "keyword"):
        assert reranker in text, f"`loader {name} --help` does not name {reranker}"


def test_top_level_help_is_whole_and_shows_an_example():
    """Every command's line is whole (click cuts a long first sentence with '...'), no line is
    wider than the terminal, and one example shows the first hour."""
    result = CliRunner().invoke(cli, ["--help"], terminal_width=80)
    assert result.exit_code == 0
    lines = result.output.splitlines()
    commands = lines[lines.index("Commands:") + 1 :]
    assert not [line for line in commands if line.endswith("...")]
    assert not [line for line in lines if len(line) > 80]
    assert '    loader search "How long do refunds take for late deliveries?"' in lines
    assert "  up         Start a local single-node OpenSearch in Docker." in lines


@pytest.mark.parametrize("name", ["up", "down"])
def test_commands_no_index_concerns_offer_no_index_option(name):
    # --help last: were --index accepted again, the command would print its help, not run (a
    # real `loader down` stops the node every test uses).
    result = CliRunner().invoke(cli, [name, "--index", "kb", "--help"])
    assert result.exit_code == 2 and "No such option '--index'" in result.output


@pytest.mark.parametrize(
    "args", [["search", "refund"], ["explain", "refund"], ["chat"]], ids=lambda a: a[0]
)
def test_every_command_that_searches_takes_the_same_k_range(args):
    """search, explain and chat refuse the same --k values with the same message (the request's
    check, so --json gets it as JSON), before any cluster or model; 10000 is OpenSearch's
    index.max_result_window."""
    for value, message in (
        ("0", "k must be a positive whole number, got 0"),
        ("10001", "k must be at most 10000, got 10001"),
    ):
        result = CliRunner().invoke(cli, [*args, "--k", value, "--url", "http://127.0.0.1:9"])
        assert (result.exit_code, result.stderr) == (2, f"Error: {message}\n")


@pytest.mark.parametrize("name", sorted(set(command_names()) - {"serve"}))
def test_every_command_that_prints_a_result_takes_json(name):
    """One face for scripts; `serve` alone prints no result (it logs requests), as the README
    says."""
    command = cli.commands[name]
    # A group (`loader judgments`): each of its commands.
    commands = command.commands if isinstance(command, click.Group) else {name: command}
    for sub, each in commands.items():
        options = [opt for param in each.params for opt in getattr(param, "opts", [])]
        assert "--json" in options, f"`loader {name}` ({sub}) has no --json"


def test_up_prints_its_url_as_json(monkeypatch):
    import json

    import loader.cluster.local

    started = lambda image, port: f"http://127.0.0.1:{port}/{image}"  # noqa: E731 - a node's URL
    monkeypatch.setattr(loader.cluster.local, "start_local", started)
    # The image and the port reach start_local from the settings (set here, not the user's own).
    env = {"OPENSEARCH_IMAGE": "made-here:1", "LOADER_LOCAL_PORT": "9333"}
    result = CliRunner().invoke(cli, ["up", "--json"], env=env)
    url = "http://127.0.0.1:9333/made-here:1"
    assert (result.exit_code, json.loads(result.stdout)) == (0, {"url": url})


@pytest.mark.parametrize("name", command_names())
def test_every_option_of_every_command_has_help(name):
    """`loader <command> --help` explains every option it lists (--help itself included)."""
    context = click.Context(cli.commands[name], info_name=name)
    silent = [
        "/".join(param.opts)
        for param in cli.commands[name].get_params(context)
        if isinstance(param, click.Option) and not param.help
    ]
    assert not silent, f"`loader {name}` options without help: {', '.join(silent)}"


def test_settings_command_masks_secrets(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["settings"], env={"OPENSEARCH_PASSWORD": "s3cret-pw"})
    assert result.exit_code == 0
    assert "s3cret-pw" not in result.output
    assert "opensearch_password = '****'  [$OPENSEARCH_PASSWORD]" in result.output


def test_push_of_a_missing_folder_is_one_line(tmp_path):
    missing = tmp_path / "absent"
    result = CliRunner().invoke(cli, ["push", str(missing)])
    assert result.exit_code == 2
    assert result.output == (
        f"Error: {missing} is not a folder; `loader push` takes a folder of documents\n"
    )


@pytest.mark.parametrize(
    "args, exit_code",
    [
        (["search", "refund", "--no-rerank", "--json", "--url", "http://127.0.0.1:9"], 3),
        (["apply", "--dry-run", "--json", "--url", "http://127.0.0.1:9"], 3),
        (["search", "refund", "--no-rerank", "--json", "--k", "3", "--candidates", "0"], 2),
        (["settings", "--json", "--config", "/nonexistent/loader.toml"], 2),
    ],
)
def test_json_commands_print_their_error_as_json_on_stdout(args, exit_code):
    import json

    result = CliRunner().invoke(cli, args)
    assert result.exit_code == exit_code, result.output
    error = json.loads(result.stdout)
    assert error == {"error": error["error"], "exit_code": exit_code}
    assert result.stderr == f"Error: {error['error']}\n"


def test_ctrl_c_exits_130_as_a_shell_reports_it(monkeypatch, tmp_path):
    import loader.cli.cluster

    def interrupted(**_):
        raise KeyboardInterrupt

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(loader.cli.cluster, "resolve_settings", interrupted)
    result = CliRunner().invoke(cli, ["settings"])
    assert (result.exit_code, result.stderr) == (130, "interrupted\n")


def test_an_interrupted_push_says_to_run_it_again(monkeypatch, tmp_path):
    """A push stopped half-way is finished by the same push (guide/operating.md): say so."""
    import loader.cli.common

    def interrupted(*_, **__):
        raise KeyboardInterrupt

    monkeypatch.setattr(loader.cli.common, "resolve_settings", interrupted)
    (tmp_path / "docs").mkdir()
    result = CliRunner().invoke(cli, ["push", str(tmp_path / "docs")])
    assert result.exit_code == 130
    assert result.stderr == (
        "interrupted: what was written stays; run the same push again to finish it\n"
    )


def _library_defaults(name: str) -> dict[str, object]:
    """What the request object behind a training command defaults to, by option name."""
    from dataclasses import asdict, fields
    from pathlib import Path

    from loader.train.adapt import AdaptRequest
    from loader.train.finetune import FineTuneRequest

    if name == "adapt":
        request, renamed = AdaptRequest(out=Path("x")), {"held_out_share": "held_out"}
    else:
        request, renamed = FineTuneRequest(dataset="d", out=Path("x")), {}
    given = ("out", "dataset", "options")
    values = {f.name: getattr(request, f.name) for f in fields(request) if f.name not in given}
    values.update(asdict(request.options))  # --epochs, --learning-rate, --batch-size ...
    return {renamed.get(key, key): value for key, value in values.items()}


@pytest.mark.parametrize("name", ["adapt", "fine-tune"])
def test_training_options_default_to_what_the_library_defaults_to(name):
    """The CLI shows the training defaults without importing the training code (numpy, torch:
    `loader --help` would wait for them); both read ``loader.train.defaults``, and this keeps
    every option's default its request object's."""
    library = _library_defaults(name)
    command = {p.name: p.default for p in cli.commands[name].params if p.name in library}
    assert command == {key: library[key] for key in command}
    # Every request field with a default has its option (``scale``: the model's own; fine-tune
    # trains with the trainer's seed).
    assert set(library) - set(command) == {"scale"} | ({"seed"} if name == "fine-tune" else set())


def test_adapt_trains_on_the_tenant_setting_when_no_tenant_is_given(monkeypatch, tmp_path):
    """A project whose loader.toml says tenant = "acme" adapts on acme's chunks, not on the
    literal 'default' (issue #44): the command's request names the resolved tenant."""
    import loader.train.adapt

    asked = []

    def record(request, settings, **_):
        asked.append((request.tenant, settings.tenant))
        raise loader.train.adapt.ConfigError("stop here: the request is what this test checks")

    monkeypatch.chdir(tmp_path)
    (tmp_path / "loader.toml").write_text('tenant = "acme"\n', encoding="utf-8")
    monkeypatch.setattr(loader.train.adapt, "adapt_embedder", record)
    result = CliRunner().invoke(cli, ["adapt", "--out", str(tmp_path / "adapted")])
    assert result.exit_code == 2 and "stop here" in result.stderr
    result = CliRunner().invoke(cli, ["adapt", "--out", str(tmp_path / "a"), "--tenant", "b"])
    assert asked == [("acme", "acme"), ("b", "acme")]


def test_the_shared_tenant_option_resolves_the_setting_once_and_refuses_a_blank_one(
    monkeypatch, tmp_path
):
    """``tenant_option``: the tenant given, else the tenant setting; a blank one is bad input."""
    from loader.cli.common import settings_options
    from loader.cli.options import tenant_option

    @click.command()
    @settings_options
    @tenant_option("Tenant.")
    def show(settings, tenant):
        click.echo(tenant)

    monkeypatch.chdir(tmp_path)
    assert CliRunner().invoke(show, []).output == "default\n"
    (tmp_path / "loader.toml").write_text('tenant = "acme"\n', encoding="utf-8")
    assert CliRunner().invoke(show, []).output == "acme\n"
    assert CliRunner().invoke(show, ["--tenant", "b"]).output == "b\n"
    blank = CliRunner().invoke(show, ["--tenant", " "])
    assert blank.exit_code == 2 and "'--tenant'" in blank.output


# `loader adapt --json` with the library's first progress line, then a stop: what reaches stderr.
_PROGRESS_SCRIPT = """
import sys
import loader.train.adapt as adapt
from loader.cli import cli

def first_line_then_stop(request, settings, *, on_event=None, client=None):
    if on_event is not None:
        on_event("progress: 12 chunks of tenant 'default'")
    raise adapt.ConfigError("stopped after the first line")

adapt.adapt_embedder = first_line_then_stop
cli(["adapt", "--out", sys.argv[1], "--json", "--url", "http://127.0.0.1:9"])
"""


def _adapt_stderr(tmp_path, on_terminal: bool) -> tuple[str, str]:
    """stdout and stderr of the script above, its stderr a terminal (a pty) or a pipe."""
    from tests.terminal_run import script_output

    return script_output(
        _PROGRESS_SCRIPT, [str(tmp_path / "out")], tmp_path, on_terminal=on_terminal, exit_code=2
    )


def test_adapt_json_shows_progress_on_a_terminal_and_keeps_stdout_for_the_document(tmp_path):
    """`loader adapt --json` printed nothing for 37 minutes (issue #44): stdout is the JSON
    document, but progress goes to stderr when stderr is a terminal; to a pipe, not."""
    stdout, terminal = _adapt_stderr(tmp_path, on_terminal=True)
    assert "progress: 12 chunks of tenant 'default'" in terminal
    assert "progress" not in stdout and '"exit_code": 2' in stdout
    stdout, piped = _adapt_stderr(tmp_path, on_terminal=False)
    assert "progress" not in piped and "stopped after the first line" in piped


def test_show_progress_is_one_decision_for_every_long_command():
    import io

    from loader.terminal import show_progress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert show_progress(quiet=False, as_json=True, stream=Terminal()) is True
    assert show_progress(quiet=False, as_json=True, stream=io.StringIO()) is False
    assert show_progress(quiet=False, as_json=False, stream=io.StringIO()) is True
    assert show_progress(quiet=True, as_json=False, stream=Terminal()) is False


def test_adapt_prints_the_measure_of_each_kind(monkeypatch, tmp_path):
    """Without --json, the verdict and each kind's MRR, one line each (``kinds`` in --json)."""
    import loader.train.adapt
    from loader.train.adapt import AdaptResult

    result = AdaptResult(
        False, None, {"heading": 0, "title": 30, "cloze": 30}, 48, 0, 12, 0.5, 0.55, 0.01, 6,
        1.0, "12 held-out pairs: ...; worse on cloze (0.6000 -> 0.5000)", {"title": 24},
        "12 held-out pairs",
        {"title": {"queries": 6, "stock_mrr": 0.4, "adapted_mrr": 0.6},
         "cloze": {"queries": 6, "stock_mrr": 0.6, "adapted_mrr": 0.5}},
    )  # fmt: skip
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(loader.train.adapt, "adapt_embedder", lambda *_, **__: result)
    done = CliRunner().invoke(cli, ["adapt", "--out", str(tmp_path / "a"), "-q"])
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert lines[1:] == [
        "12 held-out pairs: ...; worse on cloze (0.6000 -> 0.5000)",
        "  title: 6 queries, MRR@10 0.4000 stock, 0.6000 adapted",
        "  cloze: 6 queries, MRR@10 0.6000 stock, 0.5000 adapted",
        "nothing written: the stock model stays",
    ]
