"""What `loader eval` runs: configurations of strategy x mode x rerank x swept value.

- ``parse_sweep`` reads ``--sweep SETTING=V1,V2`` into a typed ``Sweep``; a setting in
  ``INDEX_SETTINGS`` (chunking, model, analyzer ...) gets an index per value, any other sweepable
  setting (``rrf_rank_constant``, ``bm25_weight``, ``candidates`` ...) changes only the search;
- ``plan_configurations`` lists every ``EvalConfig`` in run order, grouped by index;
- ``index_alias`` names the index a configuration searches, ``<prefix>-<dataset>-<strategy>``;
  ``config_settings`` gives the settings its row runs with.

Example::

    sweep = parse_sweep("bm25_weight=0.3,0.5")
    [c.name for c in plan_configurations(["structure"], ["hybrid-minmax"], [False], sweep)]
    # ['structure:hybrid-minmax:bm25_weight=0.3', 'structure:hybrid-minmax:bm25_weight=0.5']
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, get_type_hints

from loader.errors import ConfigError
from loader.settings import SEARCH_MODES, Settings, settings_in_scope

if TYPE_CHECKING:
    from loader.models.rerank.check import RerankChoice

log = logging.getLogger(__name__)

DEFAULT_MODES = SEARCH_MODES
# --rerank on / off / both: the rerank flags each mode is run with.
RERANK_CHOICES = {"on": (True,), "off": (False,), "both": (False, True)}
# Settings that choose the reranker: swept, each row names its own.
RERANKER_SETTINGS = ("reranker_model", "rerank_backend", "learned_reranker")

# Settings the eval command sets through options of its own.
OWN_OPTIONS = frozenset(
    {
        "chunk_strategy",  # --strategy
        "search_mode",  # --mode
        "top_k",  # eval keeps every candidate
        "rerank",  # --rerank
    }
)
# Settings whose change means other chunks or other vectors: a sweep builds one index per value.
INDEX_SETTINGS = frozenset(settings_in_scope("index", "model", "chunking", "ingest")) - OWN_OPTIONS
# Settings a sweep cannot vary: the connection, the names, what cannot change a result, or what
# has its own option. Everything else (pipeline and query settings) changes only the search.
UNSWEEPABLE_SETTINGS = (
    frozenset(settings_in_scope("connection", "target", "operations", "runtime")) | OWN_OPTIONS
)


@dataclass(frozen=True)
class Sweep:
    """One setting evaluated over a list of values (``--sweep name=v1,v2``)."""

    setting: str
    values: tuple[Any, ...]

    @property
    def changes_index(self) -> bool:
        return self.setting in INDEX_SETTINGS


@dataclass(frozen=True)
class EvalConfig:
    """One row of the results: a strategy, a mode, rerank or not, and maybe a swept value."""

    strategy: str
    mode: str
    rerank: bool = False
    sweep_setting: str | None = None
    sweep_value: Any = None

    @property
    def name(self) -> str:
        """``strategy:mode[+rerank][:setting=value]``, e.g. ``structure:hybrid-rrf+rerank``.

        Contains no whitespace, so it doubles as the TREC run tag.
        """
        name = f"{self.strategy}:{self.mode}{'+rerank' if self.rerank else ''}"
        if self.sweep_setting is not None:
            name += f":{self.sweep_setting}={self.sweep_value}"
        return name

    @property
    def sweep(self) -> dict[str, Any] | None:
        return None if self.sweep_setting is None else {self.sweep_setting: self.sweep_value}


def parse_sweep(text: str, base: Settings | None = None, option: str = "--sweep") -> Sweep:
    """Parse ``--sweep name=v1,v2,...`` into typed values, each checked against ``base``.

    Every value is checked before anything runs (``check_values``): a value out of the
    setting's bounds, or a chunking value that makes no chunking configuration with the other
    settings, would otherwise fail only when its row is reached -- after the earlier rows ran.

    Args:
        text: e.g. ``chunk_target_tokens=120,180,240`` or ``bm25_weight=0.2,0.3``.
        base: the settings each value replaces one of (default ``Settings()``).
        option: the option named in messages (``--space`` for ``--tune``).

    Returns:
        The sweep.

    Raises:
        ConfigError: unknown or unsweepable setting, no values, a value of the wrong type, or
            a value the setting (or the chunking configuration) refuses.

    Example::

        parse_sweep("rrf_rank_constant=20,60")   # Sweep('rrf_rank_constant', (20, 60))
    """
    name, sep, raw_values = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise ConfigError(f"{option} {text!r}: expected SETTING=VALUE1,VALUE2,...")
    types = get_type_hints(Settings)
    if name not in types:
        raise ConfigError(f"{option} {text!r}: unknown setting {name!r}; see `loader settings`")
    if name in UNSWEEPABLE_SETTINGS:
        hint = {"chunk_strategy": " (use --strategy)", "search_mode": " (use --mode)"}
        raise ConfigError(f"{option}: {name} cannot be swept{hint.get(name, '')}")
    parts = [part.strip() for part in raw_values.split(",") if part.strip()]
    if not parts:
        raise ConfigError(f"{option} {text!r}: give at least one value after '='")
    values: list[Any] = []
    for part in parts:
        value = _typed_value(name, part, types[name], option)
        if value not in values:
            values.append(value)
    check_values(name, values, base or Settings(), option)
    return Sweep(name, tuple(values))


def _typed_value(name: str, text: str, kind: type, option: str = "--sweep") -> Any:
    """One swept value as the setting's type: ``"120"`` -> ``120``, ``"on"`` -> ``True``."""
    try:
        if kind is bool:
            if text.lower() not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
                raise ValueError(text)
            return text.lower() in ("true", "1", "yes", "on")
        return kind(text)
    except ValueError:
        raise ConfigError(f"{option} {name}: {text!r} is not a valid {kind.__name__}") from None


