"""The answer check less its prior (``Thresholds.check_prior``): the same check shown no passage, asked once
per question, and the contrast (P(stated) − prior + 1) / 2 routed on in place of P(stated)."""

import dspy
import pytest

from programs.artifacts import load_state_into, save_artifact
from programs.selfrag import SelfRAG
from programs.settings import ProgramSettings
from programs.thresholds import NO_PASSAGE, Thresholds, check_value, thresholds_for
from tests.fakes import FakeWeb, ListRetriever, passage, scripted_lm
from tests.programs.test_selfrag_soft import KB, QUESTION
from tests.programs.test_similarity_gate import GOOD, SimilarityRetriever


def probs_for(p_stated, p_prior):
    """P(stated) over passages, and ``p_prior`` when the check is shown no passage."""
    def probs(inp):
        p = p_prior if NO_PASSAGE in inp["passages"] else p_stated
        return {"stated": {"yes": p, "no": 1.0 - p}}
    return {"check_answer": probs}


def make(p_stated, p_prior, th=None, script=None, web=None, **cfg):
    lm, engine = scripted_lm(script or GOOD, probs=probs_for(p_stated, p_prior))
    cfg = {"kb_grading": "always", "retrieve_rules": False, "max_rewrites": 0, "max_web_rounds": 0,
           "relevance_threshold": 0.1, **cfg}
    config = ProgramSettings(**cfg)
    program = SelfRAG(SimilarityRetriever(KB, lambda q: 0.7), web_search=web, config=config, generator_lm=lm,
                      adapter=dspy.JSONAdapter())
    program.compiled_thresholds = th or Thresholds(stated=0.5, check_prior=True, similarity_embedder="emb-a")
    return program, engine


def prior_calls(engine):
    return [inp for role, inp in engine.calls if role == "check_answer" and NO_PASSAGE in inp["passages"]]


def route(result):
    return next(s for s in result.trace if s.step == "route" and "p_stated" in s.inputs)


def test_a_question_that_draws_yes_on_its_own_is_checked_less_its_prior_and_abstains():
    program, engine = make(0.7, 0.9)  # (0.7 - 0.9 + 1) / 2 = 0.4 < 0.5, though P(stated) 0.7 alone would pass
    result = program(question=QUESTION).result
    assert engine.roles() == ["retrieve_decision", "grade_relevance_batch", "check_answer", "check_answer"]
    assert len(prior_calls(engine)) == 1 and prior_calls(engine)[0]["question"] == QUESTION
    assert result.abstained and result.abstain_reason == "answer_not_stated"
    step = route(result)
    assert (step.inputs["p_stated"], step.inputs["p_prior"], step.inputs["stated_score"]) == ("0.7", "0.9", "0.4")
    prior = next(s for s in result.trace if s.step == "check_prior")
    assert prior.ok and prior.probs["yes"] == pytest.approx(0.9)


def test_a_low_prior_lifts_the_check_and_drafts():
    program, engine = make(0.4, 0.0)  # (0.4 - 0 + 1) / 2 = 0.7: the passages, not the question, drew the yes
    result = program(question=QUESTION).result
    assert engine.roles()[-2:] == ["generate_answer", "judge_support"] and not result.abstained
    assert route(result).inputs["stated_score"] == "0.7"


def test_without_check_prior_there_is_no_prior_call():
    program, engine = make(0.7, 0.9, th=Thresholds(stated=0.5, similarity_embedder="emb-a"))
    result = program(question=QUESTION).result
    assert prior_calls(engine) == [] and not result.abstained
    assert "p_prior" not in route(result).inputs and not any(s.step == "check_prior" for s in result.trace)


def test_the_prior_is_asked_once_per_question_and_reused_by_a_later_round():
    web = FakeWeb([passage("w1", "The Zephyr bridge opened to traffic in 1931.")])
    program, engine = make(0.7, 0.9, web=web, max_web_rounds=1)
    result = program(question=QUESTION).result
    assert web.queries == [QUESTION]  # the knowledge-base round was not stated: one web round
    assert engine.count("check_answer") == 3 and len(prior_calls(engine)) == 1  # kb check, prior, web check
    assert [s.inputs["p_prior"] for s in result.trace if s.step == "route" and "p_stated" in s.inputs] == ["0.9", "0.9"]
    assert result.abstained and result.abstain_reason == "answer_not_stated"


def test_a_failed_prior_call_is_recorded_and_the_check_decides_nothing():
    def check(inp):
        return "not json at all" if NO_PASSAGE in inp["passages"] else {"stated": "no"}
    program, engine = make(0.1, 0.5, script={**GOOD, "check_answer": check})
    result = program(question=QUESTION).result
    prior = next(s for s in result.trace if s.step == "check_prior")
    assert not prior.ok and prior.error
    # P(stated) 0.1 alone would abstain; with the prior missing the check's value is unknown: it blocks nothing
    assert not result.abstained and engine.roles()[-2:] == ["generate_answer", "judge_support"]
    assert "stated_score" not in next(s for s in result.trace if s.step == "route").inputs


def test_check_prior_is_bound_to_its_threshold_set_and_survives_an_artifact(tmp_path):
    th = Thresholds(stated=0.5, similarity=0.3, similarity_embedder="emb-a",
                    by_embedder={"emb-b": {"similarity": 0.8, "stated": 0.6, "check_prior": True}})
    assert not thresholds_for(th, "emb-a").check_prior and thresholds_for(th, "emb-b").check_prior
    assert not thresholds_for(th, "emb-c").check_prior  # no set for it: the main one's
    assert not Thresholds.model_validate({"stated": 0.5}).check_prior  # an artifact from before: the bare check
    program, _ = make(0.7, 0.9, th=th)
    loaded = load_state_into(SelfRAG(ListRetriever([])), save_artifact(program, tmp_path / "a.json"))
    assert loaded.compiled_thresholds.by_embedder["emb-b"].check_prior is True


def test_check_value():
    assert check_value(0.7, None, False) == 0.7 and check_value(0.7, 0.9, False) == 0.7
    assert check_value(0.7, 0.9, True) == pytest.approx(0.4) and check_value(1.0, 0.0, True) == 1.0
    assert check_value(0.0, 1.0, True) == 0.0
    assert check_value(None, 0.2, True) is None and check_value(0.7, None, True) is None
    with pytest.raises(ValueError, match="p_prior"):
        check_value(0.7, 1.5, True)
