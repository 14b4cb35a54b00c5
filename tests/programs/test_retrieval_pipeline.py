"""Routing over collections, self-query filters and reranking inside a program's retrieval."""

import dspy
import pytest

from programs.collection_routing import Collection, CollectionsRetriever, parse_route
from programs.filter_grammar import FieldSpec
from programs.rerank import order_by_scores, parse_ranking
from programs.selfrag import SelfRAG
from programs.settings import ProgramSettings
from programs.strategy_retrieval import StrategyRetrieval
from programs.baselines import VanillaRAG
from tests.fakes import ListRetriever, passage, scripted_lm

ANSWER = {"answer": "It is 80 km.", "citations": [1], "answerable": True}


class FilteringRetriever(ListRetriever):
    """Applies ``{"field": {"$eq": v}}`` / ``$and`` filters like a store would; records the filters."""

    def __init__(self, passages):
        super().__init__(passages)
        self.filters = []

    def retrieve(self, query, k=5, filters=None):
        self.filters.append(filters)
        ranked = super().retrieve(query, len(self.passages))
        parts = (filters or {}).get("$and", [filters] if filters else [])
        keep = [p for p in ranked if all(p.metadata.get(f) == cond["$eq"] for part in parts
                                         for f, cond in part.items())]
        return keep[:k]


class Strategic(StrategyRetrieval, VanillaRAG):
    pass


class StrategicSelfRAG(StrategyRetrieval, SelfRAG):
    pass


BIKES = [passage("h23", "Heron manual: the range is 80 km.", year=2023, doc_type="manual"),
         passage("h21", "Heron manual: the range is 60 km.", year=2021, doc_type="manual"),
         passage("faq", "Heron FAQ: range questions.", year=2023, doc_type="faq")]
RECIPES = [passage("r1", "Pasta recipe with basil.")]
SCHEMA = {"year": FieldSpec("year", "int", ("2021", "2023")), "doc_type": FieldSpec("doc_type", "str", ("manual", "faq"))}


def collections():
    return CollectionsRetriever([
        Collection("bikes", "manuals and FAQs of Heron cargo bikes", FilteringRetriever(BIKES), SCHEMA),
        Collection("recipes", "cooking recipes", ListRetriever(RECIPES))])


def run(cls, retriever, script, question="What is the range of the Heron in the 2023 manual?", **cfg):
    lm, engine = scripted_lm(script)
    kwargs = {"metadata_schema": SCHEMA} if cfg.pop("with_schema", False) else {}
    rag = cls(retriever, config=ProgramSettings(**cfg), generator_lm=lm, adapter=dspy.JSONAdapter(), **kwargs)
    return rag(question=question).result, engine


def step(result, name):
    return [s for s in result.trace if s.step == name]


def test_routing_searches_only_the_chosen_collections_and_drops_unknown_names():
    script = {"route_collections": {"chosen": ["Bikes", "manuals", "bikes"]}, "generate_answer": ANSWER}
    result, engine = run(Strategic, collections(), script, route_collections=True, k=2)
    routed = engine.calls[0][1]["collections"]
    assert routed.splitlines() == ["bikes: «manuals and FAQs of Heron cargo bikes»", "recipes: «cooking recipes»"]
    assert step(result, "collections")[0].output == ["bikes"] and "manuals" in step(result, "collections")[0].inputs["unknown"]
    assert all(p.startswith("h") or p == "faq" for p in step(result, "fuse")[0].output)
    assert all(c.id != "r1" for c in result.citations)


def test_routing_to_no_collection_retrieves_nothing_and_the_program_abstains():
    result, engine = run(Strategic, collections(), {"route_collections": {"chosen": []}}, route_collections=True)
    assert engine.roles() == ["route_collections"]
    assert step(result, "retrieve")[0].inputs["skipped"] == "routed to no collection" and result.abstained


def test_a_routing_reply_of_none_routes_to_no_collection():
    result, engine = run(Strategic, collections(), {"route_collections": {"chosen": ["None"]}}, route_collections=True)
    assert engine.roles() == ["route_collections"] and step(result, "collections")[0].output == []
    assert step(result, "retrieve")[0].inputs["skipped"] == "routed to no collection" and result.abstained


def test_a_routing_reply_naming_no_known_collection_searches_them_all():
    # The model copied a description line back: unusable, like a failed call — not "no collection".
    script = {"route_collections": {"chosen": ["bikes: manuals and FAQs of Heron cargo bikes"]}, "generate_answer": ANSWER}
    result, _ = run(Strategic, collections(), script, route_collections=True, k=2)
    routed = step(result, "collections")[0]
    assert routed.output is None and "all collections" in routed.inputs["fallback"] and "bikes:" in routed.inputs["unknown"]
    assert step(result, "retrieve") and not result.abstained


