"""The baselines' branches, call counts and their SelfRAG-compatible prediction contract."""

import dspy
import pytest

from programs.baselines import BASELINES, GradedRAG, NoRetrieval, VanillaRAG
from programs.passages import ABSTAIN_ANSWER
from programs.selfrag import SelfRAG
from programs.settings import ProgramSettings
from programs.types import RAGResult
from tests.fakes import FakeWeb, ListRetriever, passage, scripted_lm

KB = [
    passage("p1#0", "The Zephyr bridge opened in 1931 and spans the river Oda.", doc_id="d1"),
    passage("p2#0", "Zephyr bridge tolls were abolished in 1990.", doc_id="d2"),
    passage("p3#0", "Oda river trout season runs from April to June.", doc_id="d3"),
    passage("p4#0", "Glass recycling in Norwich is collected every second Tuesday.", doc_id="d4"),
    passage("p5#0", "The Norwich market opens at eight.", doc_id="d5"),
]
Q = "When did the Zephyr bridge open?"


def relevant_if(word):
    return lambda inp: {"relevance": "relevant" if word in inp["passage"] else "irrelevant"}


ANSWER = {"answer": "It opened in 1931.", "citations": [1], "answerable": True}
NOT_ANSWERABLE = {"answer": "The passages do not say.", "citations": [], "answerable": False}


def build(cls, script, web=None, **kw):
    lm, engine = scripted_lm(script)
    program = cls(ListRetriever(KB), web_search=web, config=ProgramSettings(k=2), generator_lm=lm,
                  adapter=dspy.JSONAdapter(), **kw)
    return program, engine


def check_contract(pred):
    assert isinstance(pred.result, RAGResult)
    assert pred.answer == pred.result.answer and pred.abstained == pred.result.abstained
    assert pred.result.usage.lm_calls == sum(s.lm_calls for s in pred.result.trace)
    if pred.abstained:
        assert pred.answer == ABSTAIN_ANSWER and pred.cited_doc_ids == [] and pred.result.citations == []


# ---------------------------------------------------------------- vanilla-rag


def test_vanilla_retrieves_k_and_answers_in_one_call_citing_doc_ids():
    program, engine = build(VanillaRAG, {"generate_answer": ANSWER})
    pred = program(question=Q)
    check_contract(pred)
    assert engine.roles() == ["generate_answer"]
    assert program.retriever.queries == [Q]
    assert engine.calls[0][1]["passages"].count("«") == 2  # config.k passages
    assert pred.answer == "It opened in 1931." and not pred.abstained
    assert pred.cited_doc_ids == ["d1"] and [c.id for c in pred.result.citations] == ["p1#0"]
    assert pred.result.retrieved and pred.result.supported is None
    assert [s.step for s in pred.result.trace] == ["retrieve", "generate_answer"]
    assert pred.result.usage.prompt_tokens == 10 and pred.result.usage.completion_tokens == 5


def test_vanilla_abstains_when_the_draft_is_not_answerable():
    program, engine = build(VanillaRAG, {"generate_answer": NOT_ANSWERABLE})
    pred = program(question=Q)
    check_contract(pred)
    assert pred.abstained and len(engine.calls) == 1
    assert [s.step for s in pred.result.trace] == ["retrieve", "generate_answer", "candidate_dropped", "abstain"]


def test_vanilla_parse_failure_is_a_recorded_step_and_an_abstention():
    program, engine = build(VanillaRAG, {"generate_answer": "no json here"})
    pred = program(question=Q)
    check_contract(pred)
    assert pred.abstained
    gen = [s for s in pred.result.trace if s.step == "generate_answer"][0]
    assert not gen.ok and gen.error


# ---------------------------------------------------------------- no-retrieval


def test_no_retrieval_answers_from_the_lm_alone():
    program, engine = build(NoRetrieval, {"answer_directly": {"answer": "In 1931."}})
    pred = program(question=Q)
    check_contract(pred)
    assert engine.roles() == ["answer_directly"]
    assert program.retriever.queries == []
    assert pred.answer == "In 1931." and not pred.abstained and not pred.result.retrieved
    assert pred.cited_doc_ids == [] and pred.result.supported is None


def test_no_retrieval_needs_no_retriever_and_abstains_on_an_empty_answer():
    lm, engine = scripted_lm({"answer_directly": {"answer": "  "}})
    pred = NoRetrieval(generator_lm=lm, adapter=dspy.JSONAdapter())(question=Q)
    check_contract(pred)
    assert pred.abstained and engine.roles() == ["answer_directly"]


# ---------------------------------------------------------------- graded-rag


GRADED = {
    "grade_relevance": relevant_if("Zephyr"),
    "generate_answer": ANSWER,
    "judge_support": {"support": "fully"},
}


def test_graded_retrieves_four_grades_each_generates_and_checks():
    program, engine = build(GradedRAG, GRADED)
    pred = program(question=Q)
    check_contract(pred)
    assert engine.roles() == ["grade_relevance"] * 4 + ["generate_answer", "judge_support"]
    grades = [s for s in pred.result.trace if s.step == "grade_relevance"]
    assert {s.inputs["passage_id"] for s in grades if s.output == "relevant"} == {"d1", "d2"}
    assert len({s.inputs["passage_id"] for s in grades}) == 4
    # only the two relevant passages reach the generator
    assert engine.calls[4][1]["passages"].count("«") == 2
    assert pred.result.supported == "fully" and not pred.abstained and pred.cited_doc_ids == ["d1"]
    assert pred.result.usage.lm_calls == 6


