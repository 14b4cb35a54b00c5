"""SelfRAG's similarity gate: a knowledge-base round whose passages are all far from the query is not graded."""

import dspy
import pytest

from programs.artifacts import load_state_into, save_artifact
from programs.retriever_calls import retriever_embedder
from programs.selfrag import SelfRAG
from programs.settings import ProgramSettings
from programs.thresholds import Thresholds, similarity_gate, thresholds_for, too_dissimilar, top_similarity
from programs.thresholds import embedder_key, with_embedder_set
from tests.fakes import FakeWeb, ListRetriever, passage, scripted_lm
from tests.programs.test_selfrag_soft import GOOD as SOFT_GOOD, KB, QUESTION

GOOD = {**SOFT_GOOD, "rewrite_query": {"query": "Zephyr bridge opening year"}}


class SimilarityRetriever(ListRetriever):
    """A ListRetriever whose passages carry a dense similarity per query, and which names its embedder."""

    def __init__(self, passages, similarity_of, embedder_name="emb-a"):
        super().__init__(passages)
        self.similarity_of = similarity_of  # query -> similarity of every passage it returns
        self.embedder_name = embedder_name

    def retrieve(self, query, k=5, filters=None):
        sim = self.similarity_of(query)
        return [p.model_copy(update={"similarity": sim}) for p in super().retrieve(query, k, filters)]


def make(similarity_of, th=None, embedder_name="emb-a", web=None, **cfg):
    cfg.setdefault("retrieve_rules", False)
    cfg.setdefault("max_rewrites", 0)
    cfg.setdefault("max_web_rounds", 0)
    cfg.setdefault("kb_grading", "always")  # these tests follow the graded path (ungraded: test_kb_grading.py)
    lm, engine = scripted_lm(GOOD)
    program = SelfRAG(SimilarityRetriever(KB, similarity_of, embedder_name), web_search=web,
                      config=ProgramSettings(**cfg), generator_lm=lm, adapter=dspy.JSONAdapter())
    program.compiled_thresholds = th or Thresholds(similarity=0.5, similarity_embedder="emb-a")
    return program, engine


def test_a_round_below_the_gate_is_not_graded_and_abstains_low_similarity():
    program, engine = make(lambda q: 0.31)
    result = program(question=QUESTION).result
    assert engine.roles() == ["retrieve_decision"]  # no grade, no check, no draft
    assert result.abstained and result.abstain_reason == "low_similarity"
    gate = next(s for s in result.trace if s.step == "similarity_gate")
    assert gate.output == "below" and gate.inputs == {"top_similarity": "0.31", "threshold": "0.5"}
    assert next(s for s in result.trace if s.step == "retrieve").inputs["top_similarity"] == "0.31"


def test_a_round_at_or_above_the_gate_is_graded_as_before():
    program, engine = make(lambda q: 0.5)
    result = program(question=QUESTION).result
    assert engine.roles() == ["retrieve_decision", "grade_relevance_batch", "check_answer", "generate_answer",
                              "judge_support"]
    assert not result.abstained and not any(s.step == "similarity_gate" for s in result.trace)


def test_the_gate_is_off_over_another_embedder_and_when_unfitted():
    program, engine = make(lambda q: 0.1, embedder_name="emb-b")  # fitted on emb-a cosines
    assert not program(question=QUESTION).result.abstained
    assert "grade_relevance_batch" in engine.roles()
    program, engine = make(lambda q: 0.1, th=Thresholds())  # default: off
    assert not program(question=QUESTION).result.abstained


def test_a_threshold_set_in_the_settings_holds_for_any_embedder():
    program, engine = make(lambda q: 0.3, embedder_name="emb-b", similarity_threshold=0.4)
    result = program(question=QUESTION).result
    assert result.abstain_reason == "low_similarity" and engine.roles() == ["retrieve_decision"]
    assert program.thresholds.similarity_embedder == ""


def test_a_gated_round_is_rewritten_and_the_rewritten_query_can_pass():
    program, engine = make(lambda q: 0.8 if "opening year" in q else 0.2, max_rewrites=1)
    result = program(question=QUESTION).result
    assert engine.roles() == ["retrieve_decision", "rewrite_query", "grade_relevance_batch", "check_answer",
                              "generate_answer", "judge_support"]
    assert [s.step for s in result.trace].count("similarity_gate") == 1
    assert not result.abstained and result.answer == "It opened in 1931."


def test_web_passages_are_never_gated():
    web = FakeWeb([passage("w1", "The Zephyr bridge opened in 1931.", url="https://e.org/z")])
    program, engine = make(lambda q: 0.2, web=web, max_web_rounds=1)
    result = program(question=QUESTION).result
    assert web.queries == [QUESTION]
    assert engine.roles() == ["retrieve_decision", "grade_relevance", "check_answer", "generate_answer",
                              "judge_support"]  # one web passage: graded alone
    assert not result.abstained and result.used_web


def test_passages_without_a_similarity_are_never_gated():
    lm, engine = scripted_lm(GOOD)
    program = SelfRAG(ListRetriever(KB), config=ProgramSettings(retrieve_rules=False, similarity_threshold=0.9),
                      generator_lm=lm, adapter=dspy.JSONAdapter())
    result = program(question=QUESTION).result
    assert not result.abstained and "top_similarity" not in next(
        s for s in result.trace if s.step == "retrieve").inputs


def test_stated_probability_stops_at_the_gate():
    program, engine = make(lambda q: 0.2)
    p, tracer = program.stated_probability(QUESTION)
    assert p is None and [s.step for s in tracer.steps] == ["retrieve", "similarity_gate"]
    assert engine.roles() == []
    assert program.retrieval_similarity(QUESTION)[0] == 0.2
    p, tracer = program.stated_probability(QUESTION, gate=False)  # calibration: checked past the gate
    assert p is not None and engine.roles() == ["grade_relevance_batch", "check_answer"]
    assert not any(s.step == "similarity_gate" for s in tracer.steps)


