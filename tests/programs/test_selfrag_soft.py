"""SelfRAG on soft scores: batched grading, thresholds, cheap retrieve rules, abstain reasons, token budget."""

import dspy
import pytest

from programs.artifacts import load_state_into, save_artifact
from programs.passages import ABSTAIN_ANSWER
from programs.selfrag import SelfRAG
from programs.settings import ProgramSettings
from programs.thresholds import Thresholds
from programs.types import WebSearchError
from tests.fakes import FakeWeb, ListRetriever, passage, scripted_lm

KB = [
    passage("p1", "The Zephyr bridge opened in 1931 and spans the river Oda."),
    passage("p2", "Oda river trout season runs from April to June."),
    passage("p3", "Glass recycling in Norwich is collected every second Tuesday."),
]
QUESTION = "When did the Zephyr bridge open?"

GOOD = {
    "retrieve_decision": {"decision": "yes"},
    "grade_relevance": lambda inp: {"relevance": "relevant" if "Zephyr" in inp["passage"] else "irrelevant"},
    "check_answer": {"stated": "yes"},
    "generate_answer": {"answer": "It opened in 1931.", "citations": [1], "answerable": True},
    "judge_support": {"support": "fully"},
    "judge_usefulness": {"usefulness": 5},
}


def make(script, probs=None, retriever=None, web=None, **cfg):
    cfg.setdefault("retrieve_rules", False)  # these tests script the retrieve judge
    cfg.setdefault("grade_pool", cfg.get("k", 3) + 1)  # these tests grade a pool of k + 1 (KB of 3)
    lm, engine = scripted_lm(script, probs=probs)
    program = SelfRAG(retriever or ListRetriever(KB), web_search=web, config=ProgramSettings(**cfg),
                      generator_lm=lm, adapter=dspy.JSONAdapter())
    return program, engine


def run(script, question=QUESTION, **kw):
    program, engine = make(script, **kw)
    return program(question=question).result, engine


def routes(result):
    return [s.output for s in result.trace if s.step == "route"]


def test_default_grades_all_passages_in_one_call_and_drafts_once():
    result, engine = run(GOOD, k=2)
    assert engine.roles() == ["retrieve_decision", "grade_relevance_batch", "check_answer", "generate_answer",
                              "judge_support"]
    graded = [s for s in result.trace if s.step == "grade_relevance"]
    assert [(s.inputs["passage_id"], s.output, s.lm_calls) for s in graded] == [
        ("p1", "relevant", 0), ("p2", "irrelevant", 0), ("p3", "irrelevant", 0)]
    assert result.answer == "It opened in 1931." and not result.abstained and result.confidence == 1.0
    assert result.usefulness is None  # one candidate: usefulness cannot change the choice, so it is skipped


def test_every_lm_step_records_its_tokens():
    result, _ = run(GOOD)
    lm_steps = [s for s in result.trace if s.lm_calls]
    assert lm_steps and all(s.prompt_tokens == 10 * s.lm_calls and s.completion_tokens == 5 * s.lm_calls
                            for s in lm_steps)
    assert sum(s.prompt_tokens for s in result.trace) == result.usage.prompt_tokens


def test_malformed_batch_falls_back_to_per_passage_calls_for_the_missing_ones():
    script = dict(GOOD, grade_relevance_batch={"verdicts": [
        {"number": 1, "topic": "bridge", "relevance": "relevant"},
        {"number": 3, "topic": "recycling", "relevance": "irrelevant"},
        {"number": 7, "topic": "no such passage", "relevance": "relevant"}]})  # 2 missing, 7 out of range
    result, engine = run(script, k=2)
    assert engine.count("grade_relevance_batch") == 1 and engine.count("grade_relevance") == 1
    fallback = next(s for s in result.trace if s.step == "grade_fallback")
    assert fallback.output == ["p2"]
    batch = next(s for s in result.trace if s.step == "grade_relevance_batch")
    assert "problems" in batch.inputs and not result.abstained


def test_failed_batch_call_regrades_every_passage_alone():
    result, engine = run(dict(GOOD, grade_relevance_batch="not json"), k=2)
    assert engine.count("grade_relevance") == 3 and result.answer == "It opened in 1931."


