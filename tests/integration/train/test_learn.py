"""`loader learn` on a real node: a tiny judged corpus whose relevant chunks are planted where
the fusion cannot see them (the last section of each document, every section's text the same),
so a model that learns keeps them first and the guard keeps it; the same questions with shuffled
labels teach nothing and the guard writes nothing. Two tenants share the index with the same file
names: the training examples hold the asked tenant's chunks only."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner

from loader.cli import cli
from loader.errors import ModelRejectedError
from loader.index.apply import apply_config
from loader.ingest.sync import push
from loader.models.rerank.check import LEARNED_MODEL_FILE
from loader.models.rerank.features import FEATURE_NAMES, TWO_READERS
from loader.models.rerank.learned import PROVENANCE_FILE
from loader.train.examples import collect_examples
from loader.train.learn import LearnRequest
from loader.train.learn import learn as learn_reranker
from loader.train.sources import read_source
from tests.paths import FIXTURES
from tests.unit.models.rerank.test_two_readers import SECOND
from tests.unit.models.rerank.test_two_readers import write as write_two_reader_model

TOPICS = 24
DOCS_PER_TOPIC = 3
SECTIONS = 3
PLANTED = SECTIONS - 1  # the relevant chunk of each document: its last section
FAST = ["--mode", "bm25", "--rounds", "160", "--folds", "3", "--json"]
_SYLLABLES = ["ka", "lo", "mi", "ne", "su", "ta", "vo", "ri", "pe", "du", "go", "zi"]


def topic_words(number: int) -> tuple[str, str]:
    rng = random.Random(number)
    return tuple("".join(rng.sample(_SYLLABLES, 3)) + str(number) for _ in range(2))


def write_corpus(folder: Path, filler: str) -> None:
    """Per topic, documents whose sections all say the same about its two words."""
    folder.mkdir(parents=True)
    for topic in range(TOPICS):
        first, second = topic_words(topic)
        for doc in range(DOCS_PER_TOPIC):
            sections = [
                f"## Part {n}\n\nThe {first} of the {second} is {filler} here.\n"
                for n in range(SECTIONS)
            ]
            (folder / f"t{topic}-d{doc}.md").write_text(
                f"# Notes {topic}-{doc}\n\n" + "\n".join(sections), encoding="utf-8"
            )


@pytest.fixture
def corpus(client, base_settings, unique_name, embedder, tmp_path):
    """Tenant A's corpus, and tenant B's with the same file names (and more of the words)."""
    settings = base_settings.replace(index_name=unique_name)
    apply_config(settings, dimension=embedder.dimension, client=client)
    write_corpus(tmp_path / "a" / "docs", "described")
    write_corpus(tmp_path / "b" / "docs", "many things")
    for tenant in ("A", "B"):
        folder = tmp_path / tenant.lower() / "docs"
        report = push(folder, settings, client=client, embedder=embedder, tenant=tenant)
        assert report.failed == 0
    client.indices.refresh(index=unique_name)
    return settings


def chunk_ids(client, settings, tenant: str) -> dict[tuple[str, int], str]:
    """(source, position) -> chunk id of the tenant's chunks."""
    answer = client.search(
        index=settings.index_name,
        body={"size": 1000, "query": {"term": {"tenant": tenant}},
              "_source": ["chunk_id", "source", "position"]},
    )  # fmt: skip
    return {
        (hit["_source"]["source"], hit["_source"]["position"]): hit["_source"]["chunk_id"]
        for hit in answer["hits"]["hits"]
    }


def questions_file(
    path: Path, ids: dict[tuple[str, int], str], shuffled: bool, topics: int = TOPICS
) -> Path:
    """A questions file (``loader judgments export``'s format) grading the planted chunks 2,
    or, ``shuffled``, a random section of a random document of the topic instead; the first
    ``topics`` topics."""
    rng = random.Random(7)
    lines = []
    for topic in range(topics):
        first, second = topic_words(topic)
        judged = []
        for doc in range(DOCS_PER_TOPIC):
            position = rng.randrange(SECTIONS) if shuffled else PLANTED
            source = next(s for s, _ in ids if s.endswith(f"t{topic}-d{doc}.md"))
            judged.append({"chunk_id": ids[(source, position)], "source": source, "grade": 2})
        lines.append(
            {"id": f"q{topic}", "question": f"What is the {first} of the {second}?",
             "source": judged[0]["source"], "judgments": judged}
        )  # fmt: skip
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def learn(settings, out: Path, source: Path, *args: str):
    """`loader learn --mode bm25` where bm25 is served (search_mode): the guard's current search
    is what the tenant is served now, here bm25's fusion."""
    return CliRunner().invoke(
        cli,
        ["learn", str(source), "--out", str(out), "--url", settings.opensearch_url,
         "--index", settings.index_name, "--tenant", "A", *FAST, *args],
        env={"LOADER_SEARCH_MODE": "bm25"},
    )  # fmt: skip


