"""The learned rerankers ``loader doctor`` checks: each tenant's model folder the settings name,
its files checked and its booster loaded as every reader does. No cluster needed."""

from __future__ import annotations

from pathlib import Path

from loader.doctor.report import Check
from loader.errors import ModelError


def learned_model_checks(learned_reranker: str, reranker_model: str) -> list[Check]:
    """One line per learned reranker the settings name (each tenant's model folder in
    ``learned_reranker``, or that folder itself when it holds one model; ``reranker_model``
    naming a folder ``loader learn`` wrote): its folder checked and its booster loaded as every
    reader does (``loader.models.rerank.learned``: the files' kind, size, recorded hash and text,
    then a child process first), so a damaged model fails here, naming the file and what is
    wrong, instead of at the first rerank."""
    from loader.models.rerank.check import is_learned_folder, learned_problem

    named = {}
    if learned_reranker:
        named = {folder: "learned_reranker" for folder in _tenant_folders(learned_reranker)}
        named = named or {learned_reranker: "learned_reranker"}  # none: learned_problem says why
    if is_learned_folder(reranker_model):
        named.setdefault(reranker_model, "reranker_model")
    checks = []
    for folder, setting in named.items():
        problem = learned_problem(folder, setting)
        if problem:
            fix = f"train one with `loader learn --out {folder}`, or unset {setting}"
            checks.append(Check("learned reranker", "fail", problem, fix, ModelError))
            continue
        checks.append(_learned_model_check(folder))
    return checks


# The tenants' models doctor checks at most (each is loaded in a child process: ~0.6 s).
MAX_CHECKED_MODELS = 50


def _tenant_folders(root: str) -> list[str]:
    """The model folders under ``learned_reranker``: the folder itself when it holds one model
    (the layout before one model per tenant), else each tenant's folder that holds one."""
    from loader.models.rerank.check import is_learned_folder

    base = Path(root).expanduser()
    if is_learned_folder(root) or not base.is_dir():
        return [root] if is_learned_folder(root) else []
    found = sorted(str(entry) for entry in base.iterdir() if is_learned_folder(str(entry)))
    return found[:MAX_CHECKED_MODELS]


def _learned_model_check(folder: str) -> Check:
    from loader.models.rerank.learned import LearnedReranker

    try:
        model = LearnedReranker(folder)
    except ModelError as exc:
        return Check(
            "learned reranker", "fail", str(exc), "train it again with `loader learn`", ModelError
        )
    whose = f", tenant {model.tenant!r}" if model.tenant else ""
    detail = f"{folder}: {model.booster.num_trees()} trees, SHA-256 {model.sha256[:16]}...{whose}"
    return Check("learned reranker", "ok", detail)