def test_graded_k_is_a_constructor_argument():
    program, engine = build(GradedRAG, GRADED, k=3)
    program(question=Q)
    assert engine.count("grade_relevance") == 3
    with pytest.raises(ValueError):
        GradedRAG(ListRetriever(KB), k=0)


def test_graded_nothing_relevant_without_web_abstains_after_grading():
    program, engine = build(GradedRAG, dict(GRADED, grade_relevance={"relevance": "irrelevant"}))
    pred = program(question=Q)
    check_contract(pred)
    assert pred.abstained and engine.roles() == ["grade_relevance"] * 4
    assert pred.result.supported is None


def test_graded_nothing_relevant_goes_to_one_web_round():
    web = FakeWeb([passage("w1", "The Zephyr bridge opened on 1 May 1931.", url="https://example.org/z")])
    program, engine = build(GradedRAG, dict(GRADED, grade_relevance={"relevance": "irrelevant"}), web=web)
    pred = program(question=Q)
    check_contract(pred)
    assert web.queries == [Q]
    assert engine.roles() == ["grade_relevance"] * 4 + ["generate_answer", "judge_support"]  # web ungraded
    assert pred.result.used_web and not pred.abstained and pred.cited_doc_ids == ["w1"]


def test_graded_searches_no_web_when_max_web_rounds_is_zero():
    web = FakeWeb([passage("w1", "The Zephyr bridge opened on 1 May 1931.", url="https://example.org/z")])
    lm, engine = scripted_lm(dict(GRADED, grade_relevance={"relevance": "irrelevant"}))
    program = GradedRAG(ListRetriever(KB), web_search=web, config=ProgramSettings(k=2, max_web_rounds=0),
                        generator_lm=lm, adapter=dspy.JSONAdapter())
    pred = program(question=Q)
    assert web.queries == [] and pred.abstained and not pred.result.used_web


def test_graded_hallucination_without_web_is_returned_flagged():
    program, engine = build(GradedRAG, dict(GRADED, judge_support={"support": "no"}))
    pred = program(question=Q)
    check_contract(pred)
    assert len(engine.calls) == 6 and not pred.abstained
    assert pred.result.supported == "no"
    assert [s.output for s in pred.result.trace if s.step == "route"] == ["generate", "web"]


def test_graded_hallucination_with_web_generates_again_from_the_web():
    web = FakeWeb([passage("w1", "The Zephyr bridge opened on 1 May 1931.", url="https://example.org/z")])
    verdicts = iter(["no", "fully"])
    script = dict(GRADED, judge_support=lambda inp: {"support": next(verdicts)})
    program, engine = build(GradedRAG, script, web=web)
    pred = program(question=Q)
    check_contract(pred)
    assert engine.roles() == ["grade_relevance"] * 4 + ["generate_answer", "judge_support"] * 2
    assert pred.result.supported == "fully" and pred.result.used_web and pred.cited_doc_ids == ["w1"]


def test_graded_web_retry_also_unsupported_keeps_the_first_draft():
    web = FakeWeb([passage("w1", "Unrelated web page.", url="https://example.org/u")])
    program, engine = build(GradedRAG, dict(GRADED, judge_support={"support": "no"}), web=web)
    pred = program(question=Q)
    assert len(engine.calls) == 8
    assert pred.result.supported == "no" and pred.cited_doc_ids == ["d1"]


def test_graded_unanswerable_draft_without_web_abstains():
    program, engine = build(GradedRAG, dict(GRADED, generate_answer=NOT_ANSWERABLE))
    pred = program(question=Q)
    check_contract(pred)
    assert pred.abstained and engine.roles() == ["grade_relevance"] * 4 + ["generate_answer"]


def test_baselines_reject_a_bad_retriever_and_an_empty_question():
    with pytest.raises(TypeError):
        VanillaRAG(object())
    program, _ = build(VanillaRAG, {"generate_answer": ANSWER})
    with pytest.raises(ValueError):
        program(question="  ")
    assert set(BASELINES) == {"vanilla-rag", "no-retrieval", "graded-rag"}


def test_selfrag_grade_steps_record_the_judged_passage():
    lm, engine = scripted_lm({"retrieve_decision": {"decision": "yes"}, **GRADED,
                              "judge_usefulness": {"usefulness": 5}})
    program = SelfRAG(ListRetriever(KB), config=ProgramSettings(k=2, max_candidates=1, grade_pool=4),
                      generator_lm=lm, adapter=dspy.JSONAdapter())
    result = program(question=Q).result
    grades = [s for s in result.trace if s.step == "grade_relevance"]
    assert len(grades) == 4
    assert {s.inputs["passage_id"] for s in grades} <= {"d1", "d2", "d3", "d4", "d5"}
    assert {s.inputs["passage_id"] for s in grades if s.output == "relevant"} == {"d1", "d2"}
