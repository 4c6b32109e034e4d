"""Files the user names (a chat history, api_keys_file, loader.toml, an eval results file) are
read with limits: regular files only, a size cap, a clear error naming the file, exit code 2."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from loader.errors import ConfigError, InputError, LoaderError
from loader.eval.compare import load_results
from loader.query.conversation import load_history
from loader.resolve import resolve_settings
from loader.serve.auth import ApiKeys
from loader.userfile import read_user_bytes
from tests.paths import REPO

DIGITS = "1" * 100_000  # past Python's int-string conversion limit (4300 digits)


def raised_within(call: Callable[[], object], fifo: Path | None = None) -> LoaderError:
    """The error ``call`` raises, which it must raise within 20 s (a FIFO read would wait for a
    writer forever: the test then opens ``fifo`` for writing to end it, and fails)."""
    outcome: list[BaseException | None] = [None]

    def run() -> None:
        try:
            call()
        except BaseException as exc:
            outcome[0] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(20)
    if thread.is_alive() and fifo is not None:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(5)
        pytest.fail(f"reading {fifo} waited for a writer")
    assert isinstance(outcome[0], LoaderError), outcome[0]
    return outcome[0]


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "named.pipe"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize(
    ("read", "name", "error"),
    [
        (load_history, "history file", ConfigError),
        (ApiKeys.from_file, "api_keys_file", ConfigError),
        (lambda path: resolve_settings(path, env={}), "config file", ConfigError),
        (load_results, "results file", InputError),
    ],
)
def test_a_fifo_a_device_or_a_huge_number_is_an_error_naming_the_file(
    read, name: str, error: type[LoaderError], fifo: Path, tmp_path: Path
) -> None:
    raised = raised_within(lambda: read(fifo), fifo)
    assert isinstance(raised, error)
    assert str(raised).startswith(f"{name} {fifo} is a named pipe, not a regular file")
    raised = raised_within(lambda: read("/dev/zero"))
    assert str(raised).startswith(f"{name} /dev/zero is a character device, not a regular file")

    huge = tmp_path / "huge"
    huge.write_text(
        f'[keys]\n"k" = {DIGITS}\n' if name == "api_keys_file" else
        f"a = {DIGITS}\n" if name == "config file" else f"[{DIGITS}]",
        encoding="utf-8",
    )  # fmt: skip
    raised = raised_within(lambda: read(huge))
    assert isinstance(raised, error)
    assert str(huge) in str(raised)
    if name != "api_keys_file":  # which never quotes the file's content, not even its reason
        assert "a number has more than 4300 digits" in str(raised)


def test_a_file_past_the_size_cap_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "history.json"
    path.write_bytes(b"[" + b" " * 2000 + b"]")
    with pytest.raises(ConfigError, match=r"^history file .* is larger than 1,000 bytes \(2,002\)"):
        read_user_bytes(path, "history file", max_bytes=1000)
    assert read_user_bytes(path, "history file", max_bytes=2002) == path.read_bytes()


def test_loader_chat_with_a_fifo_or_a_huge_number_for_history_exits_2(
    fifo: Path, tmp_path: Path
) -> None:
    huge = tmp_path / "history.json"
    huge.write_text(f'[{{"role": "user", "content": "x", "n": {DIGITS}}}]', encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENSEARCH_", "LOADER_"))}
    env["PYTHONPATH"] = str(REPO)
    for history, message in (
        (fifo, f"history file {fifo} is a named pipe, not a regular file"),
        ("/dev/zero", "history file /dev/zero is a character device, not a regular file"),
        (huge, f"history file {huge} is not valid JSON (a number has more than 4300 digits)"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "loader", "chat", "--history", str(history)],
            cwd=tmp_path,
            env={**env, "OPENSEARCH_URL": "http://127.0.0.1:9"},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert (done.returncode, done.stderr.strip()) == (2, f"Error: {message}")