def learn_hybrid(settings, out: Path, source: Path, *args: str):
    """`loader learn --json` in the default settings (a hybrid mode served), 160 rounds, 3 folds."""
    return CliRunner().invoke(
        cli,
        ["learn", str(source), "--out", str(out), "--url", settings.opensearch_url,
         "--index", settings.index_name, "--tenant", "A", "--rounds", "160", "--folds", "3",
         "--json", *args],
    )  # fmt: skip


def test_a_model_that_finds_the_planted_chunks_is_kept(corpus, client, tmp_path):
    ids = chunk_ids(client, corpus, "A")
    source = questions_file(tmp_path / "planted.jsonl", ids, shuffled=False)
    out = tmp_path / "model"
    done = learn(corpus, out, source)
    assert done.exit_code == 0, done.output
    result = json.loads(done.stdout)
    assert result["adopted"] is True
    metrics = result["metrics"]
    assert metrics["ndcg@10_learned"] > metrics["ndcg@10_current"] + 0.03
    assert metrics["gain_lower_bound"] > 0
    provenance = json.loads((out / "A" / PROVENANCE_FILE).read_text(encoding="utf-8"))
    assert [f["name"] for f in provenance["model"]["features"]] == list(FEATURE_NAMES)
    assert provenance["sources"][0]["tenant"] == "A" and provenance["guard"]["adopted"] is True
    booster = (out / "A" / LEARNED_MODEL_FILE).read_bytes()  # recorded: every reader checks them
    assert provenance["model"]["file_sha256"] == hashlib.sha256(booster).hexdigest()
    assert provenance["model"]["file_bytes"] == len(booster)
    assert provenance["model"]["trees"] == booster.count(b"\nTree=") > 0
    model = provenance["model"]  # whose, and what it learnt from: what its searches use
    assert (model["tenant"], model["candidate_depth"], model["base_mode"]) == ("A", 50, "bm25")
    assert (out / "A" / LEARNED_MODEL_FILE).is_file() and result["out"] == str(out / "A")
    # The model in a search: learned_reranker names it, rerank = auto takes it (no
    # cross-encoder here), and it ranks the planted chunks higher than fusion does (not all
    # first: with 24 training questions the trees weigh 0.11 beside the fused order's prior).
    rank_sum = {True: 0, False: 0}  # the planted chunks' ranks among their topic's 9 chunks
    for topic in range(4):
        planted = {ids[(s, PLANTED)] for s, _ in ids if s.split("/")[-1].startswith(f"t{topic}-")}
        for rerank in (True, False):
            ranked = search_ranked(corpus, out, tmp_path, rerank, topic)
            assert ranked["reranked"] is rerank
            ids_in_order = [hit["chunk_id"] for hit in ranked["hits"]]
            rank_sum[rerank] += sum(ids_in_order.index(chunk) + 1 for chunk in planted)
    assert rank_sum[True] < rank_sum[False]
    # loader explain: each feature's share of a chunk's learned score, adding up to it.
    explained = CliRunner().invoke(
        cli,
        ["explain", "What is the " + " of the ".join(topic_words(0)) + "?", "--json",
         "--url", corpus.opensearch_url, "--index", corpus.index_name, "--tenant", "A",
         "--mode", "bm25", "--k", "3", "--rerank"],
        env={"LOADER_LEARNED_RERANKER": str(out), "LOADER_RERANKER_MODEL": str(tmp_path / "no")},
    )  # fmt: skip
    assert explained.exit_code == 0, explained.output
    first = json.loads(explained.stdout)["explanations"][0]
    shares = first["rerank_shares"]
    assert {"prior", "bias", *FEATURE_NAMES} == set(shares)
    rerank = next(stage for stage in first["stages"] if stage["stage"] == "rerank")
    assert sum(shares.values()) == pytest.approx(rerank["score"], abs=1e-6)


def search_ranked(
    settings, model: Path, tmp_path: Path, rerank: bool, topic: int, *args: str
) -> dict:
    question = "What is the " + " of the ".join(topic_words(topic)) + "?"
    searched = search_cli(settings, model, tmp_path, question, "--mode", "bm25",
                          "--k", str(DOCS_PER_TOPIC * SECTIONS),
                          *([] if rerank else ["--no-rerank"]), *args)  # fmt: skip
    assert searched.exit_code == 0, searched.output
    return json.loads(searched.stdout)