def test_routing_to_no_collection_answers_from_the_web_when_there_is_one_bounded_by_max_web_rounds():
    from programs.iterative import IterativeRAG
    from tests.fakes import FakeWeb

    web = FakeWeb([passage("w1", "Web: the Heron's range is 80 km.")])
    lm, engine = scripted_lm({"route_collections": {"chosen": []}, "generate_answer": ANSWER,
                              "judge_support": {"support": "partially"},
                              "next_query": {"next_query": "Heron range"}})
    cfg = ProgramSettings(route_collections=True, max_iterations=3)
    rag = IterativeRAG(collections(), web_search=web, config=cfg, generator_lm=lm, adapter=dspy.JSONAdapter())
    result = rag(question="What is the range of the Heron?").result
    assert web.queries == ["What is the range of the Heron?"]  # max_web_rounds = 1: the re-query is refused
    assert result.answer == "It is 80 km." and result.used_web and result.citations[0].id == "w1"
    assert engine.count("route_collections") == 1 and [s.ok for s in step(result, "web_search")][0]


def test_routing_needs_a_collections_retriever():
    with pytest.raises(TypeError, match="CollectionsRetriever"):
        Strategic(ListRetriever(BIKES), config=ProgramSettings(route_collections=True))


def test_self_query_filters_are_validated_and_reach_the_store():
    retriever = FilteringRetriever(BIKES)
    script = {"extract_filters": {"filters": [{"field": "year", "op": "eq", "value": "2023"},
                                              {"field": "doc_type", "op": "eq", "value": "manual"},
                                              {"field": "author", "op": "eq", "value": "Ann"},
                                              {"field": "year", "op": "gt", "value": {"$ne": None}}]},
              "generate_answer": ANSWER}
    result, engine = run(Strategic, retriever, script, self_query=True, with_schema=True, k=2)
    assert engine.calls[0][1]["metadata_fields"].splitlines() == ["doc_type (str): e.g. «manual», «faq»",
                                                                   "year (int): e.g. 2021, 2023"]
    where = {"$and": [{"year": {"$eq": 2023}}, {"doc_type": {"$eq": "manual"}}]}
    assert retriever.filters == [where]
    filters = step(result, "filters")[0]
    assert filters.output == where and filters.inputs["dropped"] == "2"
    assert "unknown field 'author'" in filters.inputs["dropped_1"] and "expected a int" in filters.inputs["dropped_2"]
    assert [c.id for c in result.citations] == ["h23"]


def test_filters_matching_nothing_are_relaxed_and_recorded():
    retriever = FilteringRetriever(BIKES)
    script = {"extract_filters": {"filters": [{"field": "year", "op": "eq", "value": 1999}]}, "generate_answer": ANSWER}
    result, _ = run(Strategic, retriever, script, self_query=True, with_schema=True, k=2)
    assert retriever.filters == [{"year": {"$eq": 1999}}, None]
    assert step(result, "filters_relaxed") and not result.abstained


def test_a_failed_filter_extraction_searches_unfiltered():
    retriever = FilteringRetriever(BIKES)
    result, _ = run(Strategic, retriever, {"extract_filters": "garbage", "generate_answer": ANSWER},
                    self_query=True, with_schema=True)
    assert retriever.filters == [None] and not step(result, "extract_filters")[0].ok


def test_self_query_uses_the_routed_collections_schema_and_runs_once_per_question():
    script = {"route_collections": {"chosen": ["bikes"]},
              "extract_filters": {"filters": [{"field": "year", "op": "eq", "value": 2023}]},
              "retrieve_decision": {"decision": "yes"}, "grade_relevance": {"relevance": "irrelevant"},
              "rewrite_query": {"query": "Heron range km"}}
    retriever = collections()
    result, engine = run(StrategicSelfRAG, retriever, script, route_collections=True, self_query=True, k=1,
                         max_rewrites=1, max_web_rounds=0)
    assert engine.count("route_collections") == 1 and engine.count("extract_filters") == 1  # the rewrite reuses the plan
    assert retriever.collections["bikes"].retriever.filters == [{"year": {"$eq": 2023}}] * 2
    assert [s.inputs["query"] for s in step(result, "retrieve")] == [
        "What is the range of the Heron in the 2023 manual?", "Heron range km"]
    assert result.abstained


def test_listwise_rerank_orders_the_fused_pool_before_the_top_k():
    retriever = ListRetriever(BIKES)
    script = {"rerank": {"ranking": [3, 3, 9, 1]}, "generate_answer": ANSWER}
    result, engine = run(Strategic, retriever, script, rerank="listwise", rerank_pool=3, k=2)
    assert engine.roles() == ["rerank", "generate_answer"]
    pool = [s for s in result.trace if s.step == "retrieve"][0].output
    assert len(pool) == 3 and engine.calls[0][1]["passages"].count("«") == 3
    assert step(result, "fuse")[0].output == [pool[2], pool[0]]
    assert step(result, "rerank")[0].inputs["usable_numbers"] == "2"


