"""The knowledge-base side of the retrieval strategies: HyDE's split dense query, collection
descriptions and metadata schema for routing and self-query, self-query's where on the real store."""

import dspy

from programs.baselines import VanillaRAG
from programs.settings import ProgramSettings
from programs.strategy_retrieval import StrategyRetrieval
from programs.types import Passage
from selfrag.kb.collection_info import collections_retriever, get_description, metadata_schema, set_description
from selfrag.kb.retriever import HybridRetriever
from tests.fakes import scripted_lm

import pytest


class Recorder:
    def __init__(self, name):
        self.name, self.queries = name, []

    def retrieve(self, query, k=5, filters=None):
        self.queries.append(query)
        return [Passage(id=f"{self.name}-{query}", text=query)]


def test_hybrid_embeds_the_dense_query_and_keeps_the_question_for_bm25():
    dense, bm25 = Recorder("dense"), Recorder("bm25")
    retriever = HybridRetriever(dense, bm25)
    got = retriever.retrieve("Q?", k=2, dense_query="A hypothetical passage.")
    assert dense.queries == ["A hypothetical passage."] and bm25.queries == ["Q?"]
    assert [p.id for p in got] == ["dense-A hypothetical passage.", "bm25-Q?"]
    retriever.retrieve("Q2?", k=1)
    assert dense.queries[-1] == bm25.queries[-1] == "Q2?"


def test_the_kb_hybrid_retriever_takes_a_dense_query(make_kb):
    from programs.retriever_calls import DenseQueryRetriever, accepts

    kb = make_kb("denseq")
    kb.add_documents([("The Heron range is 80 km.", {"doc_id": "h"}), ("Parental leave is 16 weeks.", {"doc_id": "l"})])
    hybrid = kb.retriever("hybrid")
    assert accepts(hybrid, "dense_query") and isinstance(hybrid, DenseQueryRetriever)
    assert hybrid.retrieve("Heron", k=1, dense_query="Heron range")[0].metadata["doc_id"] == "h"


def manuals(make_kb, name="manuals"):
    kb = make_kb(name)
    kb.add_documents([
        ("The Heron range is 80 km on one charge.", {"doc_id": "h23", "year": 2023, "doc_type": "manual"}),
        ("The Heron range was 60 km on one charge.", {"doc_id": "h21", "year": 2021, "doc_type": "manual"}),
        ("Heron range questions and answers.", {"doc_id": "faq", "year": 2023, "doc_type": "faq"}),
    ])
    return kb


def test_description_round_trip_and_schema_from_stored_metadata(make_kb):
    kb = manuals(make_kb)
    assert get_description(kb.store) == ""
    assert set_description(kb.store, "  Heron   manuals\nand FAQs ") == "Heron manuals and FAQs"
    assert get_description(kb.store) == "Heron manuals and FAQs"
    assert kb.store.collection.configuration_json["hnsw"]["space"] == "cosine"  # distance unchanged
    schema = metadata_schema(kb.store)
    assert {"year", "doc_type", "title", "source", "language"} <= set(schema) and "doc_id" not in schema
    assert schema["year"].type == "int" and "content_hash" not in schema
    with pytest.raises(ValueError, match="one line of at most 300"):
        set_description(kb.store, "x" * 301)


class Strategic(StrategyRetrieval, VanillaRAG):
    pass


def test_self_query_where_filters_both_dense_and_bm25_of_the_real_store(make_kb):
    kb = manuals(make_kb)
    lm, engine = scripted_lm({
        "extract_filters": {"filters": [{"field": "year", "op": "eq", "value": "2021"},
                                        {"field": "doc_type", "op": "eq", "value": "manual"}]},
        "generate_answer": {"answer": "60 km", "citations": [1], "answerable": True}})
    for mode in ("dense", "bm25", "hybrid"):
        rag = Strategic(kb.retriever(mode), config=ProgramSettings(self_query=True, k=3), generator_lm=lm,
                        adapter=dspy.JSONAdapter(), metadata_schema=metadata_schema(kb.store))
        result = rag(question="What was the Heron range in the 2021 manual?").result
        fuse = [s for s in result.trace if s.step == "fuse"][0]
        assert [c.id for c in result.citations] == fuse.output and len(fuse.output) == 1, mode
        assert kb.store.get(fuse.output)[fuse.output[0]][1]["doc_id"] == "h21"


def test_collections_retriever_over_knowledge_bases(make_kb):
    bikes, other = manuals(make_kb, "bikes"), make_kb("recipes")
    other.add_documents([("Basil pasta recipe.", {"doc_id": "r1"})])
    set_description(bikes.store, "Heron manuals")
    retriever = collections_retriever([bikes, other])
    assert retriever.describe().splitlines() == ["bikes: «Heron manuals»", "recipes: (no description)"]
    assert "year" in retriever.schema(["bikes"]) and "year" not in retriever.schema(["recipes"])
    got = retriever.retrieve("pasta recipe", k=1, collections=["recipes"])
    assert got[0].metadata["collection"] == "recipes" and got[0].metadata["doc_id"] == "r1"


def test_strategy_components_for_the_composition_root(make_kb):
    from selfrag.kb.strategy_components import strategy_components

    kb, other = manuals(make_kb, "bikes"), make_kb("recipes")
    plain = strategy_components(kb, ProgramSettings())
    assert set(plain) == {"retriever"} and type(plain["retriever"]).__name__ == "HybridRetriever"
    hyde = strategy_components(kb, ProgramSettings(transforms=["hyde"], self_query=True))
    assert isinstance(hyde["retriever"], HybridRetriever) and "year" in hyde["metadata_schema"]
    routed = strategy_components(kb, ProgramSettings(route_collections=True, self_query=True), [other])
    assert routed["retriever"].names == ["bikes", "recipes"] and "metadata_schema" not in routed
    rag = Strategic(**routed, config=ProgramSettings(route_collections=True, self_query=True))
    assert rag.retriever is routed["retriever"]


def test_routed_collections_are_searched_through_the_retrievers_given(make_kb):
    """The routed retriever searches ``kb`` through the retriever the composition root built (an index, a
    re-scoring wrapper) and every other collection through ``retriever_of`` — not their plain chunks."""
    from selfrag.kb.strategy_components import strategy_components

    kb, other = manuals(make_kb, "bikes"), make_kb("recipes")
    other.add_documents([("Basil pasta recipe.", {"doc_id": "r1"})])
    index, built = Recorder("index"), {}

    def retriever_of(collection):
        built[collection.name] = Recorder(f"{collection.name}-index")
        return built[collection.name]

    routed = strategy_components(kb, ProgramSettings(route_collections=True), [other], retriever=index,
                                 retriever_of=retriever_of)["retriever"]
    assert routed.collections["bikes"].retriever is index and routed.collections["recipes"].retriever is built["recipes"]
    assert [p.id for p in routed.retrieve("range", k=1, collections=["bikes"])] == ["index-range"]
    assert "year" in routed.schema(["bikes"])  # the schema still comes from the collection's chunks
