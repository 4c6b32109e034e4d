"""Scratch folders in the model caches: each file made there (an export, an int8 copy, an
extraction) is written in a scratch folder beside its place, then renamed into it or deleted.

A process killed half-way leaves its scratch folder behind, a model's worth of bytes that
nothing reads (one from a killed export was found in ``~/.cache/loader/ml``). So making one
first removes the folders with the same prefix in the same place that are older than
``STALE_AFTER``: far longer than any of these steps takes, so a live one is never touched.
"""

from __future__ import annotations

import glob
import logging
import shutil
import tempfile
import time
from pathlib import Path

log = logging.getLogger(__name__)

STALE_AFTER = 24 * 3600  # seconds; an export or quantization takes seconds, an extraction less


def scratch_folder(parent: Path, prefix: str) -> Path:
    """A new empty folder ``parent/<prefix><random>``, after removing that place's stale ones."""
    parent.mkdir(parents=True, exist_ok=True)
    remove_stale(parent, prefix)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))


def remove_stale(parent: Path, prefix: str, now: float | None = None) -> list[Path]:
    """Delete the folders ``parent/<prefix>*`` last changed more than ``STALE_AFTER`` ago.

    Returns:
        The folders deleted.
    """
    cutoff = (time.time() if now is None else now) - STALE_AFTER
    removed = []
    for path in parent.glob(glob.escape(prefix) + "*"):
        try:
            stale = path.is_dir() and not path.is_symlink() and path.stat().st_mtime < cutoff
        except OSError:  # gone meanwhile
            continue
        if stale:
            shutil.rmtree(path, ignore_errors=True)
            log.info("removed %s, left by a process that stopped half-way", path)
            removed.append(path)
    return removed
