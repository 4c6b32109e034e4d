"""The indexes of one `loader eval` run: each applied and pushed once, pipelines kept in step.

Per chunking strategy (and per value of an index-side sweep) the task's documents live in an index
of their own (``<prefix>-<dataset>-<strategy>[-<sweep>]``, see ``loader.eval.configs.index_alias``):

- ``prepare`` applies the configuration (index, pipelines, templates) and pushes the documents
  through ``sync_documents`` the first time an alias comes up -- a re-run over unchanged
  documents embeds and writes nothing -- and re-applies the pipelines when a swept pipeline
  setting (``rrf_rank_constant``, ``bm25_weight`` ...) changed since;
- ``restore`` leaves every index's pipelines as the base settings render them.

Example::

    indexes = EvalIndexes(task, settings, client, index_prefix="eval")
    run_settings = indexes.prepare(config)   # the settings to search this configuration with
    indexes.restore()
    indexes.pushed   # an IndexResult per index, with what its push did
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from loader.eval.configs import EvalConfig, Sweep, config_settings, index_alias, name_part
from loader.eval.report import IndexResult
from loader.eval.tasks import EVAL_TENANT, EvalTask
from loader.settings import Settings
from loader.terminal import printable

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

    from loader.models.embedding import Embedder

# EVAL_TENANT (a BEIR corpus's tenant) is imported from here by fine-tune and the benchmarks.
__all__ = ["EVAL_TENANT", "EvalIndexes"]
# Documents a push could not index that are named one by one in the warnings.
MAX_FAILURES_SHOWN = 10

log = logging.getLogger(__name__)


def _ignore(line: str) -> None:
    return None


@dataclass
class EvalIndexes:
    """The indexes of one evaluation: each applied and pushed once, its pipelines kept in step
    with the settings of the configuration about to search it.

    Attributes:
        task: the documents to push.
        settings: the base settings (before a configuration's strategy and swept value).
        client: the OpenSearch client.
        index_prefix: first part of every alias.
        sweep: the evaluation's sweep, if any.
        show_progress: progress bars on stderr while pushing.
        notify: called with one line per push.
        pushed: an ``IndexResult`` per index pushed, in order.
    """

    task: EvalTask
    settings: Settings
    client: OpenSearch
    index_prefix: str
    sweep: Sweep | None = None
    show_progress: bool = False
    notify: Callable[[str], None] = _ignore
    pushed: list[IndexResult] = field(default_factory=list)
    # alias -> the settings its pipelines were last applied with
    applied: dict[str, Settings] = field(default_factory=dict)

    def prepare(self, config: EvalConfig) -> Settings:
        """Make the index ``config`` searches ready, and return the settings to search it with.

        The first time an alias comes up it is applied with its own settings, then pushed (both
        are no-ops when unchanged). Later, when a pipeline setting changed (``rrf_rank_constant``,
        ``bm25_weight`` ...), the new pipeline bodies are applied (the pipelines are named after
        the alias).
        """
        from loader.models.embedding import embedder_for

        alias = index_alias(self.index_prefix, self.task.name, config.strategy, config)
        run_settings = config_settings(self.settings, config, alias)
        embedder = embedder_for(run_settings)
        if alias not in self.applied:
            self._apply(run_settings, embedder)
            changes_index = self.sweep is not None and self.sweep.changes_index
            self._push(run_settings, embedder, config.sweep if changes_index else None)
        elif self.applied[alias] != run_settings:
            self._apply(run_settings, embedder)
        return run_settings

    def restore(self) -> None:
        """Leave each index's pipelines as the base settings render them, so a later run starts
        from the defaults rather than the last swept value."""
        from loader.models.embedding import embedder_for

        sweep = self.sweep
        for alias, last in list(self.applied.items()):
            base = self.settings.replace(index_name=alias, chunk_strategy=last.chunk_strategy)
            if sweep is not None and sweep.changes_index:
                base = base.replace(**{sweep.setting: getattr(last, sweep.setting)})
            if last != base:
                self._apply(base, embedder_for(base))

    def _apply(self, run_settings: Settings, embedder: Embedder) -> None:
        from loader.index.apply import apply_config

        apply_config(run_settings, dimension=embedder.dimension, client=self.client)
        self.applied[run_settings.index_name] = run_settings

    def _push(self, run_settings: Settings, embedder: Embedder, sweep: dict | None) -> None:
        from loader.ingest.sync import sync_documents

        alias = run_settings.index_name
        push_report = sync_documents(
            self.task.documents(),
            run_settings,
            collection=name_part(self.task.name),
            tenant=self.task.tenant,
            show_progress=self.show_progress,
            client=self.client,
            embedder=embedder,
        )
        self.pushed.append(
            IndexResult(alias, run_settings.chunk_strategy, sweep, push_report.to_dict())
        )
        # A file of a type no reader handles (an image) is no failure, unless a question is
        # judged on it: then it is named like an unreadable one, or it would score 0 unexplained.
        sources = {key for graded in self.task.qrels.values() for key in graded}
        named = [item for item in push_report.ignored if item["source"] in sources]
        failures = [*push_report.skipped, *named, *push_report.errors]
        for failure in failures[:MAX_FAILURES_SHOWN]:
            # Even with --quiet or --json: the documents' questions score 0, silently otherwise.
            log.warning(
                "%s: %s was not indexed (%s); questions judged on it cannot find it",
                alias,
                printable(failure["source"]),
                printable(failure["reason"]),
            )
        if len(failures) > MAX_FAILURES_SHOWN:
            log.warning(
                "%s: %d more documents were not indexed", alias, len(failures) - MAX_FAILURES_SHOWN
            )
        ignored = f", {len(push_report.ignored)} ignored" if push_report.ignored else ""
        self.notify(
            f"{alias}: {push_report.added} added, {push_report.updated} updated, "
            f"{push_report.unchanged} unchanged, {push_report.deleted} deleted, "
            f"{push_report.failed} failed{ignored}; {push_report.chunks} chunks, "
            f"{push_report.embedded} embedded in {push_report.seconds:.1f} s"
        )
