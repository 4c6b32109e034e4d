"""The searches a judged query set is scored by, wherever it is scored: the judging page's live
scores and snapshots (``loader serve``) and ``loader judgments snapshot`` / ``compare``.

Each question is searched as ``loader eval`` searches (one hit per document, eval's candidate
counts), in every search mode, and reranked by the tenant's learned model over the base it
learnt from when that model is served (the ``learned`` column). The caller passes settings with
the query log off: scoring a set is no user's search.

Example::

    model, base = served_learned_model(settings, "acme")
    rankings = set_rankings(settings, questions, "acme", client=client, embedder=embedder,
                            model=model, base=base)
    take_snapshot(settings, "acme", "week-49", "before the new model", client=client,
                  embedder=embedder)
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from loader.eval.live import top_documents
from loader.eval.snapshot_scores import aligned, compare
from loader.models.readers import canonical_name
from loader.modes import search_mode
from loader.query.request import MAX_CANDIDATES, MAX_QUESTION_CHARS, SearchRequest
from loader.query.search import search
from loader.settings import SEARCH_MODES

if TYPE_CHECKING:
    from loader.query.grades import JudgingState
    from loader.query.snapshots import Snapshot
    from loader.settings import Settings

# The learned model's own column beside the modes' when the tenant has one served: its nDCG@10
# over the candidates of the base it learnt from, reranked as the tenant's searches are.
LEARNED_SCORE = "learned"
Hits = list[tuple[str, str, float]]  # (chunk_id, source, score), best first


def judged_request(
    settings: Settings,
    question: str,
    tenant: str,
    mode: str,
    *,
    rerank: bool = False,
    one_per_document: bool = True,
) -> SearchRequest:
    """The request a judged question is searched with (``loader eval``'s candidate counts): by
    ``judged_hits``, and chunk by chunk (``one_per_document=False``) by a trial's sub-queries."""
    from loader.eval.runner import CHUNKS_PER_DOCUMENT, DEFAULT_CANDIDATES

    return SearchRequest.from_settings(
        settings,
        question[:MAX_QUESTION_CHARS],
        tenant=tenant,
        mode=mode,
        k=DEFAULT_CANDIDATES,
        candidates=min(DEFAULT_CANDIDATES * CHUNKS_PER_DOCUMENT, MAX_CANDIDATES),
        rerank=rerank,
        one_per_document=one_per_document,
    )


def judged_hits(
    settings: Settings,
    question: str,
    tenant: str,
    mode: str,
    *,
    client: Any,
    embedder: Any,
    reranker: Any = None,
) -> Hits:
    """``mode``'s hits of ``question``, searched as ``loader eval`` searches (reranked by
    ``reranker`` when given, at the depth it learnt at)."""
    request = judged_request(settings, question, tenant, mode, rerank=reranker is not None)
    found = search(
        request,
        settings,
        client=client,
        embedder=embedder if search_mode(mode).embeds else None,
        reranker=reranker,
    )
    return [(h.chunk_id, h.source, h.final_score) for h in found.hits]


def column_hits(
    settings: Settings,
    question: str,
    tenant: str,
    *,
    client: Any,
    embedder: Any,
    model: Any = None,
    base: str = "",
) -> dict[str, Hits]:
    """Each column's hits of ``question``: every mode's, and with ``model`` (served over
    ``base``) the ``learned`` column's."""
    where = {"client": client, "embedder": embedder}
    hits = {mode: judged_hits(settings, question, tenant, mode, **where) for mode in SEARCH_MODES}
    if model is not None:
        hits[LEARNED_SCORE] = judged_hits(settings, question, tenant, base, reranker=model, **where)
    return hits


def set_rankings(
    settings: Settings,
    questions: list[str],
    tenant: str,
    *,
    client: Any,
    embedder: Any,
    model: Any = None,
    base: str = "",
) -> list[dict[str, list[str]]]:
    """Each question's top documents per column (``column_hits``), as a snapshot stores them."""
    where = {"client": client, "embedder": embedder, "model": model, "base": base}
    return [
        {
            column: top_documents(hits)
            for column, hits in column_hits(settings, q, tenant, **where).items()
        }
        for q in questions
    ]


def learned_base(model: Any, search_mode: str) -> str:
    """The mode ``model`` reranks: the base it learnt from, else ``search_mode`` (the
    setting)."""
    base = getattr(model, "base_mode", "") or ""
    return base if base in SEARCH_MODES else search_mode


def served_learned_model(settings: Settings, tenant: str) -> tuple[Any, str]:
    """The learned model that reranks ``tenant``'s searches and the mode it reranks; ``None``
    when rerank is off or the tenant has none (its own, or one lent it by name). Files that
    fail their checks raise, naming the file: a snapshot taken without the model served would
    say it was."""
    from loader.models.rerank.check import LEARNED, choose_reranker

    if settings.rerank == "off":
        return None, ""
    choice = choose_reranker(settings, tenant)
    if choice.kind != LEARNED:
        return None, ""
    from loader.models.rerank.learned import load_learned

    model = load_learned(choice.model)
    return model, learned_base(model, settings.search_mode)


def reader_name(name: str) -> str:
    """A reader as a snapshot records it: the registry's name, or a local folder's last part
    (never the server's paths)."""
    if name.startswith(("/", "~", ".")):
        return Path(name).name
    return canonical_name(name)


def served_now(settings: Settings, model: Any, base: str) -> dict[str, Any]:
    """What the set's searches are served with: the settings that shape them and, when the
    tenant's learned model reranks them, its identity as it records it."""
    learned = None
    if model is not None:
        learnt_from = getattr(model, "learnt_from", None)
        learned = {
            "sha256": model.sha256,
            "created": getattr(model, "created", ""),
            "tenant": model.tenant,
            "base_mode": base,
            "questions_learnt_from": None if learnt_from is None else len(learnt_from),
            "candidate_depth": model.candidate_depth,
        }
    second = settings.second_embedding_model or "none"
    return {
        "search_mode": settings.search_mode,
        "rerank": settings.rerank,
        "readers": {
            "embedding_model": reader_name(settings.embedding_model),
            "second_embedding_model": second if second == "none" else reader_name(second),
        },
        "learned": learned,
    }


def comparison_of(
    snapshot: Snapshot,
    questions: list[str],
    state: JudgingState,
    rankings: list[dict[str, list[str]]],
) -> dict[str, Any]:
    """``snapshot`` against today's ``rankings`` of the set's ``questions`` (column -> top
    documents), both scored with today's grades (``state``); the columns both sides hold, and
    those only one side does. Pure."""
    now_columns = list(rankings[0]) if rankings else []
    columns = [c for c in now_columns if c in snapshot.columns]
    graded = [
        [{"source": g.source, "grade": g.grade} for g in state.grades.get(n, {}).values()]
        for n in range(len(questions))
    ]
    then = aligned(snapshot.digests, snapshot.rankings, questions)
    result = compare(then, rankings, graded, columns)
    result["only_then"] = [c for c in snapshot.columns if c not in columns]
    result["only_now"] = [c for c in now_columns if c not in columns]
    return result


def take_snapshot(
    settings: Settings,
    tenant: str,
    name: str,
    label: str,
    *,
    client: Any,
    embedder: Any = None,
    rater: str = "",
) -> Snapshot:
    """Search every question of ``tenant``'s query set ``name`` in every column and store the
    rankings as a snapshot labelled ``label`` (``loader judgments snapshot``).

    Raises:
        InputError: a bad label, or a set too large to snapshot (before any search).
        NotFoundError: no such set of this tenant.
    """
    from loader.query.judgments import find_query_set
    from loader.query.snapshots import check_label, check_question_count, save_snapshot

    label = check_label(label)  # before any search: a bad label costs nothing
    settings = settings.replace(query_log="off")  # scoring a set is no user's search
    query_set = find_query_set(client, settings.index_name, tenant, name)
    check_question_count(query_set.name, len(query_set.questions))
    model, base = served_learned_model(settings, tenant)
    where = {"client": client, "embedder": embedder, "model": model, "base": base}
    return save_snapshot(
        client,
        settings.index_name,
        tenant,
        query_set.set_id,
        label,
        rankings=set_rankings(settings, query_set.questions, tenant, **where),
        questions=query_set.questions,
        served=served_now(settings, model, base),
        rater=rater,
    )


def compare_with_snapshot(
    settings: Settings,
    tenant: str,
    name: str,
    snapshot_id: str = "",
    *,
    client: Any,
    embedder: Any = None,
) -> dict[str, Any]:
    """``tenant``'s query set ``name`` searched now against its snapshot ``snapshot_id`` (the
    newest without one), both scored with today's grades (``comparison_of``); ``served_column``
    names the column its searches are served by (``learned`` when its model reranks them).

    Raises:
        NotFoundError: no such set of this tenant, no such snapshot of it, or none at all.
    """
    from loader.errors import NotFoundError
    from loader.query.judgments import find_query_set, judging_state
    from loader.query.snapshots import get_snapshot, list_snapshots

    settings = settings.replace(query_log="off")  # scoring a set is no user's search
    index = settings.index_name
    query_set = find_query_set(client, index, tenant, name)
    if not snapshot_id:
        newest = list_snapshots(client, index, tenant, query_set.set_id)
        if not newest:
            raise NotFoundError(
                f"query set {name!r} of tenant {tenant!r} has no snapshot: take one first "
                "(loader judgments snapshot, or the question list of the judging page)"
            )
        snapshot_id = newest[0].snapshot_id
    snapshot = get_snapshot(client, index, tenant, query_set.set_id, snapshot_id)
    state = judging_state(client, index, tenant, query_set.set_id)
    model, base = served_learned_model(settings, tenant)
    where = {"client": client, "embedder": embedder, "model": model, "base": base}
    rankings = set_rankings(settings, query_set.questions, tenant, **where)
    result = comparison_of(snapshot, query_set.questions, state, rankings)
    result["snapshot"] = snapshot.summary()
    result["served_now"] = served_now(settings, model, base)
    result["served_column"] = LEARNED_SCORE if model is not None else settings.search_mode
    return result


def check_served_column(result: dict[str, Any], threshold: float) -> None:
    """The gate of ``loader judgments compare``: the served column's mean nDCG@10 (today's
    grades on both sides) must not drop by more than ``threshold``.

    Raises:
        RegressionError: it dropped by more (exit code 10, as ``loader eval --compare``).
        InputError: it was not compared on any question (no graded question, or the column is
            not in the snapshot): a gate that compared nothing has not passed.
    """
    from loader.errors import InputError, RegressionError

    column = result["served_column"]
    mean = result["means"].get(column)
    if not mean or mean["delta"] is None:
        raise InputError(
            f"the served column {column!r} was compared on no question (no question graded "
            "above 0, or the snapshot has no such column): nothing to gate on"
        )
    if mean["delta"] < -threshold:
        raise RegressionError(
            f"{column}: mean nDCG@10 {mean['then']:.4f} -> {mean['now']:.4f} "
            f"({mean['delta']:+.4f}) on {mean['questions']} questions, a drop of more than "
            f"--threshold {threshold}"
        )
