"""Query transforms through a program's retrieval: the calls made, the RRF fusion, the bounds, the trace,
and the predictors being the program's own (compiled with it, copied with it)."""

import copy

import dspy
import pytest

from programs.baselines import VanillaRAG
from programs.fusion import weighted_rrf
from programs.iterative import IterativeRAG
from programs.query_transforms import clean_queries
from programs.retrieval_pipeline import TransformingRetriever
from programs.settings import ProgramSettings
from programs.strategy_retrieval import StrategyRetrieval
from tests.fakes import ListRetriever, passage, scripted_lm

DOCS = {pid: passage(pid, f"text of {pid}") for pid in "abcdefgh"}
ANSWER = {"answer": "1931", "citations": [1], "answerable": True}


class TableRetriever:
    """A fixed ranking per query (unknown queries: nothing); records (query, k, filters)."""

    def __init__(self, table):
        self.table = table
        self.calls = []

    def retrieve(self, query, k=5, filters=None):
        self.calls.append((query, k, filters))
        return [DOCS[i] for i in self.table.get(query, "")][:k]


class DenseSplitRetriever(TableRetriever):
    """Also takes a dense query (like the knowledge base's split hybrid retriever)."""

    def retrieve(self, query, k=5, filters=None, *, dense_query=None):
        self.calls.append((query, k, filters, dense_query))
        return [DOCS[i] for i in self.table.get(dense_query or query, "")][:k]


class StrategicVanilla(StrategyRetrieval, VanillaRAG):
    """An existing program given the strategies by the mixin alone."""


def program(script, retriever, cls=StrategicVanilla, **cfg):
    lm, engine = scripted_lm(script)
    return cls(retriever, config=ProgramSettings(**cfg), generator_lm=lm, adapter=dspy.JSONAdapter()), engine


def steps(result, name):
    return [s for s in result.trace if s.step == name]


def test_multi_query_retrieves_each_paraphrase_and_fuses_them_with_the_question_by_rrf():
    table = {"Q?": "abc", "p one": "bd", "p two": "dbe", "p three": "f"}
    retriever = TableRetriever(table)
    script = {"paraphrase_query": {"paraphrases": ["p one", "p two", "q?", "p two", "p three", "p four"]},
              "generate_answer": ANSWER}
    rag, engine = program(script, retriever, transforms=["multi_query"], max_paraphrases=3, k=3)
    result = rag(question="Q?").result
    assert engine.roles() == ["paraphrase_query", "generate_answer"]
    assert engine.calls[0][1]["n"] == "3"
    # bounded: the duplicate of the question and of "p two" dropped, then cut at 3
    assert [q for q, *_ in retriever.calls] == ["Q?", "p one", "p two", "p three"]
    expected = weighted_rrf([[DOCS[i] for i in table[q]] for q in ("Q?", "p one", "p two", "p three")], k=60, limit=3)
    fuse = steps(result, "fuse")[0]
    assert fuse.output == [p.id for p in expected] == ["b", "d", "a"]  # b: 1/62+1/61+1/62, d: 1/62+1/61
    assert engine.calls[1][1]["passages"].count("«") == 3
    expansion = steps(result, "query_expansion")[0]
    assert expansion.output == ["Q?", "p one", "p two", "p three"] and "multi_query" in expansion.inputs["cut"]
    assert [s.inputs["transform"] for s in steps(result, "retrieve")] == ["original"] + ["paraphrase"] * 3
    assert result.usage.lm_calls == 2


def test_decompose_is_bounded_by_max_subquestions_and_step_back_adds_one_search():
    retriever = TableRetriever({"Q?": "a", "s1": "b", "s2": "c", "general": "d"})
    script = {"decompose_question": {"sub_questions": ["s1", "s2", "s3", "s4"]},
              "step_back_question": {"step_back_question": "general"}, "generate_answer": ANSWER}
    rag, engine = program(script, retriever, transforms=["decompose", "step_back"], max_subquestions=2, k=4)
    result = rag(question="Q?").result
    assert sorted(engine.roles()) == ["decompose_question", "generate_answer", "step_back_question"]
    assert engine.calls[0][1]["max_subquestions"] == "2"
    assert [q for q, *_ in retriever.calls] == ["Q?", "s1", "s2", "general"]
    assert set(steps(result, "fuse")[0].output) == {"a", "b", "c", "d"}


