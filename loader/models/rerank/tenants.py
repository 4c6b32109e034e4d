"""Which learned model a tenant's search uses: one model per tenant, never another tenant's.

What one tenant's judged questions teach hurts another collection (issue 53: SciFact's model on
technical abstracts lost 0.012 nDCG@10), so the folder ``learned_reranker`` names holds one
model folder per tenant, each written by ``loader learn --tenant T --out <folder>``::

    models/learned/          <- learned_reranker (and loader learn --out)
      acme/                  <- tenant acme's model: learned_reranker.txt, provenance.json
      eval/                  <- a BEIR folder's model (loader eval searches as tenant eval)
      a%2Fb/                 <- tenant "a/b" (``tenant_folder_name``)

A search of tenant T uses ``<folder>/<T>/`` when it holds a model learnt from T (the tenant its
``provenance.json`` records), else no learned model. A model reranks another tenant's searches
only when ``learned_reranker_tenants`` lends it by name (``"B=A"``: tenant B's searches use
tenant A's model).

A folder holding ``learned_reranker.txt`` itself (the layout before per-tenant models) is the
model of the tenant its provenance records, and of no other unless lent the same way.

Everything here reads files only (a few bytes of JSON, cached by modification time), so
``rerank = auto`` still decides before any model is imported.

Example::

    found = tenant_model("models/learned", "acme", "")
    found.folder, found.candidate_depth, found.base_mode  # '.../acme', 50, 'hybrid-zscore'
    tenant_model("models/learned", "globex", "")           # a str: why globex has none
"""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loader.errors import ConfigError
from loader.settings import parse_tenant_map
from loader.userfile import read_user_bytes

# Must match check.LEARNED_MODEL_FILE and learned.PROVENANCE_FILE (check imports this module).
MODEL_FILE = "learned_reranker.txt"
PROVENANCE = "provenance.json"
MAX_PROVENANCE_BYTES = 2_000_000  # as learned_files.MAX_PROVENANCE_BYTES
# A tenant's folder name: its name, each character but letters, digits, "-", "_" and a "."
# that is not the first one percent-encoded (UTF-8 bytes), so no name is ".", "..", hidden, or
# holds a separator, and two tenants never share a folder.
_PLAIN = re.compile(r"[A-Za-z0-9_-]")
MAX_FOLDER_NAME = 200  # bytes; file systems allow 255