def test_judge_rerank_orders_by_the_injected_relevance_probability():
    scores = {"h23": 0.2, "h21": 0.9, "faq": None}
    calls = []

    def scorer(question, passages):
        calls.append((question, [p.id for p in passages]))
        return [scores[p.id] for p in passages]

    lm, engine = scripted_lm({"generate_answer": ANSWER})
    rag = Strategic(ListRetriever(BIKES), config=ProgramSettings(rerank="auto", k=3), generator_lm=lm,
                    adapter=dspy.JSONAdapter(), relevance_scorer=scorer)
    result = rag(question="Heron range?").result
    assert engine.roles() == ["generate_answer"] and len(calls) == 1
    assert step(result, "fuse")[0].output == ["h21", "h23", "faq"]
    assert rag.deepcopy().relevance_scorer is scorer


def test_a_failing_scorer_keeps_the_fused_order():
    def scorer(question, passages):
        raise RuntimeError("no logprobs")

    lm, _ = scripted_lm({"generate_answer": ANSWER})
    rag = Strategic(ListRetriever(BIKES), config=ProgramSettings(rerank="judge", k=2), generator_lm=lm,
                    adapter=dspy.JSONAdapter(), relevance_scorer=scorer)
    result = rag(question="Heron range?").result
    assert not step(result, "rerank")[0].ok and len(step(result, "fuse")[0].output) == 2


def verdicts(*labels):
    return {"verdicts": [{"number": n, "topic": "Heron", "relevance": label} for n, label in enumerate(labels, 1)]}


def p_relevant(*ps):
    """Token log-probabilities giving the n-th verdict P(relevant) = ps[n]."""
    return {"grade_relevance_batch": {"relevance": [{"relevant": p, "irrelevant": 1 - p} for p in ps]}}


def judged(script, probs=None, **cfg):
    lm, engine = scripted_lm(script, **({"probs": probs} if probs else {}))
    rag = Strategic(ListRetriever(BIKES), config=ProgramSettings(**cfg), generator_lm=lm,
                    adapter=dspy.JSONAdapter(), logprobs=True)
    return rag, rag(question="Heron range?").result, engine


def test_with_logprobs_auto_reranks_by_the_programs_own_relevance_judgement_in_one_call():
    script = {"grade_relevance_batch": verdicts("relevant", "relevant", "irrelevant"), "generate_answer": ANSWER}
    rag, result, engine = judged(script, p_relevant(0.6, 0.9, 0.2), rerank="auto", rerank_pool=3, k=2)
    assert rag.retrieval.rerank_method == "judge" and rag.retrieval.rerank is None
    assert "retrieval.rerank_judge" in dict(rag.named_predictors())  # compiled with the program
    # the fused pool (h23, h21, faq: tied overlap, retriever order) is judged once, all three passages
    assert engine.roles() == ["grade_relevance_batch", "generate_answer"]
    assert engine.calls[0][1]["passages"].count("«") == 3
    assert step(result, "fuse")[0].output == ["h21", "h23"]  # P(relevant) 0.9 > 0.6 > 0.2
    judge = step(result, "rerank_judge")[0]
    assert judge.ok and judge.lm_calls == 1 and judge.prompt_tokens == 10 and judge.completion_tokens == 5
    assert judge.output == ["relevant", "relevant", "irrelevant"] and judge.soft is True
    assert judge.inputs["p_relevant"] == "0.600, 0.900, 0.200"
    assert step(result, "rerank")[0].inputs["scores"] == "[0.6, 0.9, 0.2]"  # in fused order
    assert not step(result, "grade_relevance")  # the eval harness's relevance counts stay the program's own
    assert result.usage.lm_calls == 2


def test_judge_without_logprobs_labels_order_relevant_first_and_unjudged_passages_last():
    script = {"grade_relevance_batch": {"verdicts": [{"number": 2, "topic": "x", "relevance": "relevant"},
                                                     {"number": 3, "topic": "x", "relevance": "irrelevant"}]},
              "generate_answer": ANSWER}
    _, result, engine = judged(script, rerank="judge", rerank_pool=3, k=3)  # the LM gave no log-probabilities
    judge = step(result, "rerank_judge")[0]
    assert judge.soft is False and "passage [1] not graded" in judge.inputs["problems"]
    assert step(result, "fuse")[0].output == ["h21", "faq", "h23"]  # 1.0, 0.0, then the unjudged one
    assert engine.count("grade_relevance_batch") == 1  # bounded: no per-passage re-grades


