"""``program.kb_grading``: with a similarity gate in force and the answer check on, knowledge-base passages
are kept ungraded by default (``without_gate``); ``always`` grades them."""

import dspy
import pytest

from programs.selfrag import SelfRAG
from programs.settings import ProgramSettings
from programs.thresholds import Thresholds, skips_grading
from selfrag.settings import resolve
from tests.fakes import FakeWeb, ListRetriever, passage, scripted_lm
from tests.programs.test_selfrag_soft import KB, QUESTION
from tests.programs.test_similarity_gate import GOOD, SimilarityRetriever

NOT_STATED = {**GOOD, "check_answer": {"stated": "no"}}


def make(script=GOOD, similarity=0.7, web=None, retriever=None, th=None, **cfg):
    lm, engine = scripted_lm(script)
    config = ProgramSettings(retrieve_rules=False, max_rewrites=0, max_web_rounds=1 if web else 0, **cfg)
    program = SelfRAG(retriever or SimilarityRetriever(KB, lambda q: similarity), web_search=web, config=config,
                      generator_lm=lm, adapter=dspy.JSONAdapter())
    program.compiled_thresholds = th or Thresholds(similarity=0.5, similarity_embedder="emb-a", stated=0.5)
    return program, engine


def test_kb_passages_go_to_the_check_and_the_draft_without_a_grading_call():
    program, engine = make()
    result = program(question=QUESTION).result
    assert engine.roles() == ["retrieve_decision", "check_answer", "generate_answer", "judge_support"]
    step = next(s for s in result.trace if s.step == "grading")
    assert step.output == "skipped" and step.inputs["passages"] == "3" and step.inputs["gate"] == "0.5"
    assert not any(s.step.startswith("grade_relevance") for s in result.trace)
    route = next(s for s in result.trace if s.step == "route" and "relevant" in s.inputs)
    assert route.output == "generate" and route.inputs["relevant"] == "3"  # every passage kept
    assert not result.abstained and result.answer == "It opened in 1931."


def test_the_check_still_abstains_and_the_gate_still_stops_a_far_round():
    program, engine = make(NOT_STATED)
    result = program(question=QUESTION).result
    assert engine.roles() == ["retrieve_decision", "check_answer"]
    assert result.abstained and result.abstain_reason == "answer_not_stated"
    program, engine = make(similarity=0.2)
    result = program(question=QUESTION).result
    assert engine.roles() == ["retrieve_decision"] and result.abstain_reason == "low_similarity"


def test_web_passages_are_still_graded():
    web = FakeWeb([passage("w1", "The Zephyr bridge opened in 1931.", url="https://e.org/z")])
    program, engine = make(NOT_STATED, web=web)  # the KB round is not stated: the web round follows
    result = program(question=QUESTION).result
    assert engine.roles() == ["retrieve_decision", "check_answer", "grade_relevance", "check_answer"]
    assert web.queries == [QUESTION] and result.abstained


def test_passages_are_graded_without_a_gate_without_the_check_without_a_similarity_or_when_asked():
    graded = "grade_relevance_batch"
    for th, kwargs in [(Thresholds(stated=0.5), {}),  # no gate fitted
                       (Thresholds(similarity=0.5, similarity_embedder="emb-b"), {}),  # a gate for another embedder
                       (None, {"answer_check": False}), (None, {"kb_grading": "always"})]:
        program, engine = make(th=th, **kwargs)
        program(question=QUESTION)
        assert graded in engine.roles(), (th, kwargs)
    program, engine = make(retriever=ListRetriever(KB))  # keyword-only passages: nothing else vets them
    program(question=QUESTION)
    assert graded in engine.roles()


def test_skips_grading():
    near = [passage("a", "x").model_copy(update={"similarity": 0.6})]
    assert skips_grading("without_gate", True, 0.3, near)
    assert not skips_grading("always", True, 0.3, near) and not skips_grading("without_gate", False, 0.3, near)
    assert not skips_grading("without_gate", True, 0.0, near) and not skips_grading("without_gate", True, 0.3, [])
    assert not skips_grading("without_gate", True, 0.3, near + [passage("w", "y")])  # one without a similarity


def test_the_default_and_the_environment(monkeypatch, tmp_path):
    assert ProgramSettings().kb_grading == "without_gate"
    monkeypatch.chdir(tmp_path)  # no selfrag.toml here
    monkeypatch.delenv("SELFRAG_CONFIG", raising=False)
    monkeypatch.setenv("SELFRAG_PROGRAM__KB_GRADING", "always")
    assert resolve().program.kb_grading == "always"
    with pytest.raises(ValueError):
        ProgramSettings(kb_grading="sometimes")
