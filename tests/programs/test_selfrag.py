"""SelfRAG's branches, bounds and trace, with a scripted LM engine (no real model)."""

import dspy
import pytest

from programs.passages import ABSTAIN_ANSWER
from programs.selfrag import SelfRAG
from programs.settings import ProgramSettings
from programs.types import RAGResult, WebSearchError
from tests.fakes import FakeWeb, ListRetriever, passage, scripted_lm

KB = [
    passage("p1", "The Zephyr bridge opened in 1931 and spans the river Oda."),
    passage("p2", "Oda river trout season runs from April to June."),
    passage("p3", "Glass recycling in Norwich is collected every second Tuesday."),
]


def relevant_if(word):
    return lambda inp: {"relevance": "relevant" if word in inp["passage"] else "irrelevant"}


# The per-passage Self-RAG of the paper (one grade call and one candidate per passage, usefulness always
# judged); the cheaper defaults (batched grading, one joint draft) have their own tests below.
PER_PASSAGE = dict(grading="per_passage", judge_usefulness="always")


def run(script, retriever=None, web=None, probs=None, **cfg):
    cfg.setdefault("retrieve_rules", False)  # these tests script the retrieve judge
    cfg.setdefault("grade_pool", cfg.get("k", 3) + 1)  # these tests grade a pool of k + 1 (KB of 3)
    lm, engine = scripted_lm(script, probs=probs)
    cfg = {**PER_PASSAGE, **cfg}
    program = SelfRAG(retriever or ListRetriever(KB), web_search=web, config=ProgramSettings(**cfg),
                      generator_lm=lm, adapter=dspy.JSONAdapter())
    pred = program(question="When did the Zephyr bridge open?")
    return pred, pred.result, engine


def steps(result: RAGResult):
    return [s.step for s in result.trace]


GOOD = {
    "retrieve_decision": {"decision": "yes"},
    "grade_relevance": relevant_if("Zephyr"),
    "check_answer": {"stated": "yes"},
    "generate_answer": {"answer": "It opened in 1931.", "citations": [1], "answerable": True},
    "judge_support": {"support": "fully"},
    "judge_usefulness": {"usefulness": 5},
}


def test_happy_path_retrieves_grades_drafts_critiques_and_cites():
    pred, result, engine = run(GOOD, k=2, max_candidates=3)
    assert result.answer == "It opened in 1931."
    assert result.retrieved and not result.abstained and not result.used_web
    assert result.supported == "fully" and result.usefulness == 5
    assert [c.id for c in result.citations] == ["p1"]
    assert pred.cited_doc_ids == ["p1"]
    # 1 decision + 2k=4 grades (3 passages available) + 1 answer check + 1 draft + 2 critiques
    assert engine.roles().count("grade_relevance") == 3
    assert engine.count("check_answer") == engine.count("generate_answer") == 1
    assert result.usage.lm_calls == len(engine.calls) == 1 + 3 + 1 + 1 + 2
    assert result.usage.prompt_tokens == 10 * result.usage.lm_calls
    assert steps(result)[:2] == ["retrieve_decision", "route"]
    assert result.score == pytest.approx(1 + 1 + 0.5 * 1)


def test_no_retrieval_answers_directly_and_checks_usefulness():
    script = {"retrieve_decision": {"decision": "no"}, "answer_directly": {"answer": "4"},
              "judge_usefulness": {"usefulness": 4}}
    _, result, engine = run(script)
    assert engine.roles() == ["retrieve_decision", "answer_directly", "judge_usefulness"]
    assert not result.retrieved and result.answer == "4" and result.usefulness == 4
    assert result.supported is None and result.citations == []


@pytest.mark.parametrize("mode,expected", [("always", "generate_answer"), ("never", "answer_directly")])
def test_retrieve_mode_overrides_the_judge(mode, expected):
    script = dict(GOOD, answer_directly={"answer": "x"})
    _, result, engine = run(script, retrieve_mode=mode)
    assert "retrieve_decision" not in engine.roles()
    assert expected in engine.roles()


def test_irrelevant_then_rewrite_then_web_then_abstain():
    web = FakeWeb([passage("w1", "A page about cooking pasta.", url="https://example.org/pasta")])
    retriever = ListRetriever(KB)
    script = dict(GOOD, grade_relevance={"relevance": "irrelevant"}, rewrite_query={"query": "Zephyr bridge opening year"})
    pred, result, engine = run(script, retriever=retriever, web=web, max_rewrites=1, max_web_rounds=1)
    assert result.abstained and result.answer == ABSTAIN_ANSWER
    assert retriever.queries == ["When did the Zephyr bridge open?", "Zephyr bridge opening year"]
    assert len(web.queries) == 1
    assert engine.count("rewrite_query") == 1
    assert "generate_answer" not in engine.roles()
    routes = [s.output for s in result.trace if s.step == "route"]
    assert routes == ["retrieve", "rewrite", "web", "abstain"]
    assert pred.cited_doc_ids == []


