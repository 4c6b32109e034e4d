"""printable: every line the CLI prints is one line, whatever the file names and settings hold."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from loader.cli import cli
from loader.terminal import printable, printable_lines

FORGED = "forged\nfailed ok.md: everything lost.exe"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (FORGED, "forged\\nfailed ok.md: everything lost.exe"),
        ("a\rb\tc", "a\\rb\\tc"),
        ("\x00\x07\x1b[31mred\x1b[0m", "\\x00\\x07\\x1b[31mred\\x1b[0m"),
        ("del\x7f", "del\\x7f"),
        ("c1\x85\x9b", "c1\\x85\\x9b"),  # NEL and CSI
        ("line\u2028para\u2029", "line\\u2028para\\u2029"),
        ("r\u202egnp.exe", "r\\u202egnp.exe"),  # right-to-left override: "rexe.png"
        ("\u202a\u202b\u202c\u202d", "\\u202a\\u202b\\u202c\\u202d"),
        ("\u2066\u2067\u2068\u2069", "\\u2066\\u2067\\u2068\\u2069"),
        # The marks: a right-to-left mark before digits or a path reorders what follows it.
        ("\u200e\u200f\u061c", "\\u200e\\u200f\\u061c"),
        ("refund\u200f 30 days.exe", "refund\\u200f 30 days.exe"),
    ],
)
def test_control_characters_are_escaped(text: str, shown: str) -> None:
    assert printable(text) == shown
    assert len(printable(text).splitlines()) <= 1


@pytest.mark.parametrize(
    "text",
    ["", "plain ascii", "Café – naïve 日本語 😀", "back\\slash", "a > b > c", "\u00a0nbsp"],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert printable(text) == text


def test_every_unsafe_character_is_escaped_and_nothing_else() -> None:
    unsafe = {*range(0x00, 0x20), *range(0x7F, 0xA0), 0x2028, 0x2029}
    unsafe |= {*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C}
    for code in range(0x3000):
        char = chr(code)
        if code in unsafe:
            assert printable(char).startswith("\\") and printable(char).isascii(), hex(code)
        else:
            assert printable(char) == char, hex(code)


def test_printable_lines_keeps_the_lines_meant_and_escapes_the_rest() -> None:
    table = "| name | value |\n| a\rb | \x1b[2J |"
    assert printable_lines(table) == "| name | value |\n| a\\rb | \\x1b[2J |"


def test_an_error_line_naming_a_forged_path_stays_one_line(tmp_path) -> None:
    missing = tmp_path / FORGED
    result = CliRunner().invoke(cli, ["push", str(missing)])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1
    assert result.output.startswith("Error: ")
    assert "forged\\nfailed ok.md: everything lost.exe is not a folder" in result.output


def test_settings_lines_escape_the_config_file_name(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "evil\nindex_name = 'forged'  [default].toml"
    config.write_text('index_name = "kb\\u202egnp"\n', encoding="utf-8")
    result = CliRunner().invoke(cli, ["settings", "--config", str(config)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert not any(line.startswith("index_name = 'forged'") for line in lines)
    line = next(line for line in lines if line.startswith("index_name = "))
    assert "\u202e" not in result.output
    assert line.startswith("index_name = 'kb\\u202egnp'  [")
    assert "evil\\nindex_name" in line
    # Every line is a setting or its indented help.
    assert all(line.startswith("    ") or " = " in line for line in lines)


def test_log_lines_of_a_command_are_printable_too():
    """A file name in a log record (e.g. a reader's warning) cannot forge a second line."""
    import io
    import logging

    from loader.cli.common import _mask_secrets_in_logs

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        _mask_secrets_in_logs(["s3cret-pw"])
        logging.getLogger("loader.test").warning(
            "skipped %s (key s3cret-pw)", "forged\nfailed ok.md"
        )
    finally:
        root.removeHandler(handler)
    assert stream.getvalue() == "skipped forged\\nfailed ok.md (key ****)\n"


def test_an_error_line_naming_a_path_with_a_bidi_mark_shows_the_mark(tmp_path) -> None:
    missing = tmp_path / "kb\u200f\u061cdm.exe"
    result = CliRunner().invoke(cli, ["push", str(missing)])
    assert result.exit_code == 2
    assert "\u200f" not in result.output and "\u061c" not in result.output
    assert "kb\\u200f\\u061cdm.exe is not a folder" in result.output