def test_a_failing_judge_call_is_a_recorded_decision_and_keeps_the_fused_order():
    _, result, engine = judged({"grade_relevance_batch": "not json", "generate_answer": ANSWER},
                               rerank="auto", rerank_pool=3, k=2)
    judge = step(result, "rerank_judge")[0]
    assert not judge.ok and judge.error
    assert step(result, "rerank")[0].inputs["fallback"] == "fused order"
    assert step(result, "fuse")[0].output == ["h23", "h21"]
    assert not result.abstained and result.error is None  # rerank only steers: the answer stands


def test_without_logprobs_auto_falls_back_to_listwise_and_judge_is_refused():
    lm, _ = scripted_lm({})
    rag = Strategic(ListRetriever(BIKES), config=ProgramSettings(rerank="auto"), generator_lm=lm, logprobs=False)
    assert rag.retrieval.rerank_method == "listwise" and rag.retrieval.rerank_judge is None
    with pytest.raises(ValueError, match="lm.logprobs = true"):
        Strategic(ListRetriever(BIKES), config=ProgramSettings(rerank="judge"), generator_lm=lm)
    injected = Strategic(ListRetriever(BIKES), config=ProgramSettings(rerank="auto"), generator_lm=lm,
                         logprobs=True, relevance_scorer=lambda q, ps: [0.5] * len(ps))
    assert injected.retrieval.rerank_method == "judge" and injected.retrieval.rerank_judge is None  # injected wins


def test_pure_helpers():
    assert parse_route(["A", "x", "b", "a"], ["a", "b", "c"], 1) == (["a"], ["x"])
    assert parse_ranking([2, "1", True, 2, 0], 3) == ([1, 0, 2], 1)
    ps = [passage("x", "x"), passage("y", "y"), passage("z", "z")]
    assert [p.id for p in order_by_scores(ps, [0.1, None, 0.5])] == ["z", "x", "y"]
    with pytest.raises(ValueError, match="2 scores for 3 passages"):
        order_by_scores(ps, [0.1, 0.2])


def test_collections_retriever_tags_and_fuses():
    retriever = collections()
    got = retriever.retrieve("Heron range pasta", k=3)
    assert {p.metadata["collection"] for p in got} == {"bikes", "recipes"}
    assert [p.id for p in retriever.retrieve("pasta", k=2, collections=["recipes", "nope"])] == ["r1"]
    assert set(retriever.schema()) == {"year", "doc_type"}
    with pytest.raises(ValueError, match="unique"):
        CollectionsRetriever([Collection("a", "", ListRetriever([])), Collection("a", "", ListRetriever([]))])


def declared(signature) -> bool:
    """``signature`` is a declaration of ``signatures/`` (or one with a field bound tightened by the program's
    settings: same instructions, same fields and types)."""
    import signatures

    for cls in vars(signatures).values():
        if isinstance(cls, type) and issubclass(cls, dspy.Signature) and cls.__module__.startswith("signatures."):
            if cls.instructions == signature.instructions and {k: f.annotation for k, f in cls.fields.items()} \
                    == {k: f.annotation for k, f in signature.fields.items()}:
                return True
    return False


def test_every_strategy_step_is_a_typed_predictor_of_the_program_saved_in_its_artifact(tmp_path):
    """What an optimizer compiles: each LM step of the strategies is a named predictor of the program, its
    signature a declaration in ``signatures/``, and the compiled state round-trips through an artifact."""
    from programs.artifacts import load_state_into, save_artifact
    from programs.decomposed import SerialDecomposition
    from programs.iterative import IterativeRAG

    cfg = ProgramSettings(transforms=["multi_query", "decompose", "step_back", "hyde"],
                          route_collections=True, self_query=True, rerank="listwise")
    for cls in (IterativeRAG, SerialDecomposition):
        rag = cls(collections(), config=cfg)
        predictors = dict(rag.named_predictors())
        strategy = {n for n in predictors if n.startswith("retrieval.")}
        assert strategy == {"retrieval.transforms.paraphrase", "retrieval.transforms.decompose",
                            "retrieval.transforms.step_back", "retrieval.transforms.hyde", "retrieval.route",
                            "retrieval.extract_filters", "retrieval.rerank"}
        assert all(declared(p.signature) for p in predictors.values())
        route = predictors["retrieval.route"]
        route.signature = route.signature.with_instructions("Compiled.")
        save_artifact(rag, tmp_path / f"{cls.__name__}.json")
        fresh = load_state_into(cls(collections(), config=cfg), tmp_path / f"{cls.__name__}.json")
        assert dict(fresh.named_predictors())["retrieval.route"].signature.instructions == "Compiled."
