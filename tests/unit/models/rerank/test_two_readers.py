"""The learned reranker over two readers (issue #53, item 5), without a cluster: the second
reader's cosine looked up on ``second_embedding`` and turned into four columns after the first
reader's (worked out by hand); a model records its feature set and second reader; a one-reader
model keeps reranking on settings and queries with two readers (its lookup and columns
unchanged); a two-reader model is refused, naming ``second_embedding_model``, where its second
reader is missing or another, and its columns are missing (NaN) in a search that sends no second
vector."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from loader.errors import ModelError, RerankerUnavailableError
from loader.models.rerank import RerankQuery, load_reranker
from loader.models.rerank.check import LEARNED, choose_reranker, default_rerank
from loader.models.rerank.features import (
    FEATURE_NAMES,
    ONE_READER,
    TWO_READERS,
    feature_lookup,
    feature_matrix,
    feature_set_of,
    feature_set_of_width,
)
from loader.models.rerank.learned import PRIOR, PROVENANCE_FILE, LearnedReranker
from loader.settings import Settings
from loader.train.booster import train_booster
from loader.train.examples import searched_features
from loader.train.learn import LearnRequest
from loader.train.model_store import write_model
from tests.unit.models.rerank.test_features import ANSWERS, HITS, QUERY, answer
from tests.unit.models.rerank.test_learned import synthetic

SECOND = "bge-small-en-v1.5"
TWO = RerankQuery(**{**QUERY.__dict__, "second_query_vector": [0.3, 0.4]})
SECOND_ANSWER = answer({"a-0": 0.6, "a-1": 0.8, "b-3": 0.7})  # bge prefers a-1


def column(matrix: np.ndarray, name: str) -> list[float]:
    return matrix[:, TWO_READERS.names.index(name)].tolist()


def test_the_second_readers_cosine_is_four_columns_after_the_first_readers():
    lines = feature_lookup(TWO, HITS, TWO_READERS)
    assert len(lines) == 10  # content, heading, vector, exact, second_vector
    script = lines[-1]["query"]["bool"]["must"]["script_score"]["script"]["params"]
    assert script["field"] == "second_embedding" and script["query_value"] == [0.3, 0.4]
    assert {"term": {"tenant": "A"}} in lines[-1]["query"]["bool"]["filter"]
    matrix = feature_matrix(TWO, HITS, [*ANSWERS, SECOND_ANSWER], TWO_READERS)
    assert matrix.shape == (3, len(FEATURE_NAMES) + 4)
    assert TWO_READERS.names[: len(FEATURE_NAMES)] == FEATURE_NAMES
    # A two-reader row begins with the one-reader row.
    assert np.array_equal(matrix[:, : len(FEATURE_NAMES)], feature_matrix(QUERY, HITS, ANSWERS))
    # 0.6, 0.8, 0.7: min-max 0, 1, 0.5; ratio to 0.8; ranks 3, 1, 2.
    assert column(matrix, "second_vector_minmax") == pytest.approx([0.0, 1.0, 0.5])
    assert column(matrix, "second_vector_ratio") == pytest.approx([0.75, 1.0, 0.875])
    spread = math.sqrt((0.01 + 0.01 + 0) / 3)
    assert column(matrix, "second_vector_zscore") == pytest.approx([-0.1 / spread, 0.1 / spread, 0])
    assert column(matrix, "second_vector_rank") == pytest.approx([1 / 3, 1.0, 0.5])


def test_the_one_reader_lookup_and_fingerprint_are_unchanged_by_a_second_vector():
    assert len(feature_lookup(TWO, HITS)) == 8  # no second_embedding sub-query
    assert feature_matrix(TWO, HITS, ANSWERS).shape == (3, len(FEATURE_NAMES))
    # Every model trained before two readers records this fingerprint: it still loads.
    assert ONE_READER.fingerprint() == "6e967edf1b8236b9"
    assert feature_set_of(TWO_READERS.fingerprint()) is TWO_READERS
    assert feature_set_of("0123abcd") is None
    assert feature_set_of_width(len(FEATURE_NAMES) + 4) is TWO_READERS


def test_without_the_second_readers_vector_its_columns_are_missing():
    lines = feature_lookup(QUERY, HITS, TWO_READERS)
    assert len(lines) == 8  # the second reader's sub-query cannot run
    matrix = feature_matrix(QUERY, HITS, ANSWERS, TWO_READERS)
    assert all(math.isnan(v) for v in column(matrix, "second_vector_minmax"))


def test_the_search_gives_both_readers_features_only_in_a_hybrid_mode_with_two():
    assert searched_features("hybrid-rrf", SECOND) is TWO_READERS
    assert searched_features("hybrid-zscore", SECOND) is TWO_READERS
    assert searched_features("vector", SECOND) is ONE_READER
    assert searched_features("hybrid-rrf", None) is ONE_READER


def write(folder: Path, width: int, signal: str, **model) -> Path:
    request = LearnRequest(sources=("synthetic",), out=Path("unused"), rounds=30)
    at = TWO_READERS.names.index(signal)
    booster = train_booster(synthetic(80, 1, width, at, others_below=0.6), request)
    features = TWO_READERS if width > len(FEATURE_NAMES) else ONE_READER
    provenance = {
        "model": {"feature_fingerprint": features.fingerprint(), "feature_version": 1,
                  "prior_scale": 2.0, "residual_weight": 0.5, "tenant": "A",
                  "readers": features.readers, **model}
    }  # fmt: skip
    write_model(folder, booster, provenance)
    return folder


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    """One folder of per-tenant models per kind: ``one/A`` (one reader's features), ``two/A``
    (two readers', learnt with bge-small-en-v1.5)."""
    root = tmp_path_factory.mktemp("models")
    write(root / "one" / "A", len(FEATURE_NAMES), "heading_overlap")
    width = len(TWO_READERS.names)
    # No prior: its order is the trees' alone, which learnt the second reader's signal.
    write(root / "two" / "A", width, "second_vector_rank", second_reader=SECOND, prior_scale=0.0)
    return root


def hits_and_answers():
    return HITS, [*ANSWERS, SECOND_ANSWER]


def test_a_two_reader_model_ranks_by_the_second_readers_cosine(models):
    model = LearnedReranker(models / "two" / "A")
    assert model.feature_set is TWO_READERS and model.second_reader == SECOND
    hits, answers = hits_and_answers()
    assert len(model.lookup(TWO, hits)) == 10
    scores = model.score(TWO, hits, answers)
    assert int(np.argmax(scores)) == 1  # a-1, second by fusion, first by the second reader
    shares = model.contributions(TWO, hits, answers)
    assert set(shares[0]) == {PRIOR, *TWO_READERS.names, "bias"}
    assert [sum(s.values()) for s in shares] == pytest.approx(scores, abs=1e-6)


def test_a_one_reader_model_reranks_a_search_with_two_readers_as_before(models):
    model = LearnedReranker(models / "one" / "A")
    assert model.feature_set is ONE_READER and model.second_reader == ""
    lines = model.lookup(TWO, HITS)
    assert len(lines) == 8 and "second_embedding" not in json.dumps(lines)
    assert model.score(TWO, HITS, ANSWERS) == model.score(QUERY, HITS, ANSWERS)
    settings = Settings(
        second_embedding_model=SECOND, rerank_backend="learned",
        learned_reranker=str(models / "one"),
    )  # fmt: skip
    assert choose_reranker(settings, "A").kind == LEARNED
    assert load_reranker(settings, "A").feature_set is ONE_READER


def test_a_two_reader_model_is_refused_without_its_second_reader_naming_the_setting(models):
    for second in ("none", "e5-small-v2"):
        settings = Settings(
            second_embedding_model=second, rerank_backend="learned",
            learned_reranker=str(models / "two"),
        )  # fmt: skip
        choice = choose_reranker(settings, "A")
        assert choice.kind == ""
        assert f"second_embedding_model = '{second}'" in choice.problem
        assert f"set second_embedding_model = {SECOND}" in choice.problem
        with pytest.raises(RerankerUnavailableError, match="second_embedding_model"):
            load_reranker(settings, "A")
        rerank, warning = default_rerank(settings.replace(rerank="auto"), "A")
        assert not rerank and "second_embedding_model" in warning  # auto: no rerank, said why
    with_it = Settings(
        second_embedding_model=SECOND, rerank_backend="learned",
        learned_reranker=str(models / "two"),
    )  # fmt: skip
    assert choose_reranker(with_it, "A").kind == LEARNED


def test_a_two_reader_provenance_must_name_its_second_reader(models, tmp_path):
    folder = tmp_path / "A"
    folder.mkdir()
    for name in ("learned_reranker.txt", PROVENANCE_FILE):
        (folder / name).write_bytes((models / "two" / "A" / name).read_bytes())
    provenance = json.loads((folder / PROVENANCE_FILE).read_text(encoding="utf-8"))
    provenance["model"].pop("second_reader")
    (folder / PROVENANCE_FILE).write_text(json.dumps(provenance), encoding="utf-8")
    with pytest.raises(ModelError, match="two readers' features and model.second_reader names"):
        LearnedReranker(folder)


def test_a_booster_of_the_other_feature_set_is_refused_before_lightgbm_reads_it(models, tmp_path):
    """A one-reader booster under a two-reader provenance (resealed: size and hash match)."""
    from loader.models.rerank.learned_files import model_file_facts

    folder = tmp_path / "A"
    folder.mkdir()
    data = (models / "one" / "A" / "learned_reranker.txt").read_bytes()
    (folder / "learned_reranker.txt").write_bytes(data)
    provenance = json.loads((models / "two" / "A" / PROVENANCE_FILE).read_text(encoding="utf-8"))
    provenance["model"].update(model_file_facts(data))
    provenance["model"]["trees"] = 30
    (folder / PROVENANCE_FILE).write_text(json.dumps(provenance), encoding="utf-8")
    with pytest.raises(ModelError, match="max_feature_idx is '23', not '27'"):
        LearnedReranker(folder)