def test_soft_support_goes_through_the_answer_threshold():
    probs = {"judge_support": {"support": {"fully": 0.45, "partially": 0.1, "no": 0.45}}}
    accepted, _ = run(GOOD, probs=probs, answer_threshold=0.4, max_regenerations=0)
    assert not accepted.abstained and accepted.confidence == pytest.approx(0.5)
    support = next(s for s in accepted.trace if s.step == "judge_support")
    assert support.soft is True and support.probs == {"fully": 0.45, "partially": 0.1, "no": 0.45}
    refused, _ = run(GOOD, probs=probs, answer_threshold=0.6, max_regenerations=0)
    assert refused.abstained and refused.answer == ABSTAIN_ANSWER
    assert refused.abstain_reason == "low_confidence" and refused.confidence == pytest.approx(0.5)


def test_backend_without_logprobs_records_soft_false_and_routes_on_the_label():
    result, _ = run(GOOD)
    support = next(s for s in result.trace if s.step == "judge_support")
    assert support.soft is False and support.probs == {"fully": 1.0, "partially": 0.0, "no": 0.0}


@pytest.mark.parametrize("threshold,expected", [(0.2, "retrieve"), (0.5, "direct")])
def test_retrieve_threshold_on_p_yes(threshold, expected):
    script = dict(GOOD, retrieve_decision={"decision": "no"}, answer_directly={"answer": "x"})
    probs = {"retrieve_decision": {"decision": {"yes": 0.3, "no": 0.7, "continue": 0.0}}}
    result, _ = run(script, probs=probs, retrieve_threshold=threshold)
    assert routes(result)[0] == expected


def test_relevance_threshold_keeps_a_passage_the_label_calls_irrelevant():
    script = dict(GOOD, grade_relevance={"relevance": "irrelevant"})
    probs = {"grade_relevance_batch": {"relevance": {"relevant": 0.4, "irrelevant": 0.6}}}
    kept, _ = run(script, probs=probs, relevance_threshold=0.3, answer_threshold=0.3, k=1)
    assert not kept.abstained and kept.confidence == pytest.approx(1.0)  # E[support]: fully
    dropped, _ = run(script, probs=probs, k=1, max_rewrites=0)
    assert dropped.abstained and dropped.abstain_reason == "no_relevant_passage"


def test_batch_probabilities_follow_the_passage_numbers_not_the_written_order():
    # The model writes its verdict on [2] first: its log-probabilities (0.95) belong to passage [2].
    script = dict(GOOD, grade_relevance_batch={"verdicts": [{"number": 2, "topic": "b", "relevance": "relevant"},
                                                            {"number": 1, "topic": "a", "relevance": "relevant"}]})
    probs = {"grade_relevance_batch": {"relevance": [{"relevant": 0.95, "irrelevant": 0.05},
                                                     {"relevant": 0.55, "irrelevant": 0.45}]}}
    result, _ = run(script, probs=probs, relevance_threshold=0.6, k=2, grade_pool=2)
    graded = {s.inputs["passage_id"]: s.probs["relevant"] for s in result.trace if s.step == "grade_relevance"}
    assert graded == {"p1": 0.55, "p2": 0.95}
    assert [c.id for c in result.citations] == ["p2"]


def test_cheap_rule_skips_the_retrieve_judge():
    script = {"answer_directly": {"answer": "51"}, "judge_usefulness": {"usefulness": 5}}
    result, engine = run(script, question="What is 17 * 3?", retrieve_rules=True)
    assert "retrieve_decision" not in engine.roles() and not result.retrieved
    rule = next(s for s in result.trace if s.step == "retrieve_rule")
    assert rule.output == "no"


def test_a_factual_question_retrieves_without_asking_the_judge():
    result, engine = run(GOOD, retrieve_rules=True)  # "When did the Zephyr bridge open?"
    assert "retrieve_decision" not in engine.roles() and result.retrieved
    rule = next(s for s in result.trace if s.step == "retrieve_rule")
    assert rule.output == "yes" and rule.inputs["rule"] == "factual_question"


def test_rules_can_be_switched_off():
    script = dict(GOOD, retrieve_decision={"decision": "no"}, answer_directly={"answer": "51"})
    _, engine = run(script, question="What is 17 * 3?", retrieve_rules=False)
    assert engine.roles()[0] == "retrieve_decision"


class Broken:
    def retrieve(self, query, k=5, filters=None):
        raise ConnectionError("chroma down")