def search_cli(settings, model: Path, tmp_path: Path, question: str, *args: str):
    """`loader search --json` as tenant A, with the learned rerankers of ``model`` (and no
    cross-encoder: rerank = auto takes the learned model)."""
    return CliRunner().invoke(
        cli,
        ["search", question, "--json", "--url", settings.opensearch_url,
         "--index", settings.index_name, "--tenant", "A", *args],
        env={"LOADER_LEARNED_RERANKER": str(model), "LOADER_RERANKER_MODEL": str(tmp_path / "no")},
    )  # fmt: skip


def test_the_depth_and_the_base_learnt_at_are_what_the_search_uses(corpus, client, tmp_path):
    ids = chunk_ids(client, corpus, "A")
    out = tmp_path / "models"
    done = learn(
        corpus, out, questions_file(tmp_path / "q.jsonl", ids, False), "--candidates", "20"
    )
    assert done.exit_code == 0, done.output
    model = json.loads((out / "A" / PROVENANCE_FILE).read_text(encoding="utf-8"))["model"]
    assert (model["candidate_depth"], model["base_mode"]) == (20, "bm25")
    # Four topics' words: 36 chunks match in bm25, more than the depths asked below.
    question = " ".join(word for topic in range(4) for word in topic_words(topic))
    # No --mode, no --candidates (the settings say hybrid-rrf and 50): the model's.
    found = search_cli(corpus, out, tmp_path, question)
    assert found.exit_code == 0, found.output
    result = json.loads(found.stdout)
    assert (result["mode"], result["candidates"], result["rerank_depth"]) == ("bm25", 20, 20)
    assert result["reranked"] is True and result["warnings"] == []
    # Asked for more candidates and another mode: honoured, the model reranks its 20, and says.
    asked = search_cli(corpus, out, tmp_path, question, "--mode", "hybrid-rrf",
                       "--candidates", "10", "--k", "30")  # fmt: skip
    assert asked.exit_code == 0, asked.output
    result = json.loads(asked.stdout)
    assert (result["mode"], result["candidates"], result["rerank_depth"]) == ("hybrid-rrf", 30, 20)
    assert any("learnt from bm25's candidates" in warning for warning in result["warnings"])
    ranks = [hit["ranks"]["rerank"] for hit in result["hits"]]
    tail = result["hits"][20:]  # beyond the depth: in retrieval order
    assert ranks == sorted(ranks) and [h["ranks"]["retrieval"] for h in tail] == sorted(
        h["ranks"]["retrieval"] for h in tail
    )


def test_without_a_mode_the_base_is_the_hybrid_fusion_served_best(corpus, client, tmp_path):
    ids = chunk_ids(client, corpus, "A")
    source = questions_file(tmp_path / "planted.jsonl", ids, shuffled=False)
    out = tmp_path / "models"
    done = learn_hybrid(corpus, out, source)
    assert done.exit_code in (0, ModelRejectedError.exit_code), done.output
    base = json.loads(done.stdout)["provenance"]["base"]
    modes = base["modes"]
    assert set(modes) == {"hybrid-rrf", "hybrid-minmax", "hybrid-zscore"}
    best = max(modes.values(), key=lambda figures: figures["ndcg@10_learned"])
    assert modes[base["chosen"]] == best
    assert base["served_now"] == "fusion over hybrid-rrf's candidates"
    if done.exit_code == 0:
        model = json.loads((out / "A" / PROVENANCE_FILE).read_text(encoding="utf-8"))["model"]
        assert model["base_mode"] == base["chosen"]


def test_retraining_in_place_is_judged_against_the_model_served_and_never_replaces_it_by_a_worse(
    corpus, client, tmp_path
):
    ids = chunk_ids(client, corpus, "A")
    source = questions_file(tmp_path / "planted.jsonl", ids, shuffled=False)
    out = tmp_path / "model"
    assert learn(corpus, out, source).exit_code == 0
    served = (out / "A" / LEARNED_MODEL_FILE).read_bytes()
    # The served model learnt from every one of these questions: it scores itself in-sample
    # there, so nothing judges a new model against it. Refused, and it stays, byte for byte.
    again = learn(corpus, out, source, "--rounds", "20")
    assert again.exit_code == ModelRejectedError.exit_code, again.output
    metrics = json.loads(again.stdout)["metrics"]
    assert metrics["served"] == f"the model in {out / 'A'}" and metrics["served_unseen"] == 0
    assert metrics["against"] == "fusion" and metrics["gain_lower_bound"] > 0
    assert "judge new ones to retrain it" in again.stderr
    assert (out / "A" / LEARNED_MODEL_FILE).read_bytes() == served