def test_rewrite_receives_the_failed_queries():
    script = dict(GOOD, grade_relevance={"relevance": "irrelevant"}, rewrite_query={"query": "bridge"})
    _, _, engine = run(script, max_rewrites=2)
    rewrites = [inp for role, inp in engine.calls if role == "rewrite_query"]
    assert len(rewrites) == 2
    assert "When did the Zephyr bridge open?" in rewrites[0]["failed_queries"]
    assert "bridge" in rewrites[1]["failed_queries"]


def test_web_failure_is_recorded_and_program_abstains():
    web = FakeWeb(error=WebSearchError("rate_limited", "429 after 2 retries"))
    script = dict(GOOD, grade_relevance={"relevance": "irrelevant"})
    _, result, _ = run(script, web=web, max_rewrites=0)
    failed = [s for s in result.trace if s.step == "web_search"]
    assert len(failed) == 1 and not failed[0].ok and "rate_limited" in failed[0].error
    assert result.abstained


def test_web_passages_answer_and_are_cited_with_url():
    web = FakeWeb([passage("w1", "The Zephyr bridge was opened in 1931.", url="https://example.org/zephyr")])
    script = dict(GOOD, grade_relevance=lambda inp: {"relevance": "relevant" if "example" in inp["passage"] or
                                                     "was opened" in inp["passage"] else "irrelevant"})
    _, result, _ = run(script, web=web, max_rewrites=0)
    assert result.used_web and not result.abstained
    assert result.citations[0].source == "https://example.org/zephyr"


def test_unsupported_joint_draft_is_regenerated_from_the_most_relevant_passage_alone():
    supports = iter(["no", "fully"])
    probs = {"grade_relevance": lambda inp: {"relevant": 0.9 if "Zephyr" in inp["passage"] else 0.6}}
    script = dict(GOOD, grade_relevance={"relevance": "relevant"},
                  judge_support=lambda inp: {"support": next(supports)})
    _, result, engine = run(script, probs=probs, k=2, max_candidates=1, max_regenerations=1)
    drafts = [inp["passages"] for role, inp in engine.calls if role == "generate_answer"]
    assert len(drafts) == 2
    assert "[2]" in drafts[0]  # the joint draft read the relevant passages together
    assert "[2]" not in drafts[1] and "Zephyr" in drafts[1]  # the redraft: the most relevant one alone
    regen = [s for s in result.trace if s.step == "regenerate"]
    assert [s.output for s in regen] == ["new_context"] and regen[0].inputs["passages"] == "['p1']"
    assert result.supported == "fully" and not result.abstained
    assert [s.output for s in result.trace if s.step == "route"][-2:] == ["regenerate", "accept"]


def test_regeneration_never_repeats_a_context_it_resamples_instead():
    supports = iter(["no", "no", "fully"])
    script = dict(GOOD, grade_relevance={"relevance": "relevant"},
                  judge_support=lambda inp: {"support": next(supports)})
    lm, engine = scripted_lm(script)
    program = SelfRAG(ListRetriever(KB), config=ProgramSettings(**PER_PASSAGE, k=1, max_candidates=2,
                                                                max_regenerations=1, grade_pool=2),
                      generator_lm=lm, adapter=dspy.JSONAdapter())
    result = program(question="When did the Zephyr bridge open?").result
    drafts = [inp["passages"] for role, inp in engine.calls if role == "generate_answer"]
    assert len(drafts) == 3  # one per passage; both passages were drafted alone, so the redraft resamples
    assert drafts[2] == drafts[0]
    assert [s.output for s in result.trace if s.step == "regenerate"] == ["resample"]
    temps = [t for role, t in engine.temperatures if role == "generate_answer"]
    assert temps[-1] == 0.7 and temps[0] != 0.7
    assert result.supported == "fully" and not result.abstained


def test_still_unsupported_after_all_fallbacks_abstains_with_the_reason():
    script = dict(GOOD, grade_relevance={"relevance": "relevant"}, judge_support={"support": "no"})
    web = FakeWeb([])
    _, result, engine = run(script, web=web, max_regenerations=2, max_candidates=3)
    assert result.abstained and result.answer == ABSTAIN_ANSWER
    assert result.abstain_reason == "unsupported" and result.confidence == 0.0
    assert engine.count("generate_answer") == 3 + 2  # candidates + regenerations
    assert [s.output for s in result.trace if s.step == "route"][-1] == "abstain"
    withheld = next(s for s in result.trace if s.step == "abstain")
    assert withheld.output["reason"] == "unsupported" and withheld.inputs["withheld"] == "It opened in 1931."


