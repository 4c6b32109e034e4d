"""Where `loader learn` writes a model: ``<out>/<tenant>/`` (``loader.models.rerank.tenants``),
the folder of the learned rerankers holding one model folder per tenant, each retrained in
place; the model is the one tenant's its sources are searched as.

Example::

    folder = model_folder(Path("models/learned"), "", model_tenant(sources))  # .../acme
    write_model(folder, booster, provenance)
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from loader.errors import ConfigError
from loader.models.rerank.check import LEARNED_MODEL_FILE
from loader.models.rerank.learned_files import (
    MAX_MODEL_BYTES,
    PROVENANCE_FILE,
    model_file_facts,
)
from loader.models.rerank.tenants import tenant_model_folder
from loader.train.sources import Source


def check_out(out: Path) -> None:
    """``out``, the folder of the learned rerankers, must be new, empty, or hold only their
    folders (one per tenant)."""
    if out.is_file():
        raise ConfigError(f"--out {out} is a file; give a folder for the learned rerankers")
    if (out / LEARNED_MODEL_FILE).is_file():
        raise ConfigError(
            f"--out {out} holds one model itself (the layout before one model per tenant): move "
            f"it to {out}/<its tenant>/, or give another folder"
        )
    others = (
        sorted(entry.name for entry in out.iterdir() if not entry.is_dir()) if out.is_dir() else []
    )
    if others:
        raise ConfigError(
            f"--out {out} is a folder that holds something else than a learned reranker's "
            f"folders ({others[0]}); give a new folder"
        )


def model_folder(out: Path | None, learned_reranker: str, tenant: str) -> Path:
    """``<out>/<tenant>/`` (``out``: else the ``learned_reranker`` setting): new, empty, or a
    learned model's folder (retrained in place).

    Raises:
        ConfigError: no ``--out`` nor ``learned_reranker``; a folder of something else.
    """
    if out is None and not learned_reranker:
        raise ConfigError(
            "give --out, the folder of the learned rerankers (one model folder per tenant), or "
            "set learned_reranker"
        )
    root = out if out is not None else Path(learned_reranker)
    check_out(root.expanduser())
    folder = tenant_model_folder(root, tenant)
    if folder.is_file() or (
        folder.is_dir() and any(folder.iterdir()) and not (folder / LEARNED_MODEL_FILE).is_file()
    ):
        raise ConfigError(
            f"{folder}, tenant {tenant!r}'s model folder, holds something else than a learned "
            "reranker; move it away, or give another --out"
        )
    return folder


def model_tenant(sources: list[Source]) -> str:
    """The one tenant the sources' questions are searched as: the model is that tenant's.

    Raises:
        ConfigError: several (a BEIR folder's are tenant ``eval``, a questions file's --tenant).
    """
    tenants = sorted({source.tenant for source in sources})
    if len(tenants) != 1:
        raise ConfigError(
            f"the sources are searched as tenants {', '.join(map(repr, tenants))}, and a learned "
            "model is one tenant's: learn each tenant's from its own sources (a BEIR folder's "
            "are tenant 'eval', a questions file's --tenant)"
        )
    return tenants[0]


def write_model(out: Path, booster: Any, provenance: dict[str, Any]) -> dict[str, Any]:
    """The booster and its provenance, written beside each other and moved into ``out`` last;
    the provenance records the booster file's trees, size and SHA-256, which every reader checks
    (``loader.models.rerank.learned_files``). Returns the provenance written.

    Raises:
        ConfigError: the booster is larger than a reader accepts (fewer ``--rounds``).
    """
    data = booster.model_to_string().encode("utf-8")
    if len(data) > MAX_MODEL_BYTES:
        raise ConfigError(
            f"the trained booster is {len(data):,} bytes, more than the {MAX_MODEL_BYTES:,} a "
            "reader accepts; train fewer --rounds"
        )
    facts = {"trees": data.count(b"\nTree="), **model_file_facts(data)}  # what a reader checks
    provenance = {**provenance, "model": {**provenance["model"], **facts}}
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".learn-", dir=out))
    try:
        (scratch / LEARNED_MODEL_FILE).write_bytes(data)
        text = json.dumps(provenance, indent=2, default=float) + "\n"
        (scratch / PROVENANCE_FILE).write_text(text, encoding="utf-8")
        # The provenance first: a reader that finds the new booster finds its facts too (one
        # that finds the new provenance beside the old booster refuses the pair, and keeps the
        # model it holds until the booster follows).
        (scratch / PROVENANCE_FILE).replace(out / PROVENANCE_FILE)
        (scratch / LEARNED_MODEL_FILE).replace(out / LEARNED_MODEL_FILE)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return provenance
