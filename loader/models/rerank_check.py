"""Whether ``reranker_model`` is a cross-encoder on this machine, judged without loading it.

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

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from loader.errors import RerankerUnavailableError
from loader.models.registry import known_spec
from loader.settings import KEYWORD_RERANK

if TYPE_CHECKING:
    from loader.settings import Settings

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


def rerank_problem(settings: Settings) -> str | None:
    """Why a rerank with ``settings`` cannot run here, or ``None``: the keyword reranker needs no
    model; any other backend needs ``reranker_model`` to be a cross-encoder on this machine."""
    if settings.rerank_backend == KEYWORD_RERANK:
        return None
    return reranker_problem(settings.reranker_model)


def require_rerank(settings: Settings) -> None:
    """``require_reranker`` for the settings' backend: nothing to require for keyword.

    Raises:
        RerankerUnavailableError: as ``require_reranker``.
    """
    if settings.rerank_backend != KEYWORD_RERANK:
        require_reranker(settings.reranker_model)


def default_rerank(settings: Settings) -> tuple[bool, str | None]:
    """Whether a search that does not say reranks, by the ``rerank`` setting (``auto``: exactly
    when ``rerank_problem`` finds none: always for the keyword backend), and the warning to show
    when auto leaves it off.

    Example::

        default_rerank(Settings(rerank="off"))    # (False, None)
        default_rerank(Settings())                # (False, 'no rerank (rerank = auto): ...')
    """
    if settings.rerank != "auto":
        return settings.rerank == "on", None
    problem = rerank_problem(settings)
    return problem is None, (f"no rerank (rerank = auto): {problem}" if problem else None)