def test_retraining_with_new_questions_is_judged_on_those_the_served_model_never_saw(
    corpus, client, tmp_path
):
    """What a model learnt from is recorded by the questions' text: a second file, elsewhere,
    holding those questions and new ones is judged against the served model on the new ones."""
    ids = chunk_ids(client, corpus, "A")
    out = tmp_path / "model"
    first = learn(corpus, out, questions_file(tmp_path / "first.jsonl", ids, False, topics=16))
    assert first.exit_code == 0, first.output  # kept: the planted chunks, 16 questions
    provenance = json.loads((out / "A" / PROVENANCE_FILE).read_text(encoding="utf-8"))
    assert len(provenance["model"]["learnt_from"]) == 16
    served = (out / "A" / LEARNED_MODEL_FILE).read_bytes()
    export = tmp_path / "exported-again" / "all.jsonl"
    export.parent.mkdir()
    done = learn(corpus, out, questions_file(export, ids, shuffled=False))
    result = json.loads(done.stdout)
    assert "learnt_from" not in result["provenance"]["model"]  # in the file, not on stdout
    metrics = result["metrics"]
    assert metrics["served_unseen"] == TOPICS - 16, metrics  # the 8 new questions alone
    kept = metrics["gain_lower_bound"] > 0 and metrics["gain_over_served"] >= 0
    rejected = ModelRejectedError.exit_code
    assert result["adopted"] is kept and done.exit_code == (0 if kept else rejected), done.output
    now = (out / "A" / LEARNED_MODEL_FILE).read_bytes()
    assert (now != served) is kept
    if kept:
        provenance = json.loads((out / "A" / PROVENANCE_FILE).read_text(encoding="utf-8"))
        assert len(provenance["model"]["learnt_from"]) == TOPICS


def test_shuffled_labels_are_refused_and_nothing_is_written(corpus, client, tmp_path):
    ids = chunk_ids(client, corpus, "A")
    source = questions_file(tmp_path / "shuffled.jsonl", ids, shuffled=True)
    out = tmp_path / "model"
    done = learn(corpus, out, source)
    assert done.exit_code == ModelRejectedError.exit_code, done.output
    assert json.loads(done.stdout)["adopted"] is False
    assert "nothing written" in done.stderr
    assert not out.exists() or not any(out.rglob("*"))


def test_learn_says_what_it_read_and_how_far_the_search_is(corpus, client, tmp_path):
    """A 400-question file was searched in 11 to 14 minutes of silence (issue #52): the sources
    read, the searches done (every 20 s and at the end), the training and the measuring are
    each a progress line."""
    ids = chunk_ids(client, corpus, "A")
    source = questions_file(tmp_path / "planted.jsonl", ids, shuffled=False)
    lines: list[str] = []
    request = LearnRequest(
        sources=(source,), out=tmp_path / "model", tenant="A", mode="bm25", rounds=20
    )
    learn_reranker(request, corpus, client=client, on_event=lines.append)
    assert lines[0] == f"read {source}: {TOPICS} judged questions"
    searched = [line for line in lines if line.startswith("searched ")]
    # In bm25, and in the served search_mode: the guard's "current search" is fusion there.
    modes = len({"bm25", corpus.search_mode})
    what = "questions" if modes == 1 else f"searches ({modes} modes)"
    total = TOPICS * modes
    assert searched and searched[-1].startswith(f"searched {total} of {total} {what} in ")
    assert any(line.startswith("cross-validating over 5 folds of ") for line in lines)
    assert any(line.startswith("training: 20 rounds on ") for line in lines)


def test_examples_hold_only_the_asked_tenants_chunks(corpus, client, tmp_path):
    ids_a = chunk_ids(client, corpus, "A")
    assert {s for s, _ in ids_a} == {s for s, _ in chunk_ids(client, corpus, "B")}  # same files
    source = read_source(
        questions_file(tmp_path / "planted.jsonl", ids_a, shuffled=False),
        split="train",
        tenant="A",
        index_prefix="eval",
        index_name=corpus.index_name,
        chunk_strategy=corpus.chunk_strategy,
    )
    request = LearnRequest(sources=(source.path,), out=tmp_path / "unused", mode="bm25")
    examples = collect_examples(
        [(source, q) for q in source.questions],
        corpus.replace(query_log="off"),
        client,
        mode=request.mode,
        candidates=request.candidates,
    )
    assert len(examples) == TOPICS
    assert {tenant for example in examples for tenant, _ in example.chunks} == {"A"}
    # B's copies hold "many things" instead of "described": one more term, so a longer chunk
    # with another BM25 score. Had the lookup let them in, the content scores would differ.
    for example in examples:
        assert example.features.shape == (DOCS_PER_TOPIC * SECTIONS, len(FEATURE_NAMES))
        column = example.features[:, FEATURE_NAMES.index("content_ratio")]
        assert column.max() == pytest.approx(1.0)


