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


def make_tiny_embedder(folder: Path) -> str:
    """Save a sentence-transformers embedding model of two 32-wide BERT layers with seeded random
    weights and MiniLM's tokenizer (mean pooling, normalised): for tests of the training loop's
    mechanics (steps, losses, prompts, weight mixing), which a 22-million-weight model only
    slows down. It is no good at finding anything."""
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import AutoTokenizer, BertConfig, BertModel

    try:  # sentence-transformers 6 moved the modules (the old path warns)
        from sentence_transformers.sentence_transformer.modules import (
            Normalize,
            Pooling,
            Transformer,
        )
    except ImportError:
        from sentence_transformers.models import Normalize, Pooling, Transformer

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path("all-MiniLM-L6-v2"))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, max_position_embeddings=512,
    )  # fmt: skip
    torch.manual_seed(0)  # the same weights every session
    weights = folder / "weights"
    BertModel(config).save_pretrained(str(weights))
    tokenizer.save_pretrained(str(weights))
    transformer = Transformer(str(weights), max_seq_length=256)
    pooling = Pooling(32, pooling_mode="mean")
    model = SentenceTransformer(modules=[transformer, pooling, Normalize()], device="cpu")
    model.save(str(folder))
    return str(folder)
