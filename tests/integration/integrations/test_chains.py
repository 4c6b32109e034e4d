"""Each retriever inside its framework's own pipeline, end to end with a fake LLM: a LangChain
LCEL chain, a LlamaIndex query engine and a Haystack pipeline; the retrieved chunks reach the
prompt, sync and async."""

from __future__ import annotations

import asyncio

from tests.integration.integrations.frameworks import make

QUESTION = "How long do refunds take for late deliveries?"
ANSWER = "Late deliveries are refunded in full."


def test_a_langchain_lcel_chain_answers_from_the_retrieved_chunks(corpus) -> None:
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.language_models.fake import FakeListLLM
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import PromptTemplate
    from langchain_core.runnables import RunnablePassthrough

    class Prompts(BaseCallbackHandler):
        def __init__(self) -> None:
            self.seen: list[str] = []

        def on_llm_start(self, serialized, prompts, **kwargs) -> None:
            self.seen.extend(prompts)

    retriever = make("langchain", "default", settings=corpus.settings, k=3)
    prompt = PromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}\nAnswer:")
    llm = FakeListLLM(responses=[ANSWER])

    def format_docs(docs) -> str:
        return "\n\n".join(f"[{doc.metadata['source']}] {doc.page_content}" for doc in docs)

    chain = (
        {"context": retriever | format_docs, "question": RunnablePassthrough()}
        | prompt
        | llm
        | StrOutputParser()
    )
    prompts = Prompts()
    assert chain.invoke(QUESTION, config={"callbacks": [prompts]}) == ANSWER
    assert asyncio.run(chain.ainvoke(QUESTION, config={"callbacks": [prompts]})) == ANSWER
    top = retriever.invoke(QUESTION)[0]
    assert len(prompts.seen) == 2 and prompts.seen[0] == prompts.seen[1]
    assert f"[refund-policy.md] {top.page_content}" in prompts.seen[0]
    assert "Late deliveries" in top.page_content
    assert prompts.seen[0].endswith(f"Question: {QUESTION}\nAnswer:")


def test_a_llamaindex_query_engine_answers_from_the_retrieved_chunks(corpus) -> None:
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine

    retriever = make("llamaindex", "default", settings=corpus.settings, k=3)
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    response = engine.query(QUESTION)
    async_response = asyncio.run(engine.aquery(QUESTION))
    expected = [node.node.node_id for node in retriever.retrieve(QUESTION)]
    assert [node.node.node_id for node in response.source_nodes] == expected
    assert [node.node.node_id for node in async_response.source_nodes] == expected
    top = response.source_nodes[0].node
    assert top.metadata["heading"] == "Refund policy > Late deliveries"
    assert top.ref_doc_id == top.metadata["doc_id"]
    # MockLLM answers with its prompt: the chunk's text and its source are in it, the scores not
    answer = str(response)
    assert top.get_content() in answer and "source: refund-policy.md" in answer
    assert "ranks:" not in answer and "scores:" not in answer
    assert str(async_response) == answer


def test_a_haystack_pipeline_passes_the_documents_on(corpus) -> None:
    from haystack import Pipeline
    from haystack.components.builders import PromptBuilder

    template = (
        "{% for doc in documents %}[{{ doc.meta.source }}] {{ doc.content }}\n{% endfor %}"
        "Question: {{ query }}"
    )
    retriever = make("haystack", "default", settings=corpus.settings, k=3)
    assert retriever.__haystack_supports_async__  # run_async is its own, not run in a thread
    pipeline = Pipeline()
    pipeline.add_component("retriever", retriever)
    pipeline.add_component(
        "prompt", PromptBuilder(template=template, required_variables=["documents", "query"])
    )
    pipeline.connect("retriever.documents", "prompt.documents")
    inputs = {"retriever": {"query": QUESTION}, "prompt": {"query": QUESTION}}
    prompt = pipeline.run(inputs)["prompt"]["prompt"]
    async_prompt = asyncio.run(pipeline.run_async(inputs))["prompt"]["prompt"]
    assert prompt == async_prompt
    assert prompt.startswith("[refund-policy.md] Refund policy > Late deliveries")
    assert prompt.count("\n[") == 2  # three documents


def test_a_haystack_pipeline_round_trips_through_its_yaml(corpus, monkeypatch) -> None:
    from haystack import Pipeline

    monkeypatch.setenv("LOADER_INDEX_NAME", corpus.settings.index_name)
    monkeypatch.setenv("OPENSEARCH_URL", corpus.settings.opensearch_url)
    monkeypatch.setenv("LOADER_RERANK", "off")
    pipeline = Pipeline()
    pipeline.add_component(
        "retriever", make("haystack", "A", k=2, mode="bm25", filters={"lang": "en"})
    )
    loaded = Pipeline.loads(pipeline.dumps(), allowed_modules=["loader.integrations.haystack"])
    retriever = loaded.get_component("retriever")
    assert retriever.tenant == "A"
    assert retriever.to_dict() == pipeline.get_component("retriever").to_dict()
    documents = loaded.run({"retriever": {"query": QUESTION}})["retriever"]["documents"]
    assert len(documents) == 2 and {doc.meta["tenant"] for doc in documents} == {"A"}
