"""Search configuration as files: Jinja2 templates rendered from the settings into JSON bodies.

Three folders, each looked up first in the project directory, then in the packaged defaults (the
repository's top-level folders, which the wheel carries as ``loader/defaults/``: in the checkout
that folder links to them), so a project overrides a file by giving one with the same name:

- ``mappings/chunks.json.j2``: the chunk index (settings and mappings);
- ``pipelines/search/<name>.json.j2`` and ``pipelines/ingest/<name>.json.j2``: pipelines named
  ``<alias>-<name>``;
- ``search_templates/<name>.json.j2``: stored mustache scripts named ``<alias>-<name>``. These use
  ``[[ ]]`` / ``[% %]`` / ``[# #]`` as Jinja delimiters so the mustache ``{{ }}`` tags pass through.

Files whose name starts with ``_`` are partials (macros) and render nothing by themselves. The
vector dimension is never written in a file: it is read from the embedding model, and the
mapping's ``_meta`` records the document id scheme and the model's fingerprint (model, backend,
dimension, passage instruction) whatever the file says.

Example::

    config = render_config(settings, dimension=384)
    config.index["mappings"]["properties"]["embedding"]["dimension"]   # 384
    config.names.rrf_pipeline                                           # 'chunks-rrf'
"""

from __future__ import annotations

import importlib.resources
import json
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loader.documents import DOC_ID_SCHEME
from loader.errors import ConfigError
from loader.models.readers import reader_dimension, reader_settings
from loader.models.registry import EMBEDDING_META_KEY, SECOND_READER_META_KEY, index_fingerprint
from loader.modes import pipelines_too_new, search_mode
from loader.settings import Settings

if TYPE_CHECKING:  # imported where a template is rendered: a search needs only the names
    import jinja2

log = logging.getLogger(__name__)

# The packaged defaults, read through importlib.resources so that they are found wherever the
# package is installed (a wheel in a venv as well as the checkout).
DEFAULTS_PACKAGE, DEFAULTS_FOLDER = "loader", "defaults"
CONFIG_FOLDERS = ("mappings", "pipelines", "search_templates")
INDEX_FILE = "mappings/chunks.json.j2"
SEARCH_PIPELINE_FOLDER = "pipelines/search/"
INGEST_PIPELINE_FOLDER = "pipelines/ingest/"
SEARCH_TEMPLATE_FOLDER = "search_templates/"
FILE_SUFFIX = ".json.j2"
# Search templates named <stem>_text.json.j2 take text only (the cluster embeds it with the model
# loader/index/ml_model.py registers); render_config renders them only when that model's id is
# given.
TEXT_TEMPLATE_SUFFIX = "_text"


@dataclass(frozen=True)
class ConfigNames:
    """Names of everything derived from the alias the applications search.

    Example::

        names = config_names("chunks")
        names.version_index(2)     # 'chunks-v2'
        names.hybrid_template      # 'chunks-hybrid'
    """

    alias: str

    def object_name(self, stem: str) -> str:
        """The cluster name of the pipeline or template rendered from ``<stem>.json.j2``."""
        return f"{self.alias}-{stem}"

    def version_index(self, version: int) -> str:
        return f"{self.alias}-v{version}"

    @property
    def rrf_pipeline(self) -> str:
        return self.object_name("rrf")

    @property
    def minmax_pipeline(self) -> str:
        return self.object_name("minmax")

    @property
    def ingest_pipeline(self) -> str:
        return self.object_name("ingest")

    @property
    def hybrid_template(self) -> str:
        return self.object_name("hybrid")

    @property
    def bm25_template(self) -> str:
        return self.object_name("bm25")

    @property
    def vector_template(self) -> str:
        return self.object_name("vector")

    def for_search_mode(self, mode: str) -> tuple[str, str | None]:
        """The stored template and search pipeline (or ``None``) for a ``search_mode`` setting,
        from the mode's record (``loader.modes``).

        Args:
            mode: one of ``loader.modes.SEARCH_MODES``, e.g. ``hybrid-rrf``.

        Returns:
            ``(template_id, pipeline_name_or_None)``; pass the pipeline as the
            ``search_pipeline`` URL parameter of ``_search/template``.

        Raises:
            ConfigError: no such mode.
        """
        record = search_mode(mode)
        pipeline = self.object_name(record.pipeline) if record.pipeline else None
        return self.object_name(record.template), pipeline


def config_names(alias: str) -> ConfigNames:
    """The names derived from ``alias`` (``settings.index_name``)."""
    return ConfigNames(alias)


def version_of(alias: str, index: str | None) -> int | None:
    """``N`` of an index named ``<alias>-v<N>`` (``ConfigNames.version_index``), else ``None``.

    Example::

        version_of("chunks", "chunks-v2")   # 2
    """
    match = re.fullmatch(rf"{re.escape(alias)}-v(\d+)", index or "")
    return int(match.group(1)) if match else None


