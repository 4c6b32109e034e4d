"""Which reranker a search uses, and whether ``reranker_model`` is a cross-encoder on this
machine, judged without loading it (``choose_reranker``: the keyword reranker, a learned model's
folder, a cross-encoder, in that order; ``rerank = auto`` falls back from a cross-encoder that is
not here to the learned model ``learned_reranker`` names).

Loading a cross-encoder imports torch and sentence-transformers (seconds); a name that is nowhere
on disk used to cost that and a failed attempt to reach a model hub (20 s) before the error. This
module reads only the file system, so ``rerank = "auto"`` decides in microseconds and an explicit
rerank without a model fails at once:

- a folder (a path, or a name the embedding registry resolves to a folder) needs ``config.json``;
- any other name (``cross-encoder/ms-marco-MiniLM-L-6-v2``) needs a snapshot with a
  ``config.json`` in the Hugging Face cache (``$HF_HUB_CACHE``, ``$HF_HOME/hub`` or
  ``~/.cache/huggingface/hub``), where sentence-transformers finds it offline.

Its ``config.json`` must also declare one output (a relevance score), as a reranker needs.

Example::

    reranker_problem("cross-encoder/ms-marco-MiniLM-L-6-v2")
    # "reranker_model 'cross-encoder/ms-marco-MiniLM-L-6-v2' is neither a folder nor in the
    #  model cache (/root/.cache/huggingface/hub) ..."
    reranker_problem("/models/my-cross-encoder")   # None: it has a config.json, one label
"""

from __future__ import annotations

import functools
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from loader.errors import ConfigError, RerankerUnavailableError
from loader.models.registry import known_spec
from loader.models.rerank.tenants import MODEL_FILE, TenantModel, tenant_model
from loader.settings import KEYWORD_RERANK, LEARNED_RERANK

if TYPE_CHECKING:
    from loader.settings import Settings

log = logging.getLogger(__name__)

# The kinds of reranker (``RerankChoice.kind``; each reranker's ``kind``).
CROSS_ENCODER, KEYWORD, LEARNED = "cross-encoder", "keyword", "learned"
# The file that makes a folder a learned reranker (``loader learn --out`` writes it).
LEARNED_MODEL_FILE = MODEL_FILE

# What the message suggests: a folder that holds a cross-encoder, or no rerank.
_FIX = (
    "set reranker_model (LOADER_RERANKER_MODEL) to a local CrossEncoder folder, or rerank = off "
    "(--no-rerank)"
)