def check_values(name: str, values: Sequence[Any], base: Settings, option: str = "--sweep") -> None:
    """Refuse, before anything runs, a value ``name`` cannot take in ``base``.

    Each value replaces the setting in ``base`` (``Settings`` checks its bounds and choices);
    a chunking setting's value must also make a chunking configuration with the other chunking
    settings (``loader.ingest.chunking.chunking_config``: a target above the model's limit, an
    overlap not below the target ...).

    Raises:
        ConfigError: naming ``option``, the setting and the value, with the setting's reason.

    Example::

        check_values("rrf_rank_constant", [20, 0], Settings())
        # ConfigError: --sweep rrf_rank_constant=0: setting 'rrf_rank_constant' must be ...
    """
    from loader.ingest.chunking import chunking_config

    for value in values:
        try:
            settings = base.replace(**{name: value})
            if name in CHUNKING_SETTINGS:
                chunking_config(settings, _model_text_tokens(settings.embedding_model))
        except ConfigError as exc:
            raise ConfigError(f"{option} {name}={value}: {exc}") from None


CHUNKING_SETTINGS = frozenset(settings_in_scope("chunking"))
# The model's limit when the registry does not know it: only the chunking settings' own
# consistency is checked up front then (the push checks the limit once the model is loaded).
_UNKNOWN_MODEL_TOKENS = 1_000_000


def _model_text_tokens(embedding_model: str) -> int:
    """The most text tokens the embedding model reads, as far as the registry knows without
    loading it: its positions less [CLS] and [SEP] (the passage instruction, when there is one,
    takes a few more: the push's own check is exact)."""
    from loader.models.registry import known_spec

    spec = known_spec(embedding_model)
    return spec.max_tokens - 2 if spec else _UNKNOWN_MODEL_TOKENS


def plan_configurations(
    strategies: Sequence[str],
    modes: Sequence[str],
    rerank_options: Sequence[bool],
    sweep: Sweep | None = None,
) -> list[EvalConfig]:
    """Every configuration to run, grouped by index (strategy, then index-side sweep value).

    Args:
        strategies: chunking strategies.
        modes: search modes.
        rerank_options: ``[False]``, ``[True]`` or ``[False, True]``.
        sweep: an optional setting swept over values.

    Returns:
        The configurations in run order.

    Example::

        [c.name for c in plan_configurations(["structure"], ["bm25"], [False, True])]
        # ['structure:bm25', 'structure:bm25+rerank']
    """
    for mode in modes:
        if mode not in SEARCH_MODES:
            raise ConfigError(f"mode {mode!r} is not one of {', '.join(SEARCH_MODES)}")
    values: Sequence[Any] = sweep.values if sweep else [None]
    configs: list[EvalConfig] = []
    for strategy in dict.fromkeys(strategies):
        for value in values:
            for mode in dict.fromkeys(modes):
                for rerank in dict.fromkeys(rerank_options):
                    configs.append(
                        EvalConfig(
                            strategy,
                            mode,
                            rerank,
                            sweep.setting if sweep else None,
                            value,
                        )
                    )
    return configs


def name_part(text: Any) -> str:
    # Index names: lowercase, and none of \ / * ? " < > | , # : or spaces.
    return re.sub(r"[^a-z0-9_-]+", "-", str(text).lower()).strip("-_") or "x"


def index_alias(prefix: str, dataset: str, strategy: str, config: EvalConfig | None = None) -> str:
    """The alias a strategy's (and an index-side sweep value's) documents are pushed into.

    Example::

        index_alias("eval", "scifact", "structure")   # 'eval-scifact-structure'
    """
    alias = f"{prefix}-{name_part(dataset)}-{name_part(strategy)}"
    if config is not None and config.sweep_setting in INDEX_SETTINGS:
        alias += f"-{name_part(config.sweep_setting)}-{name_part(config.sweep_value)}"
    return alias