@dataclass
class DesiredConfig:
    """Everything ``loader apply`` puts on the cluster, as rendered from the files."""

    names: ConfigNames
    dimension: int
    index: dict[str, Any]  # {"settings": ..., "mappings": ...}
    second_dimension: int = 0  # the second reader's (second_embedding_model); 0 without one
    search_pipelines: dict[str, dict[str, Any]] = field(default_factory=dict)
    ingest_pipelines: dict[str, dict[str, Any]] = field(default_factory=dict)
    search_templates: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> body
    files: dict[str, str] = field(default_factory=dict)  # object name -> file it came from


def default_project_dir() -> Path | None:
    """The working directory if it holds one of the config folders, else ``None``."""
    cwd = Path.cwd()
    if any((cwd / folder).is_dir() for folder in CONFIG_FOLDERS):
        return cwd
    return None


def _project_root(project_dir: str | Path | None) -> Path | None:
    project = Path(project_dir) if project_dir is not None else default_project_dir()
    return project.resolve() if project is not None else None


def _defaults() -> Traversable:
    return importlib.resources.files(DEFAULTS_PACKAGE) / DEFAULTS_FOLDER


def packaged_file(name: str) -> str:
    """The text of a packaged default config file, e.g. ``packaged_file(INDEX_FILE)``: the
    starting point for a project's own copy."""
    return (_defaults() / name).read_text(encoding="utf-8")


def _describe_roots(project_dir: str | Path | None) -> str:
    project = _project_root(project_dir)
    return ", ".join([*([str(project)] if project else []), "the packaged defaults"])


def _environment(project_dir: str | Path | None, mustache: bool) -> jinja2.Environment:
    import jinja2

    # ChoiceLoader: the project's file wins over the packaged default of the same name.
    loaders: list[jinja2.BaseLoader] = []
    project = _project_root(project_dir)
    if project is not None:
        loaders.append(jinja2.FileSystemLoader(str(project)))
    loaders.append(jinja2.PackageLoader(DEFAULTS_PACKAGE, DEFAULTS_FOLDER))
    options: dict[str, Any] = {}
    if mustache:
        # Search templates hold mustache {{ }} tags; give Jinja other delimiters.
        options = {
            "block_start_string": "[%",
            "block_end_string": "%]",
            "variable_start_string": "[[",
            "variable_end_string": "]]",
            "comment_start_string": "[#",
            "comment_end_string": "#]",
        }
    return jinja2.Environment(
        loader=jinja2.ChoiceLoader(loaders),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
        **options,
    )


def _template_names(root: Traversable, prefix: str = "") -> Iterator[str]:
    """Names of the renderable files under ``root``, relative to it, partials excluded."""
    if not root.is_dir():
        return
    for entry in root.iterdir():
        name = f"{prefix}{entry.name}"
        if entry.is_dir():
            yield from _template_names(entry, f"{name}/")
        elif entry.name.endswith(FILE_SUFFIX) and not entry.name.startswith("_"):
            yield name


def list_config_files(project_dir: str | Path | None = None) -> list[str]:
    """Template names (e.g. ``pipelines/search/rrf.json.j2``) of every renderable file, partials
    excluded, from the project directory and the packaged defaults."""
    names: set[str] = set()
    roots: list[Traversable] = [_defaults()]
    project = _project_root(project_dir)
    if project is not None:
        roots.append(project)
    for root in roots:
        for folder in CONFIG_FOLDERS:
            names.update(f"{folder}/{name}" for name in _template_names(root / folder))
    return sorted(names)


def second_reader_dimension(settings: Settings) -> int:
    """The vector length of the settings' second reader (``second_embedding_model``), or 0
    without one: what the files render as ``second_dimension``."""
    second = reader_settings(settings)
    return reader_dimension(second.embedding_model) if second is not None else 0