def hub_cache() -> Path:
    """The Hugging Face model cache sentence-transformers reads offline."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or str(Path.home() / ".cache" / "huggingface")
    return Path(home) / "hub"


def _cached_config(name: str) -> Path | None:
    """The ``config.json`` of a cached snapshot of hub model ``name``, or ``None``."""
    folder = hub_cache() / f"models--{name.replace('/', '--')}" / "snapshots"
    if not folder.is_dir():
        return None
    return next(iter(sorted(folder.glob("*/config.json"))), None)


def _model_folder(name: str) -> str:
    """A name the embedding registry knows resolves to its folder (the tests build a
    cross-encoder on the bundled MiniLM); any other name stays as it is."""
    if known_spec(name) is None:
        return name
    from loader.models.embedding import resolve_model_path  # numpy: only for these names

    return resolve_model_path(name)


def _labels_problem(name: str, config: Path) -> str | None:
    """What ``config.json`` says against a reranker: several output labels, or unreadable."""
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return f"reranker_model {name!r}: {config} cannot be read ({exc})"
    if not isinstance(data, dict):
        return f"reranker_model {name!r}: {config} is not a JSON object; {_FIX}"
    # Without either, transformers' default decides; the load then says more than a guess here.
    labels = data.get("num_labels") or len(data.get("id2label") or {}) or 1
    if labels != 1:
        return (
            f"reranker_model {name!r} has {labels} output labels; a reranker needs a "
            "CrossEncoder with one relevance score (num_labels=1)"
        )
    return None


def reranker_problem(name: str) -> str | None:
    """Why ``name`` (the ``reranker_model`` setting) cannot be loaded as a cross-encoder here, or
    ``None`` when it looks loadable: a folder, or a cached hub model, with a ``config.json`` of
    one output label. Reads files only; never imports torch.

    Example::

        reranker_problem("no/such-model")   # "reranker_model 'no/such-model' is neither ..."
    """
    from loader.models.torch_extra import INSTALL, torch_extra_missing

    if torch_extra_missing():
        return (
            f"reranker_model {name!r} is a cross-encoder, which needs torch and "
            f"sentence-transformers, left out of the base install ({INSTALL})"
        )
    path = Path(_model_folder(name)).expanduser()
    if path.is_dir():
        config = path / "config.json"
        if not config.is_file():
            return (
                f"reranker_model {name!r}: folder {path} has no config.json, so it is not a "
                f"transformers model; {_FIX}"
            )
        return _labels_problem(name, config)
    if path.exists():
        return f"reranker_model {name!r}: {path} is a file, not a model folder; {_FIX}"
    if name.startswith((".", "/", "~")):  # a path, not a hub name
        return f"reranker_model {name!r}: there is no folder {path}; {_FIX}"
    config = _cached_config(name)
    if config is None:
        return (
            f"reranker_model {name!r} is neither a folder nor in the model cache "
            f"({hub_cache()}), and there is no model hub here; {_FIX}"
        )
    return _labels_problem(name, config)


def require_reranker(name: str) -> None:
    """Refuse a rerank that was asked for when ``name`` is no cross-encoder here (at once, never
    after a 20-s attempt to load it).

    Raises:
        RerankerUnavailableError: exit code 6, HTTP 422; the public reason names the settings,
            not the server's folders.
    """
    problem = reranker_problem(name)
    if problem:
        raise RerankerUnavailableError(
            f"rerank is on but {problem}",
            public_reason=f"rerank: reranker_model {name!r} is not available on this server; "
            'send "rerank": false, or leave rerank out (the server then reranks when it can)',
        )


def learned_problem(folder: str, setting: str = "learned_reranker") -> str | None:
    """Why ``folder`` is no learned reranker here (``loader learn --out``), or ``None``: it must
    hold ``LEARNED_MODEL_FILE``. Reads the file system only; the feature version is checked when
    the model loads (``loader.models.rerank.learned``)."""
    path = Path(folder).expanduser()
    if not path.is_dir():
        return f"{setting} {folder!r}: there is no folder {path} (train one with `loader learn`)"
    if not (path / LEARNED_MODEL_FILE).is_file():
        return (
            f"{setting} {folder!r}: folder {path} has no {LEARNED_MODEL_FILE}, so it is no "
            "learned reranker (`loader learn --out` writes one)"
        )
    return None


def is_learned_folder(name: str) -> bool:
    """Whether ``name`` (``reranker_model``) is a folder ``loader learn`` wrote."""
    return bool(name) and (Path(name).expanduser() / LEARNED_MODEL_FILE).is_file()


@dataclass(frozen=True)
class RerankChoice:
    """The reranker a search with these settings uses, or why none can run.

    Attributes:
        kind: ``cross-encoder``, ``keyword``, ``learned``, or ``""`` (none available).
        model: the cross-encoder's name, the learned model's folder, ``keyword``.
        problem: why none is available (``kind == ""``).
        line: one line saying which was chosen and why (logged by ``rerank = auto``).
        absent: why none is available in a few words naming only the settings and their
            values, never a folder they resolve to (for results files and answers:
            ``no cross-encoder on this machine``).
        candidate_depth, base_mode: a learned model's: the candidates per question and the
            search mode it learnt from (``None`` and ``""`` when not recorded, or when no
            tenant was given: ``learned_reranker`` then names the folder of every tenant's).
    """

    kind: str
    model: str = ""
    problem: str | None = None
    line: str = ""
    absent: str = ""
    candidate_depth: int | None = None
    base_mode: str = ""

    @property
    def label(self) -> str:
        """The reranker in a few words: ``learned reranker models/acme``, ``cross-encoder
        cross-encoder/ms-marco-MiniLM-L-6-v2``, ``keyword overlap, no model``; ``""`` for
        none."""
        if self.kind == KEYWORD:
            return "keyword overlap, no model"
        if self.kind == LEARNED:
            return f"learned reranker {self.model}"
        return f"cross-encoder {self.model}" if self.kind == CROSS_ENCODER else ""

    def require(self) -> None:
        """Refuse a rerank that was asked for when no reranker is available (at once).

        Raises:
            RerankerUnavailableError: exit code 6, HTTP 422; the public reason names the
                settings, not the server's folders.
        """
        if self.problem:
            raise RerankerUnavailableError(
                f"rerank is on but {self.problem}",
                public_reason="rerank: no reranker the server's settings name (reranker_model, "
                'learned_reranker) is available on this server; send "rerank": false, or '
                "leave rerank out (the server then reranks when it can)",
            )


def _learned(
    folder: str, setting: str, why: str, tenant: str | None, lent: str, readers: tuple[str, str]
) -> RerankChoice:
    """The learned model of ``tenant`` under ``folder`` (``tenants.tenant_model``); without a
    tenant, the folder itself (each search then finds its tenant's). A model that learnt with a
    second reader the settings do not give is none (``_readers_problem``; ``readers``: the
    settings' ``embedding_model`` and ``second_embedding_model``)."""
    if tenant is None:
        if not Path(folder).expanduser().is_dir():
            return RerankChoice(
                "",
                problem=learned_problem(folder, setting),
                absent=f"no learned reranker in {setting} {folder!r}",
            )
        return RerankChoice(LEARNED, folder, line=f"rerank: the learned rerankers in {folder}")
    found = tenant_model(folder, tenant, lent, setting)
    if not isinstance(found, str):
        found = _readers_problem(found, *readers) or found
    if isinstance(found, str):
        return RerankChoice(
            "",
            problem=found,
            absent=f"no learned reranker for tenant {tenant!r} in {setting} {folder!r}",
        )
    return RerankChoice(
        LEARNED,
        found.folder,
        line=f"rerank: the learned reranker {found.folder} of tenant {found.tenant!r} ({why})",
        candidate_depth=found.candidate_depth,
        base_mode=found.base_mode,
    )


def _readers_problem(
    found: TenantModel, embedding_model: str, second_embedding_model: str
) -> str | None:
    """Why a model of two readers' features cannot rerank with these settings (its second
    reader is not theirs: its columns would be missing, or another model's cosine), or
    ``None``. A model of one reader's features reranks with one reader or two."""
    if not found.second_reader:
        return None
    from loader.models.readers import canonical_name, second_reader

    try:
        ours = second_reader(embedding_model, second_embedding_model)
    except ConfigError as exc:
        return str(exc)
    if ours and canonical_name(ours) == canonical_name(found.second_reader):
        return None
    given = f"gives {ours}" if ours else "gives none"
    return (
        f"the learned reranker {found.folder} learnt with two readers, its second "
        f"{found.second_reader}, and second_embedding_model = "
        f"{second_embedding_model!r} {given}: set second_embedding_model = "
        f"{found.second_reader} (its vectors indexed: `loader apply`, `loader push`), or train "
        "the model again on these settings (`loader learn`)"
    )


def choose_reranker(settings: Settings, tenant: str | None = None) -> RerankChoice:
    """Which reranker the settings choose for a search of ``tenant``, judged from the files
    alone (no model imported):

    1. ``rerank_backend = "keyword"``: the keyword reranker;
    2. ``reranker_model`` naming a folder ``loader learn`` wrote: that learned model;
    3. ``rerank_backend = "learned"``: the tenant's model in the folder ``learned_reranker``
       names;
    4. a cross-encoder backend: ``reranker_model`` when it is a cross-encoder here, else the
       tenant's learned model when ``learned_reranker`` has one, else none (the problem says
       why).

    A learned model is only ever the tenant's own (or one ``learned_reranker_tenants`` lends
    it: ``loader.models.rerank.tenants``); ``tenant=None`` checks the folder alone (a server's
    start, before any tenant asks).

    Example::

        choose_reranker(Settings(rerank_backend="keyword")).kind   # 'keyword'
    """
    lent = settings.learned_reranker_tenants
    readers = (settings.embedding_model, settings.second_embedding_model)
    if settings.rerank_backend == KEYWORD_RERANK:
        return RerankChoice(KEYWORD, KEYWORD, line="rerank: the keyword reranker")
    if is_learned_folder(settings.reranker_model):
        why = "reranker_model names it"
        return _learned(settings.reranker_model, "reranker_model", why, tenant, lent, readers)
    if settings.rerank_backend == LEARNED_RERANK:
        if not settings.learned_reranker:
            return RerankChoice(
                "",
                problem="rerank_backend = learned needs learned_reranker (LOADER_LEARNED_RERANKER)"
                " to name a folder `loader learn` wrote",
                absent="rerank_backend = learned and no learned_reranker set",
            )
        return _learned(
            settings.learned_reranker, "learned_reranker", "rerank_backend", tenant, lent, readers
        )
    problem = reranker_problem(settings.reranker_model)
    if problem is None:
        return RerankChoice(
            CROSS_ENCODER,
            settings.reranker_model,
            line=f"rerank: the cross-encoder {settings.reranker_model}",
        )
    absent = "no cross-encoder on this machine"
    if settings.learned_reranker:
        why = f"no cross-encoder: {problem}"
        learned = _learned(
            settings.learned_reranker, "learned_reranker", why, tenant, lent, readers
        )
        if learned.kind:
            return learned
        problem = f"{problem}; and {learned.problem}"
        absent = f"{absent}, and {learned.absent}"
    return RerankChoice("", problem=problem, absent=absent)


def rerank_problem(settings: Settings, tenant: str | None = None) -> str | None:
    """Why a rerank with ``settings`` cannot run here, or ``None`` (``choose_reranker``)."""
    return choose_reranker(settings, tenant).problem


def require_rerank(settings: Settings, tenant: str | None = None) -> None:
    """Refuse a rerank asked for when the settings choose no available reranker (for
    ``tenant``'s searches; ``None``: for any).

    Raises:
        RerankerUnavailableError: as ``RerankChoice.require``.
    """
    choose_reranker(settings, tenant).require()


@functools.lru_cache(maxsize=16)
def _announce(line: str) -> None:
    """Log which reranker ``rerank = auto`` chose, once per process and choice."""
    log.warning("%s", line)


def default_rerank(settings: Settings, tenant: str | None = None) -> tuple[bool, str | None]:
    """Whether a search that does not say reranks, by the ``rerank`` setting (``auto``: exactly
    when ``choose_reranker`` finds one: always for the keyword backend), and the warning to show
    when auto leaves it off. With auto, one line (logged once per process) says which reranker
    it chose when that is not the configured cross-encoder. ``tenant``: whose search (a learned
    model is per tenant: a tenant without one gets no rerank, and the warning says why).

    Example::

        default_rerank(Settings(rerank="off"))    # (False, None)
        default_rerank(Settings())                # (False, 'no rerank (rerank = auto): ...')
    """
    if settings.rerank != "auto":
        return settings.rerank == "on", None
    choice = choose_reranker(settings, tenant)
    if choice.problem:
        return False, f"no rerank (rerank = auto): {choice.problem}"
    if choice.kind == LEARNED:
        _announce(f"{choice.line} (rerank = auto)")
    return True, None
