"""A real `loader apply` SIGKILLed at the first poll of its reindex: what a lost machine or an
OOM kill leaves (the version the alias still points at write-blocked, the new version unfinished,
no cleanup run)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

from loader.settings import Settings

# Runs `apply_config` in a child process whose client prints "polling" at the first poll of the
# reindex task and sleeps until the test kills it. argv: the Settings' keyword arguments as JSON,
# the vector dimension.
_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from loader.cluster.client import connect
    from loader.index.apply import apply_config
    from loader.settings import Settings

    settings = Settings(**json.loads(sys.argv[1]))
    client = connect(settings)

    def get(*args, **kwargs):
        print("polling", flush=True)
        time.sleep(600)  # killed here: the source blocked, the alias not moved

    client.tasks.get = get
    apply_config(settings, dimension=int(sys.argv[2]), client=client)
    """
)


def apply_killed_at_first_reindex_poll(settings: Settings, dimension: int, **overrides) -> None:
    """Apply ``settings`` with ``overrides`` (a change that needs a new version, such as
    ``number_of_shards=2``) and SIGKILL the apply once it polls its reindex task."""
    arguments = {
        "opensearch_url": settings.opensearch_url,
        "index_name": settings.index_name,
        **overrides,
    }
    child = subprocess.Popen(
        [sys.executable, "-c", _SCRIPT, json.dumps(arguments), str(dimension)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    try:
        assert child.stdout.readline() == "polling\n"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