def test_a_beir_folder_without_its_eval_index_is_named(base_settings, unique_name, tmp_path):
    folder = FIXTURES / "eval" / "tiny-beir"
    train = tmp_path / "tiny"  # ten judged questions: enough to reach the index check
    (train / "qrels").mkdir(parents=True)
    (train / "corpus.jsonl").write_bytes((folder / "corpus.jsonl").read_bytes())
    queries = [{"_id": f"q{n}", "text": f"question {n}"} for n in range(10)]
    (train / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), "utf-8")
    doc = json.loads((folder / "corpus.jsonl").read_text("utf-8").splitlines()[0])["_id"]
    qrels = "query-id\tcorpus-id\tscore\n" + "".join(f"q{n}\t{doc}\t1\n" for n in range(10))
    (train / "qrels" / "train.tsv").write_text(qrels, encoding="utf-8")
    done = CliRunner().invoke(
        cli,
        ["learn", str(train), "--out", str(tmp_path / "model"), "--index-prefix", unique_name,
         "--url", base_settings.opensearch_url, "--json"],
    )  # fmt: skip
    assert done.exit_code == 2, done.output
    assert f"index '{unique_name}-tiny-structure' does not exist; run `loader eval" in done.stderr


def test_a_model_over_two_readers_records_them_and_needs_its_second_reader(
    corpus, client, tmp_path
):
    """The corpus holds both readers (the default settings, bge-small's jar here): a hybrid
    base gives the model both readers' features; search and explain compute them; settings
    without the second reader refuse the model, naming the setting."""
    ids = chunk_ids(client, corpus, "A")
    source = questions_file(tmp_path / "planted.jsonl", ids, shuffled=False)
    out = tmp_path / "models"
    done = learn_hybrid(corpus, out, source, "--mode", "hybrid-rrf")
    assert done.exit_code == 0, done.output
    model = json.loads((out / "A" / PROVENANCE_FILE).read_text(encoding="utf-8"))["model"]
    assert (model["readers"], model["second_reader"]) == (2, "bge-small-en-v1.5")
    assert [f["name"] for f in model["features"]] == list(TWO_READERS.names)
    question = "What is the " + " of the ".join(topic_words(0)) + "?"
    found = search_cli(corpus, out, tmp_path, question)
    assert found.exit_code == 0, found.output
    assert json.loads(found.stdout)["reranked"] is True
    # A model whose trees lean on the second reader's rank (synthetic, tenant A's): explain's
    # shares add up to the search's score only if its lookup sent the second vector too.
    out = tmp_path / "leaning"
    write_two_reader_model(
        out / "A", len(TWO_READERS.names), "second_vector_rank", second_reader=SECOND,
        base_mode="hybrid-rrf", candidate_depth=50,
    )  # fmt: skip
    explained = CliRunner().invoke(
        cli,
        ["explain", question, "--json", "--url", corpus.opensearch_url, "--index",
         corpus.index_name, "--tenant", "A", "--mode", "hybrid-rrf", "--k", "3", "--rerank"],
        env={"LOADER_LEARNED_RERANKER": str(out), "LOADER_RERANKER_MODEL": str(tmp_path / "no")},
    )  # fmt: skip
    assert explained.exit_code == 0, explained.output
    first = json.loads(explained.stdout)["explanations"][0]
    assert {"prior", "bias", *TWO_READERS.names} == set(first["rerank_shares"])
    rerank = next(stage for stage in first["stages"] if stage["stage"] == "rerank")
    assert sum(first["rerank_shares"].values()) == pytest.approx(rerank["score"], abs=1e-6)
    one_reader = CliRunner().invoke(
        cli,
        ["search", question, "--json", "--url", corpus.opensearch_url,
         "--index", corpus.index_name, "--tenant", "A", "--rerank"],
        env={"LOADER_LEARNED_RERANKER": str(out), "LOADER_RERANKER_MODEL": str(tmp_path / "no"),
             "LOADER_SECOND_EMBEDDING_MODEL": "none"},
    )  # fmt: skip
    assert one_reader.exit_code != 0
    assert "second_embedding_model = 'none' gives none" in one_reader.output
