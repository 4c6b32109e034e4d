"""What `loader eval` runs: sweeps, configurations and their index aliases."""

from __future__ import annotations

import pytest

from loader.errors import ConfigError, RerankerUnavailableError
from loader.eval.configs import (
    EvalConfig,
    Sweep,
    config_settings,
    index_alias,
    parse_sweep,
    plan_configurations,
    rerank_caption,
    rerank_options,
)
from loader.models.rerank.check import LEARNED_MODEL_FILE, choose_reranker
from loader.settings import Settings


def test_parse_sweep_types_values_like_the_setting():
    assert parse_sweep("chunk_target_tokens=120, 180,240") == Sweep(
        "chunk_target_tokens", (120, 180, 240)
    )
    assert parse_sweep("bm25_weight=0.2,0.5,0.2") == Sweep("bm25_weight", (0.2, 0.5))
    assert parse_sweep("chunk_target_tokens=120").changes_index
    assert not parse_sweep("rrf_rank_constant=20,60").changes_index
    assert not parse_sweep("candidates=50,100").changes_index


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("chunk_target_tokens", "expected SETTING=VALUE1,VALUE2"),
        ("no_such_setting=1", "unknown setting 'no_such_setting'"),
        ("chunk_strategy=fixed", "chunk_strategy cannot be swept (use --strategy)"),
        ("search_mode=bm25", "search_mode cannot be swept (use --mode)"),
        ("opensearch_url=http://x", "opensearch_url cannot be swept"),
        ("chunk_target_tokens=", "give at least one value"),
        ("chunk_target_tokens=120,big", "'big' is not a valid int"),
        ("bm25_weight=0.3,heavy", "'heavy' is not a valid float"),
    ],
)
def test_parse_sweep_errors_name_the_problem(text, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_sweep(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # a bound of the setting: the first value must not run before the second fails
        (
            "rrf_rank_constant=20,0",
            "--sweep rrf_rank_constant=0: setting 'rrf_rank_constant' must be at least 1, got 0",
        ),
        ("bm25_weight=0.5,1.5", "--sweep bm25_weight=1.5: setting 'bm25_weight' must be between"),
        ("candidates=50,0", "--sweep candidates=0: setting 'candidates' must be between 1 and"),
        # the chunking configuration: an overlap not below the target, a target above the model's
        (
            "chunk_target_tokens=100,5",
            "--sweep chunk_target_tokens=5: chunk_overlap_tokens is 27; it must be at least 0 "
            "and below chunk_target_tokens (5)",
        ),
        (
            "chunk_target_tokens=100,400",
            "--sweep chunk_target_tokens=400: chunk_target_tokens is 400; it must be between 1 "
            "and the maximum chunk size (254 tokens)",
        ),
        ("chunk_overlap_tokens=0,180", "--sweep chunk_overlap_tokens=180: chunk_overlap_tokens"),
        ("chunk_max_chars=100", "--sweep chunk_max_chars=100: chunk_max_chars is 100"),
    ],
)
def test_parse_sweep_checks_every_value_up_front(text, message):
    with pytest.raises(ConfigError) as raised:
        parse_sweep(text, Settings())
    assert str(raised.value).startswith(message)


def test_parse_sweep_checks_values_against_the_base_settings():
    # 5 tokens is a fine target once the overlap is 0
    assert parse_sweep("chunk_target_tokens=100,5", Settings(chunk_overlap_tokens=0)).values == (
        100,
        5,
    )


def test_plan_configurations_order_and_names():
    configs = plan_configurations(["structure", "fixed"], ["bm25", "hybrid-rrf"], [False, True])
    assert [c.name for c in configs] == [
        "structure:bm25",
        "structure:bm25+rerank",
        "structure:hybrid-rrf",
        "structure:hybrid-rrf+rerank",
        "fixed:bm25",
        "fixed:bm25+rerank",
        "fixed:hybrid-rrf",
        "fixed:hybrid-rrf+rerank",
    ]


def test_plan_configurations_with_a_sweep_groups_rows_by_value():
    sweep = Sweep("chunk_target_tokens", (120, 240))
    configs = plan_configurations(["structure"], ["bm25", "vector"], [False], sweep)
    assert [c.name for c in configs] == [
        "structure:bm25:chunk_target_tokens=120",
        "structure:vector:chunk_target_tokens=120",
        "structure:bm25:chunk_target_tokens=240",
        "structure:vector:chunk_target_tokens=240",
    ]
    assert configs[0].sweep == {"chunk_target_tokens": 120}


def test_plan_configurations_rejects_an_unknown_mode():
    with pytest.raises(ConfigError, match="mode 'bm42' is not one of"):
        plan_configurations(["structure"], ["bm42"], [False])


def test_index_alias_per_strategy_and_index_side_sweep_value():
    assert index_alias("eval", "SciFact", "sentence-window") == "eval-scifact-sentence-window"
    chunked = EvalConfig("structure", "bm25", sweep_setting="chunk_target_tokens", sweep_value=120)
    assert index_alias("eval", "scifact", "structure", chunked) == (
        "eval-scifact-structure-chunk_target_tokens-120"
    )
    # query-side sweeps search the strategy's own index
    weighted = EvalConfig(
        "structure", "hybrid-minmax", sweep_setting="bm25_weight", sweep_value=0.5
    )
    assert index_alias("eval", "scifact", "structure", weighted) == "eval-scifact-structure"
    assert index_alias("eval", "my docs:v2", "fixed") == "eval-my-docs-v2-fixed"


