"""A trial's searches (``loader.eval.trials``): each question's sub-query lists, searched once,
then fused on the client with the stored fusion (``now``) and the trial's, for the judging
page's ``POST /judge/sets/<id>/trials`` and ``loader judgments try``.

The hybrid template is rendered by OpenSearch with the very parameters a live score's search
sends (``loader eval``'s candidate depth, the question's identifiers, the tenant), and each of
its sub-queries runs on its own, chunk by chunk, as deep as the hybrid query collects them. The
rendered sub-queries carry the tenant's filter as every search of the tenant does, and a hit of
another tenant is dropped all the same (a template that lost its filter shows none). Nothing is
logged: the searches go to ``_search``, never through ``loader.query.search``.

The questions are searched as asked: no rewriting (as ``loader explain``), no rerank (the
modes' columns of the live scores are the fusion's own).

Example::

    result = try_settings(settings, "acme", "week-49", {"rrf_bm25_weight": 0.7}, client=client)
    result["means"]   # {"now": 0.61, "trial": 0.66, "delta": 0.05, "questions": 40}
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from loader.cluster.client import cluster_errors
from loader.eval.set_searches import judged_request
from loader.eval.trials import (
    SubHit,
    best_trial,
    check_trial,
    fused_sources,
    fusion_summary,
    sweep_summary,
    sweep_trials,
    toml_lines,
    trial_table,
)
from loader.index.render import SEARCH_PIPELINE_FOLDER, config_names, render_file
from loader.modes import Fusion, read_fusion, search_mode
from loader.query.request import MAX_QUESTION_CHARS
from loader.query.search import bm25_text
from loader.query.snapshots import check_question_count

if TYPE_CHECKING:
    from loader.query.grades import JudgingState
    from loader.query.judgments import QuerySet
    from loader.settings import Settings

log = logging.getLogger(__name__)

DEFAULT_HYBRID = "hybrid-rrf"  # the mode compared when the served one fuses nothing
SubLists = list[list[SubHit]]  # one question's sub-query lists, in the template's order


def trial_modes(served_mode: str, trial: dict[str, Any]) -> tuple[str, str]:
    """The mode compared now (``served_mode`` when it fuses, else ``hybrid-rrf``) and the
    trial's (its ``search_mode``, else the same)."""
    now = served_mode if search_mode(served_mode).hybrid else DEFAULT_HYBRID
    return now, trial.get("search_mode", now)


def _vectors(settings: Settings, text: str, embedder: Any) -> tuple[list[float], Any]:
    from loader.models.embedding import embedder_for
    from loader.models.readers import second_embedder_for

    vector = (embedder or embedder_for(settings)).embed_queries([text])[0].tolist()
    second = second_embedder_for(settings)
    return vector, second.embed_queries([text])[0].tolist() if second else None


def _sub_hits(answer: dict[str, Any], tenant: str, template_id: str) -> list[SubHit]:
    hits = []
    for found in answer.get("hits", {}).get("hits", []):
        source = found.get("_source") or {}
        if source.get("tenant") != tenant:
            log.error("template %r returned a chunk of another tenant, dropped", template_id)
            continue
        score, order = (found.get("sort") or [0.0, 0])[:2]
        hits.append(
            SubHit(
                chunk_id=str(source.get("chunk_id") or found.get("_id", "")),
                doc_id=str(source.get("doc_id", "")),
                source=str(source.get("source", "")),
                score=float(score),
                order=int(order),
            )
        )
    return hits


def sub_query_lists(
    settings: Settings, question: str, tenant: str, mode: str, *, client: Any, embedder: Any
) -> SubLists:
    """The hybrid template's sub-queries of ``question``, each run on its own as deep as the
    hybrid query collects them, best first (ties in index order, as Lucene breaks them)."""
    request = judged_request(settings, question, tenant, mode, one_per_document=False)
    vector, second = _vectors(settings, request.searched, embedder)
    params = request.template_params(bm25_text(request.searched), vector, second)
    template_id, _ = config_names(settings.index_name).for_search_mode(mode)
    lists: SubLists = []
    with cluster_errors(settings, f"running the sub-queries of template {template_id!r}"):
        rendered = client.render_search_template(body={"id": template_id, "params": params})
        for query in rendered["template_output"]["query"]["hybrid"]["queries"]:
            body = {
                "size": request.depth,
                "_source": {"includes": ["chunk_id", "doc_id", "source", "tenant"]},
                "sort": [{"_score": "desc"}, {"_doc": "asc"}],
                "query": query,
            }
            answer = client.search(index=settings.index_name, body=body)
            lists.append(_sub_hits(answer, tenant, template_id))
    return lists