def test_hyde_embeds_the_hypothetical_passage_while_keyword_search_keeps_the_question():
    retriever = DenseSplitRetriever({"A passage saying 1931.": "ab", "Q?": "cd"})
    script = {"hypothetical_passage": {"hypothetical_passage": "A passage  saying 1931."}, "generate_answer": ANSWER}
    rag, _ = program(script, retriever, transforms=["hyde"], k=2)
    result = rag(question="Q?").result
    assert retriever.calls == [("Q?", 2, None, "A passage saying 1931.")]
    assert steps(result, "retrieve")[0].inputs["hyde"] == "split"
    assert steps(result, "fuse")[0].output == ["a", "b"]


def test_hyde_over_a_plain_retriever_fuses_a_search_for_each():
    retriever = TableRetriever({"A passage.": "ab", "Q?": "cb"})
    rag, _ = program({"hypothetical_passage": {"hypothetical_passage": "A passage."}, "generate_answer": ANSWER},
                     retriever, transforms=["hyde"], k=2)
    result = rag(question="Q?").result
    assert [q for q, *_ in retriever.calls] == ["Q?", "A passage."]
    assert steps(result, "retrieve")[0].inputs["hyde"] == "fused"
    assert steps(result, "fuse")[0].output == ["b", "c"]  # b: 1/62 + 1/62 beats c: 1/61


def test_a_failed_transform_is_a_failed_step_and_the_question_is_still_searched():
    retriever = TableRetriever({"Q?": "a"})
    rag, _ = program({"paraphrase_query": "not json at all", "generate_answer": ANSWER}, retriever,
                     transforms=["multi_query"], k=2)
    result = rag(question="Q?").result
    failed = steps(result, "paraphrase_query")[0]
    assert not failed.ok and failed.error
    assert [q for q, *_ in retriever.calls] == ["Q?"] and result.answer == "1931"


def test_a_store_failure_in_one_search_is_recorded_and_the_others_fuse():
    class Flaky(TableRetriever):
        def retrieve(self, query, k=5, filters=None):
            if query == "p one":
                raise ConnectionError("store down")
            return super().retrieve(query, k, filters)

    rag, _ = program({"paraphrase_query": {"paraphrases": ["p one", "p two"]}, "generate_answer": ANSWER},
                     Flaky({"Q?": "a", "p two": "b"}), transforms=["multi_query"], k=2)
    result = rag(question="Q?").result
    assert [s.ok for s in steps(result, "retrieve")] == [True, False, True]
    assert steps(result, "fuse")[0].output == ["a", "b"]


def test_transform_predictors_are_the_programs_own_and_copied_with_it():
    retriever = ListRetriever(list(DOCS.values()))
    plain = StrategicVanilla(retriever)
    assert {n for n, _ in plain.named_predictors()} == {"generate_answer"}  # no strategy: no extra predictor
    rag = StrategicVanilla(retriever, config=ProgramSettings(transforms=["multi_query", "hyde"], rerank="listwise"))
    names = {n for n, _ in rag.named_predictors()}
    assert names == {"generate_answer", "retrieval.transforms.paraphrase", "retrieval.transforms.hyde", "retrieval.rerank"}
    dict(rag.named_predictors())["retrieval.transforms.paraphrase"].demos = [dspy.Example(question="q", paraphrases=["x"])]
    for clone in (rag.deepcopy(), rag.reset_copy(), copy.deepcopy(rag)):
        assert clone.retriever is retriever
        assert dict(clone.named_predictors())["retrieval.transforms.paraphrase"] is not \
            dict(rag.named_predictors())["retrieval.transforms.paraphrase"]
    state = rag.dump_state()
    fresh = StrategicVanilla(retriever, config=ProgramSettings(transforms=["multi_query", "hyde"], rerank="listwise"))
    fresh.load_state(state)
    assert len(dict(fresh.named_predictors())["retrieval.transforms.paraphrase"].demos) == 1


def test_iterative_program_declares_its_predictors_once():
    assert {n for n, _ in IterativeRAG(ListRetriever([])).named_predictors()} == set(IterativeRAG.PREDICTORS)


