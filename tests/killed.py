"""Real `loader` work SIGKILLed at a chosen point: what a lost machine or an OOM kill leaves,
with no cleanup run.

- ``push_killed_after_first_bulk``: a push killed once its first bulk request is written (a
  half-written document; an index left relaxed by --bulk-load);
- ``apply_killed_at_first_reindex_poll``: an apply killed while its reindex runs (the version the
  alias still points at write-blocked, the new version unfinished).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from loader.settings import Settings

# Each script builds Settings from argv[1] (keyword arguments as JSON), replaces one client call
# by one that prints its cue and sleeps until the test kills the process, then runs the work.
_PUSH = textwrap.dedent(
    """
    import json, sys, time
    from loader.cluster.client import connect
    from loader.ingest.sync import push
    from loader.settings import Settings

    settings = Settings(**json.loads(sys.argv[1]))
    client = connect(settings)
    send = client.bulk

    def bulk(*args, **kwargs):
        answer = send(*args, **kwargs)
        print("written", flush=True)
        time.sleep(600)  # killed here, one bulk request written

    client.bulk = bulk
    push(sys.argv[2], settings, client=client)
    """
)
_APPLY = textwrap.dedent(
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


def push_killed_after_first_bulk(settings: Settings, folder: Path, **overrides) -> None:
    """Push ``folder`` into ``settings.index_name`` (with ``overrides`` such as
    ``bulk_batch_size=4``) and SIGKILL the push once its first bulk request is written."""
    _run_until_killed(_PUSH, "written", settings, str(folder), overrides)


def apply_killed_at_first_reindex_poll(settings: Settings, dimension: int, **overrides) -> None:
    """Apply ``settings`` with ``overrides`` (a change that needs a new version, such as
    ``number_of_shards=2``) and SIGKILL the apply once it polls its reindex task."""
    _run_until_killed(_APPLY, "polling", settings, str(dimension), overrides)


def _run_until_killed(
    script: str, cue: str, settings: Settings, argument: str, overrides: dict
) -> None:
    arguments = {
        "opensearch_url": settings.opensearch_url,
        "index_name": settings.index_name,
        **overrides,
    }
    child = subprocess.Popen(
        [sys.executable, "-c", script, json.dumps(arguments), argument],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    try:
        assert child.stdout.readline() == f"{cue}\n"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