@pytest.mark.parametrize("case,reason", [
    ("nothing relevant", "no_relevant_passage"),
    ("store down", "retrieval_failed"),
    ("grader down", "lm_error"),
    ("drafts say no", "no_answer_in_passages"),
    ("web fails", "web_failed"),
    ("direct empty", "direct_unanswerable"),
])
def test_each_abstention_names_its_reason(case, reason):
    script, kw = dict(GOOD), {"max_rewrites": 0}
    if case == "nothing relevant":
        script["grade_relevance"] = {"relevance": "irrelevant"}
    elif case == "store down":
        kw["retriever"] = Broken()
    elif case == "grader down":
        script["grade_relevance"] = script["grade_relevance_batch"] = "garbage"
    elif case == "drafts say no":
        script["generate_answer"] = {"answer": "not in the passages", "citations": [], "answerable": False}
    elif case == "web fails":
        script["grade_relevance"] = {"relevance": "irrelevant"}
        kw["web"] = FakeWeb(error=WebSearchError("timeout", "10 s"))
    elif case == "direct empty":
        script = {"retrieve_decision": {"decision": "no"}, "answer_directly": {"answer": " "}}
    result, _ = run(script, **kw)
    assert result.abstained and result.abstain_reason == reason and result.answer == ABSTAIN_ANSWER
    assert next(s for s in result.trace if s.step == "abstain").output["reason"] == reason


def test_answered_result_has_no_abstain_reason():
    result, _ = run(GOOD)
    assert result.abstain_reason is None and not result.abstained


def test_token_budget_drops_regeneration_and_records_it():
    script = dict(GOOD, judge_support={"support": "no"})
    result, engine = run(script, token_budget=100, max_regenerations=2)  # each call costs 10 prompt tokens
    assert engine.count("generate_answer") == 1
    budget = next(s for s in result.trace if s.step == "token_budget")
    assert [d["step"] for d in budget.output["dropped"]] == ["regeneration"]  # continuation is off by default
    assert result.abstained and result.abstain_reason == "unsupported"
    result, _ = run(script, token_budget=100, max_regenerations=2, continue_retrieval=True)
    budget = next(s for s in result.trace if s.step == "token_budget")
    assert [d["step"] for d in budget.output["dropped"]] == ["continuation", "regeneration"]


def _requery_script():
    n = {"q": 0}

    def next_query(inp):
        n["q"] += 1
        return {"next_query": f"topic{n['q'] + 2}"}
    return {"retrieve_decision": lambda inp: {"decision": "continue" if inp.get("answer_so_far") else "yes"},
            "grade_relevance": {"relevance": "relevant"}, "check_answer": {"stated": "yes"},
            "generate_answer": {"answer": "x", "citations": [1], "answerable": True},
            "judge_support": {"support": "partially"}, "next_query": next_query}


TOPICS = [passage(f"p{i}", f"Zephyr bridge topic{i} fact") for i in range(1, 9)]


@pytest.mark.parametrize("budget,rounds", [(None, 2), (4600, 1)])
def test_every_requery_round_after_the_first_asks_the_token_budget(budget, rounds):
    # 400 prompt tokens a call; max_iterations 3 allows two re-query rounds. With 4,600 tokens the
    # second round (~1,300 more after 4,000 spent) is refused: the budget holds, and the drop is recorded.
    lm, engine = scripted_lm(_requery_script(), prompt_tokens=400)
    program = SelfRAG(ListRetriever(TOPICS), config=ProgramSettings(
        retrieve_rules=False, k=1, grade_pool=1, continue_retrieval=True, answer_threshold=0.9, max_iterations=3,
        max_regenerations=0, token_budget=budget), generator_lm=lm, adapter=dspy.JSONAdapter())
    result = program(question="Zephyr bridge?").result
    assert engine.count("next_query") == rounds
    if budget is not None:
        assert result.usage.prompt_tokens <= budget and routes(result)[-2] == "token_budget"
        dropped = next(s for s in result.trace if s.step == "token_budget").output["dropped"]
        assert [d["step"] for d in dropped] == ["continuation"]


def test_a_step_that_cannot_run_holds_no_tokens_back():
    # 10 prompt tokens a call: ~1,560 of 1,600 left when continuation (~1,500) is asked. With no
    # regeneration allowed (and no web) nothing is reserved and it runs; with one, 1,000 are held back for it.
    script = dict(GOOD, judge_support={"support": "partially"})
    result, engine = run(script, token_budget=1600, continue_retrieval=True, max_regenerations=0,
                         answer_threshold=0.9)
    assert any(s.step == "continue_decision" for s in result.trace)
    assert not any(s.step == "token_budget" for s in result.trace)
    result, _ = run(script, token_budget=1600, continue_retrieval=True, max_regenerations=1, answer_threshold=0.9)
    assert not any(s.step == "continue_decision" for s in result.trace)
    dropped = next(s for s in result.trace if s.step == "token_budget").output["dropped"]
    assert dropped[0]["step"] == "continuation" and "after reserving 1000 for regeneration" in dropped[0]["reason"]