def test_transforming_retriever_works_as_any_programs_retriever_with_its_own_trace():
    base = TableRetriever({"Q?": "a", "general": "b"})
    lm, engine = scripted_lm({"step_back_question": {"step_back_question": "general"}, "generate_answer": ANSWER})
    wrapped = TransformingRetriever(base, ProgramSettings(transforms=["step_back"]), lm=lm, adapter=dspy.JSONAdapter())
    result = VanillaRAG(wrapped, config=ProgramSettings(k=2), generator_lm=lm, adapter=dspy.JSONAdapter())(
        question="Q?").result
    assert result.trace[0].output == ["a", "b"]
    assert [s.step for s in wrapped.last_trace.steps] == ["step_back_question", "query_expansion", "retrieve",
                                                          "retrieve", "fuse"]
    assert engine.roles() == ["step_back_question", "generate_answer"]


def test_a_query_two_transforms_both_produce_is_searched_once():
    table = {"Q?": "ab", "bridge history": "cd"}
    retriever = TableRetriever(table)
    script = {"paraphrase_query": {"paraphrases": ["bridge history"]},
              "step_back_question": {"step_back_question": "Bridge  History"}, "generate_answer": ANSWER}
    rag, _ = program(script, retriever, transforms=["multi_query", "step_back"], k=2)
    rag(question="Q?")
    searched = [call[0].casefold() for call in retriever.calls]
    assert searched.count("bridge history") == 1 and searched.count("q?") == 1


def test_clean_queries_bounds():
    assert clean_queries(["  a  b ", "A B", "", "c", "d"], "q", 2) == (["a b", "c"], 3)
    assert clean_queries("single", "q", 1) == (["single"], 0)
    assert clean_queries(None, "q", 3) == ([], 0)


def test_judge_rerank_without_a_scorer_is_a_configuration_error():
    with pytest.raises(ValueError, match="needs a relevance scorer"):
        StrategicVanilla(ListRetriever([]), config=ProgramSettings(rerank="judge"))


def test_the_configured_counts_bound_the_lists_the_lm_may_write():
    """max_paraphrases / max_subquestions reach the constrained-decoding schema (through the adapter's
    output bounds), so a small model stops after the configured count instead of writing to max_tokens;
    the bound survives a copy and a reload of compiled state (an artifact)."""
    from selfrag.lm.compact_adapter import output_bounds

    rag, _ = program({}, TableRetriever({}), transforms=["multi_query", "decompose"], max_paraphrases=2,
                     max_subquestions=4)

    def bounds(module):
        return {name: output_bounds(p.signature) for name, p in module.named_predictors()
                if name.endswith(("paraphrase", "decompose"))}

    got = bounds(rag)
    assert sorted(got.values(), key=str) == [{"paraphrases": 2}, {"sub_questions": 4}]
    assert bounds(copy.deepcopy(rag)) == got
    fresh, _ = program({}, TableRetriever({}), transforms=["multi_query", "decompose"], max_paraphrases=2,
                       max_subquestions=4)
    fresh.load_state(rag.dump_state())
    assert bounds(fresh) == got
    default, _ = program({}, TableRetriever({}), transforms=["multi_query"])
    assert list(bounds(default).values()) == [{"paraphrases": 3}]


def test_the_signatures_declare_their_largest_lists():
    from selfrag.lm.compact_adapter import output_bounds
    from signatures import DecomposeQuestion, HypotheticalQuestions, ParaphraseQuery, RerankPassages

    assert output_bounds(ParaphraseQuery) == {"paraphrases": 10}  # programs.settings: max_paraphrases <= 10
    assert output_bounds(DecomposeQuestion) == {"sub_questions": 8}  # max_subquestions <= 8
    assert output_bounds(HypotheticalQuestions) == {"questions": 8}
    assert output_bounds(RerankPassages) == {"ranking": 50}  # rerank_pool <= 50


def test_listwise_rerank_writes_at_most_one_number_per_candidate():
    from selfrag.lm.compact_adapter import output_bounds

    rag, _ = program({}, TableRetriever({}), rerank="listwise", rerank_pool=6)
    (rerank,) = [p for name, p in rag.named_predictors() if name.endswith("rerank")]
    assert output_bounds(rerank.signature) == {"ranking": 6}