def tenant_folder_name(tenant: str) -> str:
    """The folder name of ``tenant``'s model: a single path component, never ``.`` or ``..``.

    >>> tenant_folder_name("acme"), tenant_folder_name("../x"), tenant_folder_name("a.b")
    ('acme', '%2E%2E%2Fx', 'a.b')

    Raises:
        ConfigError: a blank tenant, or one whose folder name would be too long.
    """
    if not isinstance(tenant, str) or not tenant.strip():
        raise ConfigError(f"tenant {tenant!r:.60}: a learned model needs a tenant's name")
    parts = []
    for position, char in enumerate(tenant):
        if _PLAIN.fullmatch(char) or (char == "." and position > 0):
            parts.append(char)
        else:
            parts.append("".join(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass")))
    name = "".join(parts)
    if len(name) > MAX_FOLDER_NAME:
        raise ConfigError(
            f"tenant {tenant[:40]!r}...: its model folder's name would be {len(name)} characters "
            f"(at most {MAX_FOLDER_NAME}); lend it another tenant's model with "
            "learned_reranker_tenants"
        )
    return name


def tenant_model_folder(root: str | Path, tenant: str) -> Path:
    """``<root>/<tenant_folder_name(tenant)>``: inside ``root`` whatever the tenant's name.

    Raises:
        ConfigError: as ``tenant_folder_name``.
    """
    base = Path(root).expanduser()
    folder = base / tenant_folder_name(tenant)
    assert folder.parent == base and folder.name not in (".", ".."), folder  # one component
    return folder


@dataclass(frozen=True)
class TenantModel:
    """The learned model a tenant's searches use.

    Attributes:
        folder: the model's folder (``learned_reranker.txt`` and ``provenance.json``).
        tenant: the tenant it learnt from.
        candidate_depth: the candidates per question it learnt from (``None``: a model trained
            before it was recorded).
        base_mode: the search mode whose candidates it learnt from (``""``: not recorded).
        second_reader: the second reader whose cosine it learnt from (``""``: one reader).
    """

    folder: str
    tenant: str
    candidate_depth: int | None = None
    base_mode: str = ""
    second_reader: str = ""


# Each model folder's facts as last read whole: while its provenance.json cannot be read (half
# copied, damaged), the model read before keeps serving (``load_learned``), with what it learnt.
_last_facts: dict[str, dict[str, Any]] = {}
MAX_FOLDERS_KEPT = 4096


def _remember(folder: str, facts: dict[str, Any]) -> None:
    if folder not in _last_facts and len(_last_facts) >= MAX_FOLDERS_KEPT:
        _last_facts.pop(next(iter(_last_facts)))
    _last_facts[folder] = facts


@functools.lru_cache(maxsize=256)
def _provenance(path: str, modified_ns: int) -> dict[str, Any]:
    # Read as ``learned_files`` reads it: a FIFO or a huge file in its place is refused at once,
    # never waited on (this runs at each of a server's rerank requests).
    raw = read_user_bytes(path, "learned reranker provenance", max_bytes=MAX_PROVENANCE_BYTES)
    data = json.loads(raw.decode("utf-8"))
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data


def recorded_facts(folder: Path) -> dict[str, Any]:
    """What a model's ``provenance.json`` records of where it may rerank: ``tenant``,
    ``candidate_depth``, ``base_mode``, ``second_reader`` (``model`` part; ``""`` for a
    model of one reader's features). A model trained before they were
    recorded: its tenant is its sources' one tenant, if they had one.

    Raises:
        ValueError, OSError: the provenance is missing or unreadable.
    """
    path = folder / PROVENANCE
    try:
        data = _provenance(str(path), path.stat().st_mtime_ns)
    except ConfigError as exc:  # read_user_bytes: not a regular file, too large
        raise ValueError(str(exc)) from None
    model = data.get("model") or {}
    tenant = model.get("tenant")
    if tenant is None:  # before per-tenant models: its sources say whose questions they were
        tenants = {str(s.get("tenant")) for s in data.get("sources") or () if isinstance(s, dict)}
        tenant = tenants.pop() if len(tenants) == 1 else None
    depth = model.get("candidate_depth")
    return {
        "tenant": tenant if isinstance(tenant, str) else None,
        "candidate_depth": depth if isinstance(depth, int) and depth > 0 else None,
        "base_mode": str(model.get("base_mode") or ""),
        "second_reader": str(model.get("second_reader") or "") if model.get("readers") == 2 else "",
    }


def tenant_model(
    root: str, tenant: str, lent: str, setting: str = "learned_reranker"
) -> TenantModel | str:
    """The model ``tenant``'s searches use under ``root`` (the folder ``setting`` names), or
    why there is none (a line naming the setting and the fix). ``lent``:
    ``learned_reranker_tenants``. Reads files only."""
    base = Path(root).expanduser()
    if not base.is_dir():
        return f"{setting} {root!r}: there is no folder {base} (train one with `loader learn`)"
    owner = parse_tenant_map(lent).get(tenant, tenant)
    # Whatever stands where the model file was (a folder, a FIFO, a link to a device) is a
    # damaged model, which the reader refuses as the server's fault (and the model read before
    # keeps serving), not a tenant without one.
    if os.path.lexists(base / MODEL_FILE):  # one model, the layout before per-tenant models
        folder = base
    else:
        try:
            folder = tenant_model_folder(base, owner)
        except ConfigError as exc:
            return f"{setting} {root!r}: {exc}"
        if not os.path.lexists(folder / MODEL_FILE):
            return (
                f"{setting} {root!r} holds no model for tenant {owner!r} (no {folder / MODEL_FILE}"
                f"; `loader learn --tenant {owner} --out {root}` writes one)"
            )
    try:
        facts = recorded_facts(folder)
    except (OSError, ValueError) as exc:
        facts = _last_facts.get(str(folder))
        if facts is None and folder == base:  # the old layout: whose model is unknown
            return f"{setting} {root!r}: {folder / PROVENANCE} is missing or unreadable ({exc})"
        if facts is None:  # the tenant's own folder: the reader refuses the files (a 503)
            return TenantModel(str(folder), owner)
    else:
        _remember(str(folder), facts)
    if facts["tenant"] != owner:
        learnt = facts["tenant"]
        whose = f"tenant {learnt!r}" if learnt else "no single tenant"
        lend = f'learned_reranker_tenants = "{tenant}={learnt}" lends it' if learnt else "retrain"
        return (
            f"{setting} {root!r}: the model in {folder} was learnt from {whose}, not {owner!r}: "
            f"it never reranks another tenant's searches ({lend})"
        )
    return TenantModel(
        str(folder), owner, facts["candidate_depth"], facts["base_mode"], facts["second_reader"]
    )