def test_best_candidate_is_chosen_by_weighted_score():
    answers = {"Zephyr": "A (from bridge passage)", "trout": "B (from trout passage)"}
    script = dict(
        GOOD,
        grade_relevance={"relevance": "relevant"},
        generate_answer=lambda inp: {"answer": next(v for k, v in answers.items() if k in inp["passages"]),
                                     "citations": [1], "answerable": True},
        judge_support=lambda inp: {"support": "partially" if inp["answer"].startswith("A") else "fully"},
        judge_usefulness=lambda inp: {"usefulness": 5 if inp["answer"].startswith("A") else 1},
    )
    _, result, _ = run(script, k=1, max_candidates=2)
    # A: 1 + 0.5 + 0.5*1 = 2.0 ; B: 1 + 1 + 0.5*(-1) = 1.5
    assert result.answer.startswith("A")
    choice = [s.output for s in result.trace if s.step == "select_candidate"][0]
    assert choice == {"scores": [2.0, 1.5], "confidence": [0.5, 1.0], "best": 0}


def test_parse_failure_of_one_judgement_is_recorded_not_fatal():
    script = dict(GOOD, judge_usefulness="this is not json at all")
    _, result, _ = run(script)
    failed = [s for s in result.trace if not s.ok]
    assert failed and all(s.step == "judge_usefulness" for s in failed)
    assert failed[0].error
    assert result.answer == "It opened in 1931." and result.usefulness is None


def test_failed_retrieve_decision_falls_back_to_retrieving():
    script = dict(GOOD, retrieve_decision="garbage")
    _, result, engine = run(script)
    assert "generate_answer" in engine.roles() and result.retrieved


def test_all_drafts_unanswerable_abstains_honestly():
    script = dict(GOOD, generate_answer={"answer": "The passages do not say.", "citations": [], "answerable": False})
    _, result, _ = run(script, max_regenerations=1)
    assert result.abstained and result.answer == ABSTAIN_ANSWER
    assert "candidate_dropped" in steps(result)


def test_retriever_failure_is_recorded():
    class Broken:
        def retrieve(self, query, k=5, filters=None):
            raise ConnectionError("chroma down")

    _, result, _ = run(GOOD, retriever=Broken(), max_rewrites=0)
    step = next(s for s in result.trace if s.step == "retrieve")
    assert not step.ok and "chroma down" in step.error and result.abstained


def test_lm_calls_never_exceed_the_configured_bounds():
    """Worst case: everything irrelevant on the KB, relevant-but-unsupported on the web."""
    web = FakeWeb([passage(f"w{i}", f"web page {i}", url=f"https://e.org/{i}") for i in range(10)])
    script = dict(GOOD, grade_relevance=lambda inp: {"relevance": "relevant" if "web page" in inp["passage"]
                                                     else "irrelevant"},
                  rewrite_query={"query": "q"}, judge_support={"support": "no"})
    cfg = dict(k=2, max_rewrites=2, max_web_rounds=1, max_regenerations=1, max_candidates=2)
    _, result, engine = run(script, web=web, **cfg)
    grades_kb = (1 + 2) * 2 * 2          # (1 + rewrites) rounds × 2k passages
    grades_web = 1 * 2                   # web round returns k results
    bound = 1 + grades_kb + 2 + grades_web + 3 * 2 + 3 * 1
    assert len(engine.calls) <= bound
    assert result.usage.lm_calls == len(engine.calls)
    assert engine.count("rewrite_query") == 2
    assert engine.count("generate_answer") <= 2 + 1


def test_parallel_grading_gives_the_same_result_and_counts():
    _, seq, e1 = run(GOOD, num_threads=1)
    _, par, e2 = run(GOOD, num_threads=4)
    assert seq.answer == par.answer
    assert len(e1.calls) == len(e2.calls) == par.usage.lm_calls


def test_empty_question_is_rejected():
    lm, _ = scripted_lm(GOOD)
    with pytest.raises(ValueError, match="non-empty"):
        SelfRAG(ListRetriever(KB), generator_lm=lm)(question="  ")


def test_constructor_rejects_a_non_retriever():
    with pytest.raises(TypeError, match="retriever must implement"):
        SelfRAG(object())


def test_each_judgement_is_a_named_predictor():
    names = {name for name, _ in SelfRAG(ListRetriever(KB)).named_predictors()}
    assert names == {"decide_retrieval", "grade_relevance", "grade_relevance_batch", "rewrite_query", "generate_answer",
                     "answer_directly", "judge_support", "judge_usefulness", "next_query", "check_answer"}
