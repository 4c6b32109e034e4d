"""Two readers on a real node (issue #53 §4): all-MiniLM-L6-v2 in ``embedding`` and
bge-small-en-v1.5 in ``second_embedding``. Adding the second reader to a pushed one-reader index
is an in-place mapping change, and the next push embeds the second reader's vectors alone; the
stored hybrid template called with one vector answers exactly as the one-reader index does; with
two, the pipeline fuses three ranked sub-queries (BM25 and both readers' k-NN)."""

from __future__ import annotations

import pytest

from loader.doctor.documents import second_reader_check
from loader.index.apply import apply_config, plan_apply
from loader.index.render import config_names
from loader.ingest.sync import push
from loader.models.embedding import embedder_for
from loader.models.readers import SECOND_FIELD, reader_settings
from loader.models.registry import SECOND_READER_META_KEY
from loader.query.request import SearchRequest
from loader.query.search import search

DOCS = {
    "refunds.md": "# Refund policy\n\n## Late deliveries\n\n"
    "Orders delayed by more than 45 minutes get a full refund within five days.\n\n"
    "## Missing items\n\nReport a missing item within two hours and attach a photo.\n",
    "printer.md": "# Printer manual\n\n## Error codes\n\n"
    "Error E1043 means the paper tray is empty; refill it and press resume.\n",
    "password.md": "# Account help\n\n## Passwords\n\n"
    "Reset your password from the login page; the link expires after 30 minutes.\n",
    "delivery.md": "# Delivery\n\n## Areas\n\nWe deliver within 8 km of each kitchen; "
    "the promised time is shown at checkout.\n",
}
QUESTION = "my order came late, can I get my money back?"
TWO = "bge-small-en-v1.5"


@pytest.fixture
def folder(tmp_path):
    folder = tmp_path / "kb"
    folder.mkdir()
    for name, text in DOCS.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def _settings(base_settings, name: str, second: str):
    return base_settings.replace(index_name=name, second_embedding_model=second, rerank="off")


def _mapping(client, alias: str) -> dict:
    (body,) = client.indices.get_mapping(index=alias).values()
    return body["mappings"]


def _count(client, alias: str, query: dict | None = None) -> int:
    return client.count(index=alias, body={"query": query or {"match_all": {}}})["count"]


def test_a_second_reader_is_added_in_place_and_push_embeds_only_it(
    client, base_settings, unique_name, folder
):
    one = _settings(base_settings, unique_name, "none")
    apply_config(one, client=client)
    first = push(folder, one, client=client)
    assert first.failed == 0 and first.second_embedded == 0 and first.embedded == first.chunks
    assert SECOND_FIELD not in _mapping(client, unique_name)["properties"]

    two = one.replace(second_embedding_model=TWO)
    plan = plan_apply(two, client=client)
    index = f"{unique_name}-v1"
    assert [change.line() for change in plan.pending][0].startswith(
        f"~ update mapping {index} (add fields: {SECOND_FIELD})"
    )
    assert not any(change.kind == "index" and change.action == "create" for change in plan.pending)
    apply_config(two, client=client)
    mapping = _mapping(client, unique_name)
    assert mapping["properties"][SECOND_FIELD]["dimension"] == 384
    assert mapping["_meta"][SECOND_READER_META_KEY]["model"] == TWO
    assert _count(client, unique_name) == first.chunks  # the same index, its chunks kept

    lacking_check = second_reader_check(client, two)
    assert lacking_check.status == "fail"
    assert lacking_check.detail.startswith(f"{first.chunks} of {first.chunks} chunks lack")

    filled = push(folder, two, client=client)
    assert filled.failed == 0 and filled.unchanged == len(DOCS)
    assert (filled.embedded, filled.chunks_written) == (0, 0)  # the first reader: nothing
    assert filled.chunks_filled == first.chunks
    assert filled.second_embedded == first.chunks  # every chunk's text differs here
    lacking = {"bool": {"must_not": [{"exists": {"field": SECOND_FIELD}}]}}
    assert _count(client, unique_name, lacking) == 0

    assert second_reader_check(client, two).status == "ok"

    again = push(folder, two, client=client)
    assert (again.embedded, again.second_embedded, again.chunks_filled) == (0, 0, 0)

    (folder / "printer.md").write_text(DOCS["printer.md"] + "\nError E2001: paper jam.\n")
    changed = push(folder, two, client=client)
    assert changed.updated == 1 and changed.embedded == changed.second_embedded >= 1
    assert changed.chunks_filled == 0
    assert _count(client, unique_name, lacking) == 0

    # Another second reader (its fp32 copy; the default runs int8): a new version holding the
    # chunks and the first reader's vectors; the push embeds the new second reader's alone.
    fp32 = two.replace(second_embedding_backend="onnx")
    swapped = apply_config(fp32, client=client)
    (reindex,) = [change for change in swapped.pending if change.kind == "reindex"]
    assert reindex.payload["drop_fields"] == [SECOND_FIELD]
    assert _count(client, unique_name, lacking) == _count(client, unique_name) == changed.chunks
    refilled = push(folder, fp32, client=client)
    assert (refilled.embedded, refilled.unchanged) == (0, len(DOCS))
    assert refilled.chunks_filled == changed.chunks and _count(client, unique_name, lacking) == 0

    # The second reader's vectors are bge's own: a chunk's stored vector is its passage vector
    # (fp32: int8 quantizes each batch's activations, so a text alone differs a little).
    hit = client.search(
        index=unique_name,
        body={"size": 1, "query": {"term": {"source": "password.md"}}},
    )["hits"]["hits"][0]["_source"]
    bge = embedder_for(reader_settings(fp32)).embed_passages([hit["content"]])[0]
    assert sum(a * b for a, b in zip(hit[SECOND_FIELD], bge, strict=True)) == pytest.approx(
        1, abs=1e-3
    )