def test_without_budget_the_regeneration_runs():
    script = dict(GOOD, judge_support={"support": "no"})
    _, engine = run(script, max_regenerations=2)
    assert engine.count("generate_answer") == 3


def test_thresholds_come_from_settings_then_artifact_then_defaults(tmp_path):
    program, _ = make(GOOD)
    assert program.thresholds == Thresholds()
    program.compiled_thresholds = Thresholds(retrieve=0.3, relevance=0.4, answer=0.7)
    path = save_artifact(program, tmp_path / "a.json")
    fresh, _ = make(GOOD, answer_threshold=0.2)
    load_state_into(fresh, path)
    assert fresh.thresholds == Thresholds(retrieve=0.3, relevance=0.4, answer=0.2)


def test_artifact_with_bad_thresholds_is_refused(tmp_path):
    import json

    from programs.artifacts import ArtifactError

    program, _ = make(GOOD)
    path = save_artifact(program, tmp_path / "a.json")
    payload = json.loads(path.read_text())
    payload["thresholds"] = {"retrieve": 2.0}
    path.write_text(json.dumps(payload))
    with pytest.raises(ArtifactError, match="invalid thresholds"):
        load_state_into(make(GOOD)[0], path)


def test_lm_calls_are_bounded_with_batched_grading():
    web = FakeWeb([passage(f"w{i}", f"web page {i}", url=f"https://e.org/{i}") for i in range(5)])
    script = dict(GOOD, grade_relevance=lambda inp: {"relevance": "relevant" if "web page" in inp["passage"]
                                                     else "irrelevant"},
                  rewrite_query={"query": "q"}, judge_support={"support": "no"})
    result, engine = run(script, web=web, k=2, max_rewrites=2, max_web_rounds=1, max_regenerations=1)
    # decision + (1 + rewrites + web) · (grade batch + answer check) + rewrites
    # + (first + regeneration) · (draft + support)
    assert len(engine.calls) <= 1 + (1 + 2 + 1) * 2 + 2 + 2 * 2
    assert engine.count("check_answer") == 1  # only the web round had a relevant passage to check
    assert result.usage.lm_calls == len(engine.calls) and result.abstained


def test_the_draft_records_its_own_probability_that_the_passages_answer():
    probs = {"generate_answer": {"answerable": {True: 0.7, False: 0.3}}}
    result, _ = run(GOOD, probs=probs)
    (draft,) = [s for s in result.trace if s.step == "generate_answer"]
    assert draft.soft is True and draft.probs == pytest.approx({"true": 0.7, "false": 0.3})


def test_the_draft_records_how_sure_the_model_was_of_its_answer_text():
    result, _ = run(GOOD, probs={"generate_answer": {"answerable": {True: 0.7, False: 0.3}}})
    (draft,) = [s for s in result.trace if s.step == "generate_answer"]
    assert draft.text_logprob == {"mean": 0.0, "min": 0.0, "n": 1.0}  # the fake's free text is one certain token
    result, _ = run(GOOD)  # a backend without log-probabilities
    (draft,) = [s for s in result.trace if s.step == "generate_answer"]
    assert draft.text_logprob is None


def test_the_default_grading_pool_is_k_passages():
    program, engine = make(GOOD, k=2, grade_pool=None)
    result = program(question=QUESTION).result
    retrieved = next(s for s in result.trace if s.step == "retrieve")
    assert len(retrieved.output) == 2 and engine.count("grade_relevance_batch") == 1


# ------------------------------------------------------------------ the answer check
NOT_STATED = {"check_answer": {"stated": {"yes": 0.2, "no": 0.8}}}


def test_answer_not_stated_abstains_without_a_rewrite_draft_or_support_call():
    result, engine = run(dict(GOOD, rewrite_query={"query": "q"}), probs=NOT_STATED, max_rewrites=2)
    assert engine.roles() == ["retrieve_decision", "grade_relevance_batch", "check_answer"]
    assert result.abstained and result.abstain_reason == "answer_not_stated"
    route = [s for s in result.trace if s.step == "route"][-1]
    assert route.output == "abstain" and float(route.inputs["p_stated"]) == pytest.approx(0.2)
    assert float(route.inputs["stated_threshold"]) == 0.5


