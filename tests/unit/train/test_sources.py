"""What `loader learn` reads of its sources: a questions file's chunk grades, its click-derived
lines (weighed --implicit-weight in the model's sample weights), a line without judgments graded
by its source; a BEIR folder's split, searched in the index eval built as eval's tenant."""

from __future__ import annotations

import json

import numpy as np

from loader.models.rerank.features import FEATURE_NAMES
from loader.settings import Settings
from loader.train.booster import lightgbm_dataset
from loader.train.examples import Example
from loader.train.learn import LearnRequest
from loader.train.sources import BY_CHUNK, BY_DOCUMENT, read_source
from tests.paths import FIXTURES

SETTINGS = Settings(index_name="docs")


def test_a_questions_file_keeps_chunk_grades_and_marks_click_derived_lines(tmp_path):
    lines = [
        {"question": "refunds?", "source": "refunds.md",
         "judgments": [{"chunk_id": "c-1", "source": "refunds.md", "grade": 2},
                       {"chunk_id": "c-2", "source": "refunds.md", "grade": 0}]},
        {"question": "clicked?", "source": "faq.md", "implicit": True,
         "judgments": [{"chunk_id": "c-9", "source": "faq.md", "grade": 1}]},
        {"question": "no grades?", "source": "./kb/setup.md"},
        {"question": "all zero?", "source": "x.md",
         "judgments": [{"chunk_id": "c-5", "source": "x.md", "grade": 0}]},
    ]  # fmt: skip
    path = tmp_path / "q.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    source = read_source(
        path,
        split="train",
        tenant="acme",
        index_prefix="eval",
        index_name=SETTINGS.index_name,
        chunk_strategy=SETTINGS.chunk_strategy,
    )
    assert (source.kind, source.index, source.tenant, source.one_per_document) == (
        "questions", "docs", "acme", False,
    )  # fmt: skip
    first, clicked, by_source = source.questions  # the all-zero line teaches nothing: left out
    assert (first.by, dict(first.grades), first.implicit) == (BY_CHUNK, {"c-1": 2, "c-2": 0}, False)
    assert first.relevant() == {"c-1": 2}
    assert clicked.implicit is True and dict(clicked.grades) == {"c-9": 1}
    assert (by_source.by, dict(by_source.grades)) == (BY_DOCUMENT, {"kb/setup.md": 1})
    assert source.describe()["implicit"] == 1


def test_a_beir_folder_is_searched_in_the_index_eval_built_for_it():
    source = read_source(
        FIXTURES / "eval" / "tiny-beir",
        split="train",
        tenant="acme",
        index_prefix="sfa",
        index_name=SETTINGS.index_name,
        chunk_strategy=SETTINGS.chunk_strategy,
    )
    assert (source.kind, source.tenant, source.one_per_document) == ("beir", "eval", True)
    assert source.index == f"sfa-tiny-beir-{SETTINGS.chunk_strategy}"
    assert source.questions and all(q.by == BY_DOCUMENT for q in source.questions)


def test_click_derived_questions_weigh_the_implicit_weight():
    def example(implicit: bool) -> Example:
        features = np.zeros((3, len(FEATURE_NAMES)))
        labels = np.array([1.0, 0, 0])
        return Example(
            "q", "s", features, np.ones(3), labels, ["a", "b", "c"], {"a": 1}, implicit, []
        )

    request = LearnRequest(sources=("x",), out=FIXTURES, implicit_weight=0.25)
    dataset = lightgbm_dataset(
        [example(False), example(True)], 4.0, request.implicit_weight
    ).construct()
    assert dataset.get_weight().tolist() == [1.0] * 3 + [0.25] * 3
    assert dataset.get_group().tolist() == [3, 3]
    assert dataset.get_init_score().tolist() == [4.0] * 6