def rerank_options(
    choice: str | None, settings: Settings, tenant: str | None = None
) -> tuple[tuple[bool, ...], str | None]:
    """``--rerank on|off|both`` -> the rerank flags to run: ``(True,)``, ``(False,)``, both;
    ``None`` (no option) follows the rerank setting as a search of ``tenant`` does (``auto``: on
    exactly when reranker_model is a cross-encoder here, or the tenant has a learned model),
    with the warning to show when auto leaves it off.

    Raises:
        ConfigError: another choice.
        RerankerUnavailableError: a rerank asked for, and reranker_model is no cross-encoder
            here (at once, before any document is pushed).
    """
    from loader.models.rerank.check import default_rerank, require_rerank

    if choice is None:
        rerank, warning = default_rerank(settings, tenant)
        choice = "on" if rerank else "off"
    else:
        warning = None
    if choice not in RERANK_CHOICES:
        raise ConfigError(f"rerank {choice!r} is not one of {', '.join(RERANK_CHOICES)}")
    if True in RERANK_CHOICES[choice]:
        require_rerank(settings, tenant)
    return RERANK_CHOICES[choice], warning


def rerank_setup(
    choice: str | None, settings: Settings, tenant: str, modes: Sequence[str]
) -> tuple[tuple[bool, ...], list[str], str]:
    """``rerank_options`` for a task of ``tenant``, its warnings (logged here, and for the
    results file: auto leaving the rerank off, rows reranked by a learned model on another
    mode's candidates) and the learned reranker's caption (``learned_caption``)."""
    reranks, warning = rerank_options(choice, settings, tenant)
    learned, others = learned_caption(settings, tenant, modes)
    warnings = ([warning] if warning else []) + (others if True in reranks else [])
    for line in warnings:
        log.warning("%s", line)
    return reranks, warnings, learned if True in reranks else ""


def rerank_caption(
    choice: str | None,
    reranks: Sequence[bool],
    chosen: RerankChoice,
    *,
    rerank: str,
    backend: str,
    swept: str | None = None,
    learned: str = "",
) -> str:
    """What the results table's caption says of the rerank: which reranker ran, or why none did.

    Args:
        choice: the ``--rerank`` asked for (``None``: the rerank setting decided).
        reranks: the rerank flags run (``rerank_options``).
        chosen: the reranker the rows' settings choose
            (``loader.models.rerank.check.choose_reranker``): a cross-encoder, the keyword
            reranker, a learned model, or none and why.
        rerank, backend: the rows' ``rerank`` and ``rerank_backend`` settings.
        swept: the swept setting, if any (a swept reranker is named in each row instead).
        learned: the learned reranker that runs (``learned_caption``), if it is one.

    Example::

        rerank_caption(None, (False,), choose_reranker(settings), rerank="auto", backend="torch")
        # 'rerank: off (auto: no cross-encoder on this machine)'
    """
    if True not in reranks:
        if choice is not None:
            return "rerank: off (asked for)"
        if rerank == "auto":
            return f"rerank: off (auto: {chosen.absent or 'no reranker on this machine'})"
        return f"rerank: off (rerank = {rerank})"
    if swept in RERANKER_SETTINGS:
        reranker = f"as each row's {swept}"
    elif learned:
        reranker = learned
    elif chosen.kind == "cross-encoder":  # check.CROSS_ENCODER: `loader --help` imports no model
        reranker = f"{chosen.label} on {backend}"
    else:
        reranker = chosen.label
    if False in reranks:
        return f"rerank: {reranker} in the +rerank rows, off in the others"
    return f"rerank: {reranker}" + ("" if choice else f" (rerank = {rerank})")


def learned_caption(settings: Settings, tenant: str, modes: Sequence[str]) -> tuple[str, list[str]]:
    """What the caption says of the tenant's learned reranker, when it is the one that reranks
    (``""`` otherwise), and a warning per evaluated mode whose candidates it did not learn from
    (those rows rerank as asked: an explicit comparison, not refused)."""
    from loader.models.rerank.check import LEARNED, choose_reranker

    choice = choose_reranker(settings, tenant)
    if choice.kind != LEARNED:
        return "", []
    depth = f"the top {choice.candidate_depth}" if choice.candidate_depth else "all"
    base = choice.base_mode or "an unrecorded mode"
    caption = (
        f"learned reranker {choice.model} of tenant {tenant!r}, learnt on {base}'s candidates "
        f"(reranks {depth} of each row's)"
    )
    others = [mode for mode in modes if choice.base_mode and mode != choice.base_mode]
    warnings = [
        f"the {mode}+rerank row reranks {mode}'s candidates with a model learnt on "
        f"{choice.base_mode}'s: not what it was measured on"
        for mode in others
    ]
    return caption, warnings


def config_settings(settings: Settings, config: EvalConfig, alias: str) -> Settings:
    """The settings one configuration runs with: its index alias, strategy and swept value."""
    run_settings = settings.replace(index_name=alias, chunk_strategy=config.strategy)
    if config.sweep_setting is not None:
        run_settings = run_settings.replace(**{config.sweep_setting: config.sweep_value})
    return run_settings
