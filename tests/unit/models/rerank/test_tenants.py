"""A learned model per tenant, from the files alone: a tenant's folder name never leaves the
folder of the learned rerankers whatever the tenant is called; a model reranks only the tenant it
learnt from, or one ``learned_reranker_tenants`` lends it to; a folder of the layout before
per-tenant models is the model of the tenant its provenance records. A search of a tenant whose
model learnt at depth 20 on hybrid-zscore retrieves 20 candidates in hybrid-zscore, unless it
says otherwise (then a warning)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loader.errors import ConfigError
from loader.models.rerank.tenants import tenant_folder_name, tenant_model, tenant_model_folder
from loader.query.request import SearchRequest
from loader.settings import Settings, parse_tenant_map


@pytest.mark.parametrize(
    "tenant",
    ["..", ".", "../x", "../../etc", "/etc/passwd", "a/b", "a\\b", ".hidden", "~", "a/../..",
     "\x00", " ", "..\\..", "%2E%2E", "é", "a b"],
)  # fmt: skip
def test_a_tenants_folder_is_one_component_inside_the_folder(tmp_path, tenant):
    if not tenant.strip():
        with pytest.raises(ConfigError, match="needs a tenant's name"):
            tenant_model_folder(tmp_path, tenant)
        return
    folder = tenant_model_folder(tmp_path, tenant)
    assert folder.parent == tmp_path
    assert folder.resolve().parent == tmp_path.resolve()  # no "..", no separator, no root
    assert not folder.name.startswith(".") and "/" not in folder.name and "\\" not in folder.name


def test_folder_names_are_readable_and_never_shared():
    assert [tenant_folder_name(t) for t in ("acme", "eval", "team-1_a", "acme.com")] == [
        "acme", "eval", "team-1_a", "acme.com"
    ]  # fmt: skip
    tenants = ["A", "a", "%41", "..", ".", "a/b", "a%2Fb", "é", "%C3%A9", ".a", "%2Ea"]
    assert len({tenant_folder_name(t) for t in tenants}) == len(tenants)
    with pytest.raises(ConfigError, match="at most 200"):
        tenant_folder_name("é" * 40)


def test_the_lending_setting_is_checked():
    assert parse_tenant_map(" B=A, C = A ,") == {"B": "A", "C": "A"}
    for bad, said in (("B", "not TENANT=MODEL_TENANT"), ("=A", "not"), ("B=A,B=C", "twice")):
        with pytest.raises(ConfigError, match=said):
            Settings(learned_reranker_tenants=bad)


def _model(folder: Path, **model) -> None:
    folder.mkdir(parents=True)
    (folder / "learned_reranker.txt").write_text("tree\n", encoding="utf-8")
    (folder / "provenance.json").write_text(json.dumps({"model": model}), encoding="utf-8")


def test_a_model_reranks_its_own_tenant_or_one_it_is_lent_to(tmp_path):
    _model(tmp_path / "A", tenant="A", candidate_depth=20, base_mode="hybrid-zscore")
    found = tenant_model(str(tmp_path), "A", "")
    assert (found.folder, found.tenant, found.candidate_depth, found.base_mode) == (
        str(tmp_path / "A"), "A", 20, "hybrid-zscore"
    )  # fmt: skip
    assert "holds no model for tenant 'B'" in tenant_model(str(tmp_path), "B", "")
    assert tenant_model(str(tmp_path), "B", "B=A").folder == str(tmp_path / "A")
    (tmp_path / "x").mkdir()  # tenant "../A" of folder x never reaches x/../A, A's model
    assert "holds no model for tenant '../A'" in tenant_model(str(tmp_path / "x"), "../A", "")
    # A's model copied into B's folder still reranks only A's searches.
    _model(tmp_path / "B", tenant="A")
    assert "learnt from tenant 'A', not 'B'" in tenant_model(str(tmp_path), "B", "")


def test_a_folder_of_the_old_layout_is_the_model_of_its_recorded_tenant(tmp_path):
    old = tmp_path / "old"
    _model(old)  # no tenant in the model part: its sources say whose
    provenance = {"model": {}, "sources": [{"tenant": "eval"}, {"tenant": "eval"}]}
    (old / "provenance.json").write_text(json.dumps(provenance), encoding="utf-8")
    assert tenant_model(str(old), "eval", "").folder == str(old)
    assert "learnt from tenant 'eval', not 'acme'" in tenant_model(str(old), "acme", "")
    assert tenant_model(str(old), "acme", "acme=eval").folder == str(old)
    mixed = {"model": {}, "sources": [{"tenant": "eval"}, {"tenant": "acme"}]}
    (old / "provenance.json").write_text(json.dumps(mixed), encoding="utf-8")
    assert "learnt from no single tenant" in tenant_model(str(old), "eval", "")


def test_a_search_takes_the_depth_and_mode_its_model_learnt_at(tmp_path):
    _model(tmp_path / "A", tenant="A", candidate_depth=20, base_mode="hybrid-zscore")
    settings = Settings(
        learned_reranker=str(tmp_path), reranker_model=str(tmp_path / "no-cross-encoder")
    )
    request = SearchRequest.from_settings(settings, "refund", tenant="A")
    assert (request.rerank, request.mode, request.candidates) == (True, "hybrid-zscore", 20)
    assert request.warnings == ()
    asked = SearchRequest.from_settings(
        settings, "refund", tenant="A", mode="hybrid-rrf", candidates=10
    )
    assert (asked.mode, asked.candidates) == ("hybrid-rrf", 10)  # honoured, and said
    assert any("learnt from hybrid-zscore's candidates" in w for w in asked.warnings)
    assert any("learnt at 20 candidates" in w for w in asked.warnings)
    # Tenant B has no model: no rerank, the settings' mode and depth, and a warning says why.
    other = SearchRequest.from_settings(settings, "refund", tenant="B")
    assert (other.rerank, other.mode, other.candidates) == (False, "hybrid-rrf", 50)
    assert any("holds no model for tenant 'B'" in w for w in other.warnings)