def test_rerank_options_per_choice(tmp_path):
    model = tmp_path / "cross-encoder"  # what the file-system check looks for
    model.mkdir()
    (model / "config.json").write_text('{"num_labels": 1}', encoding="utf-8")
    settings = Settings(reranker_model=str(model))
    assert rerank_options("on", settings) == ((True,), None)
    assert rerank_options("off", settings) == ((False,), None)
    assert rerank_options("both", settings) == ((False, True), None)
    assert rerank_options(None, settings) == ((True,), None)  # auto, and the model is there
    with pytest.raises(ConfigError, match="rerank 'sometimes' is not one of on, off, both"):
        rerank_options("sometimes", settings)


def test_rerank_options_follow_the_setting_and_refuse_a_missing_model(tmp_path):
    """Without --rerank, eval does what a search does: auto is off (with a warning) when
    reranker_model is nowhere here; --rerank on or both is refused before anything is pushed."""
    missing = Settings(reranker_model=str(tmp_path / "none"))
    reranks, warning = rerank_options(None, missing)
    assert reranks == (False,)
    assert warning.startswith(f"no rerank (rerank = auto): reranker_model '{tmp_path}/none': ")
    assert rerank_options(None, missing.replace(rerank="off")) == ((False,), None)
    for choice in ("on", "both"):
        with pytest.raises(RerankerUnavailableError, match="rerank is on but reranker_model"):
            rerank_options(choice, missing)


def test_config_settings_carry_the_alias_strategy_and_swept_value():
    config = EvalConfig("fixed", "bm25", sweep_setting="bm25_weight", sweep_value=0.5)
    settings = config_settings(Settings(), config, "eval-tiny-fixed")
    assert (settings.index_name, settings.chunk_strategy, settings.bm25_weight) == (
        "eval-tiny-fixed",
        "fixed",
        0.5,
    )
    plain = config_settings(Settings(), EvalConfig("structure", "bm25"), "eval-tiny-structure")
    assert plain == Settings().replace(index_name="eval-tiny-structure")


def test_the_rerank_caption_says_which_reranker_ran_or_why_none_did(tmp_path):
    """results.md is what people read: "no rerank" must not hide in a warning elsewhere."""
    model = tmp_path / "cross-encoder"
    model.mkdir()
    (model / "config.json").write_text('{"num_labels": 1}', encoding="utf-8")
    present = Settings(reranker_model=str(model))
    missing = Settings(reranker_model=str(tmp_path / "none"))

    def caption(choice, settings, swept=None):
        reranks = rerank_options(choice, settings)[0]
        return rerank_caption(
            choice,
            reranks,
            choose_reranker(settings),
            rerank=settings.rerank,
            backend=settings.rerank_backend,
            swept=swept,
        )

    assert caption(None, missing) == "rerank: off (auto: no cross-encoder on this machine)"
    assert caption(None, missing.replace(rerank="off")) == "rerank: off (rerank = off)"
    assert caption("off", present) == "rerank: off (asked for)"
    assert caption(None, present) == f"rerank: cross-encoder {model} on torch (rerank = auto)"
    assert caption("on", present.replace(rerank_backend="onnx")) == (
        f"rerank: cross-encoder {model} on onnx"
    )
    assert caption("both", present) == (
        f"rerank: cross-encoder {model} on torch in the +rerank rows, off in the others"
    )
    keyword = missing.replace(rerank_backend="keyword")
    assert caption(None, keyword) == "rerank: keyword overlap, no model (rerank = auto)"
    assert caption("on", present, swept="reranker_model") == (
        "rerank: as each row's reranker_model"
    )


def test_the_rerank_caption_names_the_learned_model_it_ran_and_a_learned_folder_that_is_not_here(
    tmp_path, monkeypatch
):
    """Issue #52: with the learned model, results.md said "cross-encoder
    cross-encoder/ms-marco-MiniLM-L-6-v2 on torch" (a machine without torch), and a missing
    learned folder "no cross-encoder on this machine"."""
    from loader.models import torch_extra

    monkeypatch.setattr(torch_extra, "torch_extra_missing", lambda: ["torch"])  # no torch here
    learned = tmp_path / "acme-reranker"
    learned.mkdir()
    (learned / LEARNED_MODEL_FILE).write_text("tree\n", encoding="utf-8")

    def caption(choice, settings):
        reranks = rerank_options(choice, settings)[0]
        chosen = choose_reranker(settings)
        return rerank_caption(
            choice, reranks, chosen, rerank=settings.rerank, backend=settings.rerank_backend
        )

    fallback = Settings(learned_reranker=str(learned))  # auto: no cross-encoder, the learned one
    assert caption(None, fallback) == f"rerank: learned reranker {learned} (rerank = auto)"
    by_backend = Settings(rerank_backend="learned", learned_reranker=str(learned))
    assert caption("both", by_backend) == (
        f"rerank: learned reranker {learned} in the +rerank rows, off in the others"
    )
    gone = tmp_path / "gone"
    assert caption(None, Settings(learned_reranker=str(gone))) == (
        f"rerank: off (auto: no cross-encoder on this machine, and no learned reranker in "
        f"learned_reranker {str(gone)!r})"
    )
    assert caption(None, Settings(rerank_backend="learned", learned_reranker=str(gone))) == (
        f"rerank: off (auto: no learned reranker in learned_reranker {str(gone)!r})"
    )
