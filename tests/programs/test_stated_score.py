"""The answer check's score: P(stated) mixed with the round's best dense similarity (stated_similarity_weight)."""

import dspy
import pytest

from programs.artifacts import load_state_into, save_artifact
from programs.selfrag import SelfRAG
from programs.settings import ProgramSettings
from programs.thresholds import Thresholds, stated_score, stated_weight
from tests.fakes import ListRetriever, scripted_lm
from tests.programs.test_selfrag_soft import KB, QUESTION
from tests.programs.test_similarity_gate import GOOD, SimilarityRetriever

P_STATED_06 = {"check_answer": {"stated": {"yes": 0.6, "no": 0.4}}}


def make(similarity, embedder_name="emb-a", th=None, **cfg):
    lm, engine = scripted_lm(GOOD, probs=P_STATED_06)
    cfg.setdefault("kb_grading", "always")  # the graded path (ungraded: test_kb_grading.py)
    config = ProgramSettings(retrieve_rules=False, max_rewrites=0, max_web_rounds=0, relevance_threshold=0.1, **cfg)
    program = SelfRAG(SimilarityRetriever(KB, lambda q: similarity, embedder_name), config=config,
                      generator_lm=lm, adapter=dspy.JSONAdapter())
    program.compiled_thresholds = th or Thresholds(stated=0.5, stated_similarity_weight=0.5,
                                                   similarity_embedder="emb-a")
    return program, engine


def route(result):
    return next(s for s in result.trace if s.step == "route" and "p_stated" in s.inputs)  # the one after grading


def test_a_far_round_lowers_the_score_below_the_threshold_and_abstains_before_drafting():
    program, engine = make(0.3)  # 0.5 * 0.6 + 0.5 * 0.3 = 0.45 < 0.5, though P(stated) alone would pass
    result = program(question=QUESTION).result
    assert engine.roles() == ["retrieve_decision", "grade_relevance_batch", "check_answer"]
    assert result.abstained and result.abstain_reason == "answer_not_stated"
    step = route(result)
    assert step.output == "abstain" and step.inputs["stated_score"] == "0.45" and step.inputs["p_stated"] == "0.6"


def test_a_close_round_raises_the_score_and_drafts():
    program, engine = make(0.7)  # 0.5 * 0.6 + 0.5 * 0.7 = 0.65
    result = program(question=QUESTION).result
    assert engine.roles()[-2:] == ["generate_answer", "judge_support"] and not result.abstained
    assert route(result).inputs["stated_score"] == "0.65"


def test_the_weight_is_off_over_another_embedder_and_settings_override_it():
    program, engine = make(0.3, embedder_name="emb-b")  # cosines of another embedder: P(stated) alone
    assert program.stated_weight == 0.0
    result = program(question=QUESTION).result
    assert not result.abstained and route(result).inputs["stated_score"] == "0.6"
    program, _ = make(0.3, stated_similarity_weight=0.0)
    assert program.stated_weight == 0.0 and not program(question=QUESTION).result.abstained
    with pytest.raises(ValueError):
        ProgramSettings(stated_similarity_weight=1.0)


def test_the_weight_survives_an_artifact_round_trip(tmp_path):
    program, _ = make(0.3, th=Thresholds(stated=0.55, stated_similarity_weight=0.42, similarity_embedder="emb-a"))
    loaded = load_state_into(SelfRAG(ListRetriever([])), save_artifact(program, tmp_path / "a.json"))
    assert loaded.compiled_thresholds.stated_similarity_weight == 0.42 and loaded.compiled_thresholds.stated == 0.55


def test_score_functions():
    assert stated_score(0.6, 0.3, 0.5) == pytest.approx(0.45)
    assert stated_score(0.6, None, 0.5) == 0.6 and stated_score(0.6, 0.3, 0.0) == 0.6  # no similarity / no weight
    assert stated_score(0.6, 1.2, 0.5) == pytest.approx(0.8)  # a cosine above 1 (rounding) is clipped
    with pytest.raises(ValueError, match="p_stated"):
        stated_score(1.5, 0.3, 0.5)
    th = Thresholds(stated_similarity_weight=0.3, similarity_embedder="e")
    assert stated_weight(th, "e") == 0.3 and stated_weight(th, "f") == 0.0
    assert stated_weight(Thresholds(stated_similarity_weight=0.3), None) == 0.3
    with pytest.raises(ValueError):
        Thresholds(stated_similarity_weight=1.0)
