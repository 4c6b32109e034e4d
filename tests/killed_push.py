"""A real push SIGKILLed right after its first bulk request: what a lost machine or an OOM kill
leaves in the index (a half-written document, an index left relaxed by --bulk-load)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from loader.settings import Settings

# Runs `push` in a child process whose client answers its first bulk request, prints "written"
# and sleeps until the test kills it. argv: the Settings' keyword arguments as JSON, the folder.
_SCRIPT = textwrap.dedent(
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


def push_killed_after_first_bulk(settings: Settings, folder: Path, **overrides) -> None:
    """Push ``folder`` into ``settings.index_name`` (with ``overrides`` such as
    ``bulk_batch_size=4``) and SIGKILL the push once its first bulk request is written."""
    arguments = {
        "opensearch_url": settings.opensearch_url,
        "index_name": settings.index_name,
        **overrides,
    }
    child = subprocess.Popen(
        [sys.executable, "-c", _SCRIPT, json.dumps(arguments), str(folder)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    try:
        assert child.stdout.readline() == "written\n"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