def stored_fusion(settings: Settings, mode: str, client: Any) -> Fusion:
    """The fusion of ``mode``'s pipeline as stored on the cluster: what is served now."""
    _, pipeline = config_names(settings.index_name).for_search_mode(mode)
    with cluster_errors(settings, f"reading search pipeline {pipeline!r}"):
        stored = client.transport.perform_request("GET", f"/_search/pipeline/{pipeline}")
    return read_fusion(stored.get(pipeline) or {})


def trial_fusion(tried: Settings, mode: str, sides: int) -> Fusion:
    """The fusion ``loader apply`` would store for ``mode`` with the trial's settings (``tried``,
    the settings with the trial's values): the pipeline file rendered with them and read back as
    the stored one is."""
    name = f"{SEARCH_PIPELINE_FOLDER}{search_mode(mode).pipeline}.json.j2"
    two_readers = 1 if sides > 3 else 0  # the pipelines' weights for a second reader's side
    return read_fusion(render_file(name, tried, 0, second_dimension=two_readers))


def run_trial(
    settings: Settings,
    query_set: QuerySet,
    state: JudgingState,
    trial: Any,
    *,
    client: Any,
    embedder: Any,
    sweep: Any = None,
) -> dict[str, Any]:
    """Fuse each graded question's sub-query lists now and with ``trial`` (``check_trial``
    first: a bad trial costs no search) and score both: ``trials.trial_table`` with the modes,
    both fusions and the ``loader.toml`` lines that would apply it. With ``sweep`` (one setting
    and its values, ``trials.sweep_trials``) each value is fused from the same lists, and the
    answer is the best value's, with every value's means under ``sweep``. ``settings`` must
    have the query log off. An ungraded question is not searched (it has no score either way)."""
    trials = [check_trial(trial)] if sweep is None else sweep_trials(trial or {}, sweep)
    check_question_count(query_set.name, len(query_set.questions), bound="a trial scores")
    mode_now = trial_modes(settings.search_mode, {})[0]
    modes = [trial_modes(settings.search_mode, tried)[1] for tried in trials]
    graded = [
        [{"source": g.source, "grade": g.grade} for g in state.grades.get(n, {}).values()]
        for n in range(len(query_set.questions))
    ]
    fusion_now = stored_fusion(settings, mode_now, client)
    now: list[list[str]] = []
    tried: list[list[list[str]]] = [[] for _ in trials]  # per trial, per question
    fusions: list[Fusion] = []
    for question, grades in zip(query_set.questions, graded, strict=True):
        if not any(grade["grade"] > 0 for grade in grades):
            now.append([])
            for rankings in tried:
                rankings.append([])
            continue
        where = {"client": client, "embedder": embedder}
        sides = sub_query_lists(settings, question, query_set.tenant, mode_now, **where)
        if not fusions:
            fusions = [
                trial_fusion(settings.replace(**checked), mode, len(sides))
                for checked, mode in zip(trials, modes, strict=True)
            ]
        now.append(fused_sources(sides, fusion_now))
        for rankings, fusion in zip(tried, fusions, strict=True):
            rankings.append(fused_sources(sides, fusion))
    tables = [trial_table(query_set.questions, graded, now, rankings) for rankings in tried]
    best = best_trial(tables)
    result = tables[best]
    for row in result["questions"]:
        row["question"] = row["question"][:MAX_QUESTION_CHARS]
    if sweep is not None:
        result["sweep"] = sweep_summary(next(iter(sweep)), trials, tables)
    return result | {
        "set_id": query_set.set_id,
        "name": query_set.name,
        "mode_now": mode_now,
        "mode_trial": modes[best],
        "fusion_now": fusion_summary(fusion_now),
        "fusion_trial": fusion_summary(fusions[best]) if fusions else None,
        "settings": trials[best],
        "toml": toml_lines(trials[best]),
    }


def try_settings(
    settings: Settings,
    tenant: str,
    name: str,
    trial: Any,
    *,
    client: Any,
    embedder: Any = None,
    sweep: Any = None,
) -> dict[str, Any]:
    """``loader judgments try``: ``run_trial`` on ``tenant``'s query set ``name``.

    Raises:
        ConfigError: a bad trial (before the cluster is asked).
        InputError: a set too large to try.
        NotFoundError: no such set of this tenant.
    """
    from loader.query.judgments import find_query_set, judging_state

    if sweep is None:  # before the cluster is asked
        check_trial(trial)
    else:
        sweep_trials(trial, sweep)
    settings = settings.replace(query_log="off")  # scoring a set is no user's search
    query_set = find_query_set(client, settings.index_name, tenant, name)
    state = judging_state(client, settings.index_name, tenant, query_set.set_id)
    where = {"client": client, "embedder": embedder, "sweep": sweep}
    return run_trial(settings, query_set, state, trial, **where)
