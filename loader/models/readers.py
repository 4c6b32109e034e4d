"""The index's readers: the embedding model ``embedding_model`` names (its vectors in the
``embedding`` field) and, beside it, the second one ``second_embedding_model`` names (its vectors
in ``second_embedding``), both searched by the hybrid modes and fused by the pipeline.

``second_embedding_model = "auto"`` is bge-small-en-v1.5 when its Maven jar is on this machine
(``scripts/setup.sh`` fetches it) and the first reader is another model, else no second reader;
``none`` turns it off; any other value names the model. The second reader is a model of its own:
its own instructions (the registry's), its own backend (``second_embedding_backend``, else the
first reader's), the first reader's runtime settings, and the chunks the first reader cut.

Example::

    second_reader("all-MiniLM-L6-v2", "auto")   # 'bge-small-en-v1.5' with its jar here, else None
    reader_settings(settings).embedding_model   # the second reader, as a one-model Settings
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loader.errors import ConfigError
from loader.models.registry import BGE_SMALL, known_spec, model_spec

if TYPE_CHECKING:
    from loader.models.embedding import Embedder
    from loader.settings import Settings

# The mapping's field of each reader's vectors, in the hybrid templates' sub-query order.
FIRST_FIELD = "embedding"
SECOND_FIELD = "second_embedding"
# The second_embedding_model values that name no model.
AUTO = "auto"
NO_SECOND_READER = ("none", "")
# What "auto" chooses when it is on the machine.
AUTO_SECOND_READER = BGE_SMALL


def canonical_name(name: str) -> str:
    """The registry's name for ``name`` (``BAAI/bge-small-en-v1.5`` -> ``bge-small-en-v1.5``),
    else ``name``."""
    spec = known_spec(name)
    return spec.name if spec else name


def jar_on_machine(name: str) -> bool:
    """Whether the Maven jar of a jar-shipped model is in the local Maven repository (a stat, no
    checksum: the first use checks it)."""
    spec = known_spec(name)
    if spec is None or spec.jar is None:
        return False
    from loader.models.artifacts import maven_repository

    return (maven_repository() / spec.jar.relative_path).is_file()


def second_reader(embedding_model: str, second_embedding_model: str) -> str | None:
    """The second reader's model name for these two settings, or ``None`` for one reader.

    Raises:
        ConfigError: it names the first reader's model again.
    """
    value = second_embedding_model.strip()
    first = canonical_name(embedding_model)
    if value.lower() in NO_SECOND_READER:
        return None
    if value.lower() == AUTO:
        wanted = AUTO_SECOND_READER.name
        return wanted if wanted != first and jar_on_machine(wanted) else None
    if canonical_name(value) == first:
        raise ConfigError(
            f"second_embedding_model {value!r} is the embedding_model again: a second reader is "
            "another model; set it to none for one reader"
        )
    return value


def reader_settings(settings: Settings) -> Settings | None:
    """The second reader as the settings of a one-model index: its model in ``embedding_model``
    with the model's own instructions (the prefix settings are the first reader's), no second
    reader; ``None`` without one. ``embedder_for`` and ``index_fingerprint`` take it as is."""
    name = second_reader(settings.embedding_model, settings.second_embedding_model)
    if name is None:
        return None
    return settings.replace(
        embedding_model=name,
        embedding_backend=settings.second_embedding_backend or settings.embedding_backend,
        query_prefix="",
        passage_prefix="",
        second_embedding_model="none",
        second_embedding_backend="",
    )


def second_embedder_for(settings: Settings, threads: int = 0) -> Embedder | None:
    """The second reader's embedder (loaded lazily, on its first embedding), or ``None``."""
    second = reader_settings(settings)
    if second is None:
        return None
    from loader.models.embedding import embedder_for

    return embedder_for(second, threads=threads)


def reader_dimension(name: str) -> int:
    """A model's vector length: the registry's or its folder's, else the model's own (loads it)."""
    spec = model_spec(name)
    if spec is not None:
        return spec.dimension
    from loader.models.embedding import get_embedder

    return get_embedder(name).dimension