def test_answer_not_stated_goes_to_the_web_and_the_check_runs_again_there():
    web = FakeWeb([passage("w1", "The Zephyr bridge opened on 3 May 1931.", url="https://e.org/z")])
    probs = {"check_answer": lambda inp: {"stated": {"yes": 0.9, "no": 0.1}} if "3 May" in inp["passages"]
             else {"stated": {"yes": 0.2, "no": 0.8}}}
    result, engine = run(GOOD, probs=probs, web=web, max_rewrites=2, max_web_rounds=1)
    assert engine.roles() == ["retrieve_decision", "grade_relevance_batch", "check_answer", "grade_relevance",
                              "check_answer", "generate_answer", "judge_support"]  # one web passage: one grade
    assert routes(result)[-3:] == ["web", "generate", "accept"] and result.used_web and not result.abstained


def test_no_rewrite_after_the_last_web_round_and_the_reason_is_the_knowledge_base_check():
    # The KB is on topic but does not state the answer; the web finds nothing relevant. A rewrite would
    # go to the web, whose one round is spent: no rewrite call, and the reason is the KB's check.
    web = FakeWeb([passage("w1", "Cats like milk.", url="https://e.org/c")])
    result, engine = run(GOOD, probs=NOT_STATED, web=web, max_rewrites=1, max_web_rounds=1)
    assert engine.roles() == ["retrieve_decision", "grade_relevance_batch", "check_answer", "grade_relevance"]
    assert routes(result)[-2:] == ["web", "abstain"] and web.queries == [QUESTION]
    assert result.abstained and result.abstain_reason == "answer_not_stated"


def test_a_stated_threshold_below_the_check_lets_the_draft_through():
    result, engine = run(GOOD, probs=NOT_STATED, stated_threshold=0.1)
    assert engine.count("generate_answer") == 1 and not result.abstained


def test_a_failed_answer_check_is_recorded_and_never_blocks_the_answer():
    result, engine = run(dict(GOOD, check_answer="not json"))
    check = [s for s in result.trace if s.step == "check_answer"]
    assert check and not check[0].ok
    assert engine.count("generate_answer") == 1 and result.answer == "It opened in 1931."


def test_answer_check_off_makes_no_check_call():
    result, engine = run(GOOD, answer_check=False)
    assert "check_answer" not in engine.roles() and not result.abstained


SURE = {"check_answer": {"stated": {"yes": 0.9, "no": 0.1}}}


def test_a_check_above_the_verified_threshold_skips_the_support_judge():
    result, engine = run(GOOD, probs=SURE, verified_threshold=0.8)
    assert engine.roles() == ["retrieve_decision", "grade_relevance_batch", "check_answer", "generate_answer"]
    skipped = [s for s in result.trace if s.step == "support_verified"]
    assert len(skipped) == 1 and skipped[0].output == "skipped"
    assert float(skipped[0].inputs["p_stated"]) == pytest.approx(0.9)
    # the check's probability is the draft's confidence; the answer threshold still applies to it
    assert not result.abstained and result.confidence == pytest.approx(0.9) and result.supported is None


def test_a_verified_draft_under_the_answer_threshold_is_regenerated_and_judged():
    result, engine = run(GOOD, probs=SURE, verified_threshold=0.8, answer_threshold=0.95)
    assert engine.roles()[:4] == ["retrieve_decision", "grade_relevance_batch", "check_answer", "generate_answer"]
    assert engine.count("judge_support") == 1  # the regenerated draft is not the checked one: it is judged
    assert routes(result)[-2] == "regenerate"


def test_a_verified_draft_under_the_answer_threshold_abstains_for_low_confidence_not_unsupported():
    # No support judge ran: its confidence is P(stated) 0.9 < 0.95; nobody judged it unsupported.
    result, engine = run(GOOD, probs=SURE, verified_threshold=0.8, answer_threshold=0.95, max_regenerations=0)
    assert "judge_support" not in engine.roles()
    assert result.abstained and result.abstain_reason == "low_confidence" and result.confidence == pytest.approx(0.9)


@pytest.mark.parametrize("verified", [None, 0.95])
def test_the_support_judge_runs_when_the_check_is_not_surer_than_verified(verified):
    kw = {} if verified is None else {"verified_threshold": verified}  # None: the default 1.0, never skip
    result, engine = run(GOOD, probs=SURE, **kw)
    assert engine.count("judge_support") == 1 and result.supported == "fully"
    assert not [s for s in result.trace if s.step == "support_verified"]


def test_verified_threshold_comes_from_the_artifact(tmp_path):
    program, _ = make(GOOD, probs=SURE)
    program.compiled_thresholds = Thresholds(verified=0.7)
    save_artifact(program, tmp_path / "a.json")
    loaded, engine = make(GOOD, probs=SURE)
    load_state_into(loaded, tmp_path / "a.json")
    assert loaded.thresholds.verified == 0.7
    loaded(question=QUESTION)
    assert engine.count("judge_support") == 0