def test_the_gate_and_its_embedder_survive_an_artifact_round_trip(tmp_path):
    program, _ = make(lambda q: 0.2, th=Thresholds(similarity=0.37, similarity_embedder="emb-a"))
    path = save_artifact(program, tmp_path / "a.json")
    loaded = load_state_into(SelfRAG(ListRetriever([])), path)
    assert loaded.compiled_thresholds.similarity == 0.37
    assert loaded.compiled_thresholds.similarity_embedder == "emb-a"


def test_routing_functions():
    ps = [passage("a", "x").model_copy(update={"similarity": s}) for s in (0.2, None, 0.6)]
    assert top_similarity(ps) == 0.6 and top_similarity([passage("a", "x")]) is None
    th = Thresholds(similarity=0.5, similarity_embedder="e")
    assert similarity_gate(th, "e") == 0.5 and similarity_gate(th, "f") == 0.0 and similarity_gate(th, None) == 0.0
    assert similarity_gate(Thresholds(similarity=0.5), None) == 0.5
    assert too_dissimilar(0.49, 0.5) and not too_dissimilar(0.5, 0.5)
    assert not too_dissimilar(None, 0.5) and not too_dissimilar(0.0, 0.0)
    with pytest.raises(ValueError):
        Thresholds(similarity=1.5)
    assert retriever_embedder(SimilarityRetriever([], lambda q: 0.1)) == "emb-a"
    assert retriever_embedder(ListRetriever([])) is None


def per_embedder_thresholds():
    return Thresholds(similarity=0.5, similarity_embedder="emb-a", stated=0.4, stated_similarity_weight=0.3,
                      by_embedder={"emb-b": {"similarity": 0.8, "stated": 0.6}})


def test_a_set_fitted_for_another_embedder_holds_over_that_embedder_only():
    program, engine = make(lambda q: 0.7, th=per_embedder_thresholds(), embedder_name="emb-b")
    result = program(question=QUESTION).result  # 0.7 passes emb-a's gate 0.5, not emb-b's own 0.8
    assert result.abstain_reason == "low_similarity" and engine.roles() == ["retrieve_decision"]
    th = program.thresholds
    assert (th.similarity, th.similarity_embedder, th.stated, th.stated_similarity_weight) == (0.8, "emb-b", 0.6, 0.0)
    program, engine = make(lambda q: 0.7, th=per_embedder_thresholds(), embedder_name="emb-a")
    assert not program(question=QUESTION).result.abstained and program.thresholds.stated == 0.4
    program, _ = make(lambda q: 0.1, th=per_embedder_thresholds(), embedder_name="emb-c")  # neither: gate off
    assert program.gate_threshold == 0.0 and not program(question=QUESTION).result.abstained


def test_per_embedder_sets_survive_an_artifact_round_trip(tmp_path):
    program, _ = make(lambda q: 0.2, th=per_embedder_thresholds())
    loaded = load_state_into(SelfRAG(ListRetriever([])), save_artifact(program, tmp_path / "a.json"))
    assert loaded.compiled_thresholds == per_embedder_thresholds()
    assert loaded.compiled_thresholds.by_embedder["emb-b"].verified is None


def test_thresholds_for_and_with_embedder_set():
    th = per_embedder_thresholds()
    assert thresholds_for(th, "emb-a") is th and thresholds_for(th, None) is th and thresholds_for(th, "x") is th
    b = thresholds_for(th, "emb-b")
    assert (b.similarity, b.stated, b.verified, b.similarity_embedder) == (0.8, 0.6, 1.0, "emb-b")
    fitted = b.model_copy(update={"similarity": 0.85, "stated_similarity_weight": 0.2, "answer": 0.3})
    merged = with_embedder_set(th, "emb-b", fitted)
    assert (merged.similarity, merged.similarity_embedder, merged.stated, merged.answer) == (0.5, "emb-a", 0.4, 0.3)
    assert merged.by_embedder["emb-b"].model_dump() == {"similarity": 0.85, "stated_similarity_weight": 0.2,
                                                        "stated": 0.6, "verified": 1.0, "check_prior": False}
    with pytest.raises(ValueError):
        Thresholds(by_embedder={"e": {"similarity": 2.0}})


def test_a_set_for_a_language_holds_only_for_questions_in_that_language():
    th = Thresholds(similarity=0.5, similarity_embedder="emb-a", by_embedder={"emb-b@zh": {"similarity": 0.8}})
    program, engine = make(lambda q: 0.7, th=th, embedder_name="emb-b")
    assert not program(question=QUESTION).result.abstained  # an English question: no set for it, gate off
    result = program(question="齐夫桥是哪一年开通的？").result
    assert result.abstain_reason == "low_similarity" and thresholds_for(th, "emb-b", "zh").similarity == 0.8
    assert program.thresholds is th  # after the call, the Chinese question's language no longer holds
    assert thresholds_for(th, "emb-b", "en") is th and thresholds_for(th, "emb-b", None) is th
    both = Thresholds(similarity=0.5, similarity_embedder="emb-a",
                      by_embedder={"emb-b@zh": {"similarity": 0.8}, "emb-b": {"similarity": 0.6}})
    assert thresholds_for(both, "emb-b", "zh").similarity == 0.8 and thresholds_for(both, "emb-b", "en").similarity == 0.6
    assert embedder_key("e5-small", "zh") == "e5-small@zh" and embedder_key("e5-small") == "e5-small"