@pytest.fixture
def indexes(client, base_settings, unique_name, folder):
    """The same folder pushed into a one-reader and a two-reader index."""
    one = _settings(base_settings, f"{unique_name}-one", "none")
    two = _settings(base_settings, f"{unique_name}-two", TWO)
    for settings in (one, two):
        apply_config(settings, client=client)
        assert push(folder, settings, client=client).failed == 0
    return one, two


def _template_hits(client, settings, mode: str, params: dict) -> list[tuple[str, float]]:
    template, pipeline = config_names(settings.index_name).for_search_mode(mode)
    answer = client.search_template(
        index=settings.index_name,
        body={"id": template, "params": params},
        params={"search_pipeline": pipeline},
    )
    return [(hit["_id"], hit["_score"]) for hit in answer["hits"]["hits"]]


def _params(settings, vectors: bool = True, second: bool = False) -> dict:
    request = SearchRequest.from_settings(settings, QUESTION, tenant="default", k=10)
    first = embedder_for(settings).embed_queries([QUESTION])[0].tolist()
    other = reader_settings(settings)
    second_vector = embedder_for(other).embed_queries([QUESTION])[0].tolist() if second else None
    return request.template_params(QUESTION, first if vectors else None, second_vector)


@pytest.mark.parametrize("mode", ["hybrid-rrf", "hybrid-minmax", "hybrid-zscore"])
def test_the_template_called_with_one_vector_answers_as_one_reader(client, indexes, mode):
    one, two = indexes
    alone = _template_hits(client, one, mode, _params(one))
    given_one = _template_hits(client, two, mode, _params(one))
    # Chunk ids are the same in both indexes (tenant, collection, path, position).
    assert [cid for cid, _ in given_one] == [cid for cid, _ in alone]
    assert [score for _, score in given_one] == pytest.approx([score for _, score in alone])


def test_two_vectors_fuse_three_ranked_sub_queries(client, indexes):
    _, two = indexes
    params = _params(two, second=True)
    fused = _template_hits(client, two, "hybrid-rrf", params)
    template, pipeline = config_names(two.index_name).for_search_mode("hybrid-rrf")
    rendered = client.render_search_template(body={"id": template, "params": params})
    queries = rendered["template_output"]["query"]["hybrid"]["queries"]
    assert len(queries) == 4  # BM25, the first reader, the second reader, the exact terms
    ranks = []
    for query in queries:
        hits = client.search(index=two.index_name, body={"size": 10, "query": query})
        ranks.append({hit["_id"]: rank for rank, hit in enumerate(hits["hits"]["hits"], 1)})
    assert all(ranks[:3]) and not ranks[3]  # three ranked lists; no identifier in the question
    assert ranks[1] != ranks[2]  # the readers rank the chunks differently
    stored = client.transport.perform_request("GET", f"/_search/pipeline/{pipeline}")[pipeline]
    combination = stored["phase_results_processors"][0]["score-ranker-processor"]["combination"]
    weights, constant = combination["parameters"]["weights"], combination["rank_constant"]
    share = two.second_reader_share
    assert len(weights) == 4 and weights[1] > 0 and weights[2] > 0
    assert weights[2] == pytest.approx((weights[1] + weights[2]) * share, abs=1e-5)
    for chunk_id, score in fused:
        expected = sum(
            weight / (constant + side[chunk_id])
            for weight, side in zip(weights, ranks, strict=True)
            if chunk_id in side
        )
        assert score == pytest.approx(expected, rel=1e-4)


def test_search_sends_both_vectors(client, indexes):
    _, two = indexes
    request = SearchRequest.from_settings(two, QUESTION, tenant="default")
    result = search(request, two, client=client)
    assert result.hits and result.hits[0].source == "refunds.md"
    only_second = two.replace(second_reader_share=1.0, index_name=two.index_name)
    apply_config(only_second, client=client)  # the pipelines only: the index is the same
    by_second = search(
        SearchRequest.from_settings(only_second, QUESTION, tenant="default"),
        only_second,
        client=client,
    )
    assert by_second.hits  # the second reader's own hybrid on the same index
