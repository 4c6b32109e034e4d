"""Run a Python script as a user's command runs: its stderr a terminal (a pty) or a pipe, for the
tests that check progress shows on a terminal and stays quiet for scripts."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

from tests.paths import REPO


def script_output(
    script: str, args: list[str], cwd: Path, *, on_terminal: bool, exit_code: int
) -> tuple[str, str]:
    """stdout and stderr of ``python -c script args...``, its stderr a pty when ``on_terminal``
    (the terminal's side read to its end) or a pipe; fails unless it exits ``exit_code``."""
    master, slave = pty.openpty() if on_terminal else (None, subprocess.PIPE)
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=cwd, env={**os.environ, "PYTHONPATH": str(REPO)}, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=slave, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == exit_code, done
    if not on_terminal:
        return done.stdout.decode(), done.stderr.decode()
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the terminal's other end is closed: all read
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    return done.stdout.decode(), b"".join(chunks).decode()
