"""The pure parts of `loader eval --tune`: the loader.toml line edit, the space, and the descent
within its budget."""

from __future__ import annotations

import pytest

from loader.errors import ConfigError
from loader.eval.toml_edit import edit_toml, toml_diff, toml_value
from loader.eval.tune import TUNE_SPACE, _descend, parse_space
from loader.settings import Settings

CONFIG = """# our project
tenant = "acme"   # the tenant
candidates = 50 # deep enough
search_mode = "bm25#not-a-comment"  # a hash inside quotes
rerank = false
"""


def test_only_the_changed_lines_change_and_comments_stay():
    edited = edit_toml(CONFIG, {"candidates": 100, "search_mode": "hybrid-rrf"})
    assert edited.splitlines() == [
        "# our project",
        'tenant = "acme"   # the tenant',
        "candidates = 100 # deep enough",
        'search_mode = "hybrid-rrf"  # a hash inside quotes',
        "rerank = false",
    ]
    assert toml_diff(CONFIG, edited, "loader.toml")[5:] == [
        "-candidates = 50 # deep enough",
        '-search_mode = "bm25#not-a-comment"  # a hash inside quotes',
        "+candidates = 100 # deep enough",
        '+search_mode = "hybrid-rrf"  # a hash inside quotes',
        " rerank = false",
    ]


def test_a_missing_setting_is_added_before_any_table_and_line_endings_kept():
    assert edit_toml("a = 1\r\n", {"bm25_weight": 0.5}) == "a = 1\r\nbm25_weight = 0.5\n"
    assert edit_toml("", {"rerank": True}) == "rerank = true\n"
    assert edit_toml("x = 1\n[t]\ny = 2\n", {"z": "v"}) == 'x = 1\nz = "v"\n[t]\ny = 2\n'
    assert edit_toml("x = 1", {"z": 2}) == "x = 1\nz = 2\n"


def test_values_that_cannot_be_written():
    assert toml_value('say "hi"') == '"say \\"hi\\""'
    with pytest.raises(ConfigError, match="only strings, numbers, booleans"):
        toml_value([1])
    with pytest.raises(ConfigError, match="multi-line"):
        edit_toml('tenant = """a\nb"""\n', {"tenant": "x"})


def test_space_is_typed_and_checked():
    bge = Settings(embedding_model="bge-small-en-v1.5")
    assert parse_space([], bge) == TUNE_SPACE and TUNE_SPACE["query_instruction"] == (True, False)
    # MiniLM has no query instruction: leaving it out would measure the same numbers again.
    assert parse_space([], Settings()) == {
        name: values for name, values in TUNE_SPACE.items() if name != "query_instruction"
    }
    space = parse_space(["bm25_weight=0.2,0.5", "search_mode=hybrid-rrf,bm25"], Settings())
    assert space == {"bm25_weight": (0.2, 0.5), "search_mode": ("hybrid-rrf", "bm25")}
    with pytest.raises(ConfigError, match="must be one of"):
        parse_space(["chunk_strategy=nonsense"], Settings())
    with pytest.raises(ConfigError, match="not a valid int"):
        parse_space(["candidates=many"], Settings())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rrf_rank_constant=20,0", "--space rrf_rank_constant=0: setting 'rrf_rank_constant'"),
        ("chunk_target_tokens=100,5", "--space chunk_target_tokens=5: chunk_overlap_tokens is 27"),
        ("candidates=many", "--space candidates: 'many' is not a valid int"),
        ("no_such_setting=1", "--space 'no_such_setting=1': unknown setting"),
        ("bm25_weight=", "--space 'bm25_weight=': give at least one value"),
    ],
)
def test_space_values_are_checked_up_front_and_errors_name_space(text, message):
    with pytest.raises(ConfigError) as raised:
        parse_space([text], Settings())
    assert str(raised.value).startswith(message)
    assert "--sweep" not in str(raised.value)


def test_descent_keeps_only_improvements_within_the_budget():
    scores = {
        ("hybrid-rrf", 60, 50): 0.5,
        ("hybrid-rrf", 20, 50): 0.6,
        ("hybrid-rrf", 20, 100): 0.55,
    }
    measured = []

    def measure(values):
        measured.append(dict(values))
        key = (values["search_mode"], values["rrf_rank_constant"], values["candidates"])
        return {"ndcg@10": scores.get(key, 0.1)}

    start = {
        "search_mode": "hybrid-rrf",
        "rrf_rank_constant": 60,
        "bm25_weight": 0.3,
        "candidates": 50,
    }
    space = {
        "search_mode": ("hybrid-rrf",),
        "rrf_rank_constant": (20, 60),
        "bm25_weight": (0.1, 0.3),
        "candidates": (50, 100),
    }
    best, trials = _descend(measure, start, space, "ndcg@10", budget=10)
    assert best == {**start, "rrf_rank_constant": 20}
    # bm25_weight only matters for min-max: never tried under RRF.
    assert [t.values for t in trials] == measured
    assert [(t.values["rrf_rank_constant"], t.values["candidates"], t.kept) for t in trials] == [
        (60, 50, True),
        (20, 50, True),
        (20, 100, False),
    ]
    _, capped = _descend(measure, start, space, "ndcg@10", budget=2)
    assert len(capped) == 2
    with pytest.raises(ConfigError, match="is not measured"):
        _descend(measure, start, space, "recall@7", budget=2)


@pytest.mark.parametrize(
    ("mode", "setting", "values", "tried"),
    [
        ("hybrid-minmax", "bm25_weight", (0.2, 0.5), [0.3, 0.2, 0.5]),
        ("hybrid-rrf", "rrf_rank_constant", (20, 60), [60, 20]),
        ("hybrid-rrf", "rrf_bm25_weight", (0.4, 0.6), [0.5, 0.4, 0.6]),
        ("hybrid-rrf", "bm25_weight", (0.2, 0.5), [0.3]),  # min-max only: nothing to try
    ],
)
def test_descent_without_search_mode_in_the_space_uses_the_settings_mode(
    mode, setting, values, tried
):
    start = {"bm25_weight": 0.3, "rrf_rank_constant": 60, "rrf_bm25_weight": 0.5}
    start = {setting: start[setting]}
    _, trials = _descend(
        lambda v: {"ndcg@10": 0.5}, start, {setting: values}, "ndcg@10", budget=10, mode=mode
    )
    assert [t.values[setting] for t in trials] == tried


def test_tune_settings_tries_a_one_mode_setting_when_the_space_has_no_search_mode(monkeypatch):
    from loader.eval import tune
    from tests.paths import FIXTURES

    measured = []

    def measure(self, settings):
        measured.append((settings.search_mode, settings.bm25_weight))
        return {"ndcg@10": settings.bm25_weight}

    monkeypatch.setattr(tune._Measurer, "measure", measure)
    request = tune.TuneRequest(FIXTURES / "eval" / "tiny-beir", space=("bm25_weight=0.2,0.5",))
    settings = Settings(search_mode="hybrid-minmax", bm25_weight=0.3)
    result = tune.tune_settings(request, settings, client=object())
    assert measured[:3] == [("hybrid-minmax", 0.3), ("hybrid-minmax", 0.2), ("hybrid-minmax", 0.5)]
    assert result.winner == {"bm25_weight": 0.5}
