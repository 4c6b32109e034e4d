"""Models the tests build locally (no model hub here)."""

from __future__ import annotations

from pathlib import Path

from loader.models.embedding import resolve_model_path


def make_cross_encoder(folder: Path) -> str:
    """Save a CrossEncoder built from the bundled MiniLM weights with a seeded random head.

    Its untrained head gives arbitrary but deterministic scores: enough to prove loading,
    batching, truncation, reordering and the ONNX export.
    """
    import torch
    from sentence_transformers import CrossEncoder

    torch.manual_seed(0)  # the same random head every session: reproducible scores
    CrossEncoder(resolve_model_path("all-MiniLM-L6-v2"), num_labels=1).save(str(folder))
    return str(folder)