def render_file(
    name: str,
    settings: Settings,
    dimension: int,
    project_dir: str | Path | None = None,
    ml_model_id: str | None = None,
    second_dimension: int | None = None,
    second_ml_model_id: str | None = None,
) -> dict[str, Any]:
    """Render one config file and parse it as JSON.

    Args:
        name: template name relative to the root, e.g. ``mappings/chunks.json.j2``.
        settings: the resolved settings.
        dimension: the embedding model's vector dimension.
        project_dir: the project's folder (default: the working directory if it has config
            folders).
        ml_model_id: the ml-commons id of the index's embedding model, for the text-only
            templates (``null`` in them when not given).
        second_dimension: the second reader's vector length, 0 for none; ``None`` reads it
            from the settings (``second_reader_dimension``).
        second_ml_model_id: the ml-commons id of the second reader's model, for the text-only
            templates and the ingest pipeline (with ``ml_model_id``).

    Returns:
        The parsed JSON object.
    """
    import jinja2

    if second_dimension is None:
        second_dimension = second_reader_dimension(settings)

    env = _environment(project_dir, mustache=name.startswith(SEARCH_TEMPLATE_FOLDER))
    context = {
        "settings": settings,
        "dimension": int(dimension),
        "names": config_names(settings.index_name),
        "ml_model_id": ml_model_id,
        "second_dimension": int(second_dimension),
        "second_ml_model_id": second_ml_model_id,
    }
    try:
        text = env.get_template(name).render(**context)
    except jinja2.TemplateNotFound as exc:
        raise ConfigError(
            f"config file {name} not found in {_describe_roots(project_dir)}"
        ) from exc
    except jinja2.TemplateSyntaxError as exc:
        raise ConfigError(
            f"config file {exc.filename or name}:{exc.lineno}: {exc.message}"
        ) from exc
    except jinja2.UndefinedError as exc:
        raise ConfigError(f"config file {name}: {exc.message}; see `loader settings`") from exc
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"config file {name} does not render valid JSON: {exc.msg} at rendered line "
            f"{exc.lineno} column {exc.colno}"
        ) from exc
    if not isinstance(value, dict):
        raise ConfigError(f"config file {name} must render a JSON object")
    return value


def render_config(
    settings: Settings,
    dimension: int,
    project_dir: str | Path | None = None,
    ml_model_id: str | None = None,
    cluster_version: tuple[int, int] | None = None,
    second_ml_model_id: str | None = None,
) -> DesiredConfig:
    """Render every config file into the bodies ``loader apply`` puts on the cluster.

    Args:
        settings: the resolved settings (``index_name`` is the alias; names derive from it).
        dimension: the embedding model's vector dimension (``get_embedder(...).dimension``).
        project_dir: the project's folder; ``None`` uses the working directory if it has config
            folders. Packaged defaults fill in the files it lacks.
        ml_model_id: the ml-commons id of the index's embedding model; with it, the text-only
            search templates (``*_text.json.j2``) are rendered too, else they are left out.
        cluster_version: the cluster's (major, minor): a mode's pipeline it cannot run is left
            out (``loader.modes.SearchMode.since``); ``None`` renders every file.
        second_ml_model_id: the ml-commons id of the second reader's model (with a second
            reader and ``ml_model_id``): the text-only templates' second neural query.

    Returns:
        The desired configuration.
    """
    names = config_names(settings.index_name)
    second = reader_settings(settings)
    second_dimension = second_reader_dimension(settings)
    config = DesiredConfig(
        names=names,
        dimension=int(dimension),
        index=render_file(INDEX_FILE, settings, dimension, project_dir, None, second_dimension),
        second_dimension=second_dimension,
    )
    # Set here, not in the mapping file: a user's own mapping must not be able to drop them.
    meta = config.index.setdefault("mappings", {}).setdefault("_meta", {})
    meta["doc_id_scheme"] = DOC_ID_SCHEME
    meta[EMBEDDING_META_KEY] = index_fingerprint(settings, dimension)
    if second is not None:
        meta[SECOND_READER_META_KEY] = index_fingerprint(second, second_dimension)
    too_new = pipelines_too_new(cluster_version)
    for name in list_config_files(project_dir):
        stem = name.rsplit("/", 1)[-1].removesuffix(FILE_SUFFIX)
        if name.startswith(SEARCH_PIPELINE_FOLDER):
            if stem in too_new:
                log.info("pipeline %s left out: OpenSearch %s lacks it", stem, cluster_version)
                continue
            target = config.search_pipelines
        elif name.startswith(INGEST_PIPELINE_FOLDER):
            target = config.ingest_pipelines
        elif name.startswith(SEARCH_TEMPLATE_FOLDER):
            if stem.endswith(TEXT_TEMPLATE_SUFFIX) and ml_model_id is None:
                continue  # no model on the cluster to embed the text with
            target = config.search_templates
        else:
            continue  # mappings: only the chunk index is rendered
        body = render_file(
            name,
            settings,
            dimension,
            project_dir,
            ml_model_id,
            second_dimension,
            second_ml_model_id,
        )
        if target is config.search_templates:
            _check_script(name, body)
        target[names.object_name(stem)] = body
        config.files[names.object_name(stem)] = name
    log.debug("rendered config for alias %s: %s", names.alias, sorted(config.files))
    return config


def _check_script(name: str, body: dict[str, Any]) -> None:
    script = body.get("script")
    if not (
        isinstance(script, dict)
        and script.get("lang") == "mustache"
        and isinstance(script.get("source"), str)
    ):
        raise ConfigError(
            f"search template {name} must render "
            '{"script": {"lang": "mustache", "source": "<string>"}}; '
            "an object source would quote the vector"
        )
