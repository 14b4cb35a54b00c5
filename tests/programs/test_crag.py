"""CorrectiveRAG's branches, routing, bounds and trace, with a scripted LM engine (no real model)."""

import dspy
import pytest
from pydantic import ValidationError

from programs.artifacts import load_state_into, save_artifact
from programs.crag import CorrectiveRAG, select_strips, split_strips
from programs.routing import crag_action, crag_usable, route_after_refinement, route_after_web_round
from programs.passages import ABSTAIN_ANSWER
from programs.settings import ProgramSettings
from programs.thresholds import CRAG_DEFAULTS_BY_LANGUAGE, PAPER_CRAG, CragThresholds, Thresholds
from programs.types import RAGResult, WebSearchError
from tests.fakes import FakeWeb, ListRetriever, passage, scripted_lm

QUESTION = "When did the Zephyr bridge open?"
KB = [
    passage("p1", "The Zephyr bridge opened in 1931. It is painted green. Tours start at the north tower."),
    passage("p2", "Oda river trout season runs from April to June."),
    passage("p3", "Glass recycling in Norwich is collected every second Tuesday."),
]
WEB_PAGE = passage("w1", "Zephyr Bridge history. The Zephyr bridge was opened to traffic in 1931.",
                   url="https://example.org/zephyr", origin="web")


def score_if(**scores):
    """Evaluator: the score of the first keyword found in the passage, else 1."""
    return lambda inp: {"score": next((s for w, s in scores.items() if w in inp["passage"]), 1)}


def keep_if(*words):
    return lambda inp: {"keep": any(w in inp["strip"] for w in words)}


def answer_citing(*numbers):
    return {"answer": "It opened in 1931.", "citations": list(numbers), "answerable": True}


BASE = {
    "evaluate_retrieval": score_if(Zephyr=9),
    "filter_strip": keep_if("1931"),
    "rewrite_web_query": {"web_query": "Zephyr bridge opening year"},
    "generate_answer": answer_citing(1),
    "judge_support": {"support": "fully"},
}


def run(script, retriever=None, web=None, question=QUESTION, **cfg):
    cfg.setdefault("k", 3)
    lm, engine = scripted_lm(script)
    program = CorrectiveRAG(retriever or ListRetriever(KB), web_search=web, config=ProgramSettings(**cfg),
                            generator_lm=lm, adapter=dspy.JSONAdapter())
    pred = program(question=question)
    return pred, pred.result, engine


def steps(result: RAGResult, name: str):
    return [s for s in result.trace if s.step == name]


def routes(result: RAGResult):
    return [s.output for s in steps(result, "route")]


def inputs_of(engine, role):
    return [inp for r, inp in engine.calls if r == role]


# ---------------------------------------------------------------------- routing, no LM
@pytest.mark.parametrize("scores,expected", [
    ([9, 1, 1], "correct"),
    ([7], "correct"),             # >= upper
    ([6, 5, 4], "ambiguous"),
    ([3, 3, 6], "ambiguous"),
    ([3, 0, 2], "incorrect"),     # every score < lower
    ([4, 0], "ambiguous"),        # 4 is not < lower
    ([], "incorrect"),            # nothing retrieved
    ([None, 1], "ambiguous"),     # a failed evaluation is never evidence of irrelevance
    ([None, 9], "correct"),
    ([None], "ambiguous"),
])
def test_crag_action_thresholds(scores, expected):
    assert crag_action(scores, upper=7, lower=4) == expected


def test_crag_action_follows_the_configured_thresholds():
    assert crag_action([5], upper=5, lower=5) == "correct"
    assert crag_action([4], upper=5, lower=5) == "incorrect"
    assert crag_action([6], upper=9, lower=2) == "ambiguous"


def test_usable_passages_and_post_refinement_routes():
    assert crag_usable(4, 4) and crag_usable(None, 4) and not crag_usable(3, 4)
    assert route_after_refinement(0) == "abstain" and route_after_refinement(2) == "generate"
    assert route_after_web_round(1, None, 0) == "refined"
    assert route_after_web_round(0, None, 1) == "retry"           # pages found, nothing useful kept
    assert route_after_web_round(0, "empty", 1) == "retry"        # a new query may find something
    assert route_after_web_round(0, "empty", 0) == "give_up"
    assert route_after_web_round(0, "rate_limited", 3) == "give_up"  # would fail the same way again


def test_thresholds_must_be_ordered():
    with pytest.raises(ValidationError, match="crag_lower"):
        ProgramSettings(crag_upper=3, crag_lower=6)


def test_strips_split_english_and_chinese_sentences():
    assert split_strips("It opened in 1931. It is 3.5 km long! Is it old?\nYes") == [
        "It opened in 1931.", "It is 3.5 km long!", "Is it old?", "Yes"]
    assert split_strips("泽菲尔大桥于1931年开通。它横跨奥达河！真的吗？他说：“是的。”然后离开了") == [
        "泽菲尔大桥于1931年开通。", "它横跨奥达河！", "真的吗？", "他说：“是的。”", "然后离开了"]


def test_hard_wrapped_lines_are_one_strip_but_headings_lists_and_paragraphs_still_end_one():
    text = ("# Heron\nIts box carries up to 100 kg and fits two\nchild seats. It has a range of\nabout 80 km.\n"
            "- rain cover\n- second battery\n\nA new paragraph\nends here.\n第一行文字\n继续。")
    assert split_strips(text) == [
        "# Heron", "Its box carries up to 100 kg and fits two child seats.", "It has a range of about 80 km.",
        "- rain cover", "- second battery", "A new paragraph ends here.", "第一行文字继续。"]


def test_strip_selection_is_round_robin_and_bounded():
    a = passage("a", "A1. A2. A3.")
    b = passage("b", "B1. B2.")
    chosen, left_out = select_strips([a, b], 3)
    assert [s for _, _, s in chosen] == ["A1.", "A2.", "B1."]  # A1, B1, A2 picked; returned in document order
    assert left_out == 2


# ---------------------------------------------------------------------- branches
def test_correct_refines_strips_and_answers_from_them():
    web = FakeWeb([WEB_PAGE])
    pred, result, engine = run(BASE, web=web)
    assert routes(result) == ["correct", "generate", "accept"]
    assert result.answer == "It opened in 1931." and not result.abstained and not result.used_web
    assert result.supported == "fully"
    assert web.queries == [] and "rewrite_web_query" not in engine.roles()
    # only p1 is usable (p2, p3 score 1 < lower): its 3 strips are judged, one is kept
    assert engine.count("evaluate_retrieval") == 3 and engine.count("filter_strip") == 3
    evidence = inputs_of(engine, "generate_answer")[0]["passages"]
    assert "1931" in evidence and "painted green" not in evidence and "trout" not in evidence
    assert [c.id for c in result.citations] == ["p1"] and pred.cited_doc_ids == ["p1"]
    assert result.citations[0].snippet == "The Zephyr bridge opened in 1931."
    assert result.usage.lm_calls == len(engine.calls) == 3 + 3 + 1 + 1
    assert result.usage.prompt_tokens == 10 * result.usage.lm_calls
    refine = steps(result, "refine")[0]
    assert refine.inputs["source"] == "kb" and refine.output["kept"] == 1


def test_incorrect_rewrites_to_keywords_searches_the_web_and_cites_the_url():
    web = FakeWeb([WEB_PAGE])
    script = dict(BASE, evaluate_retrieval={"score": 1})
    pred, result, engine = run(script, web=web)
    assert routes(result) == ["incorrect", "refined", "generate", "accept"]
    assert web.queries == ["Zephyr bridge opening year"]
    assert inputs_of(engine, "rewrite_web_query")[0]["question"] == QUESTION
    # the knowledge base is discarded: only the web page's strips are judged
    assert all("Zephyr Bridge history" in s["strip"] or "1931" in s["strip"] for s in inputs_of(engine, "filter_strip"))
    assert engine.count("filter_strip") == 2
    assert result.used_web and not result.abstained
    assert [c.source for c in result.citations] == ["https://example.org/zephyr"]
    assert pred.cited_doc_ids == ["w1"]
    web_step = steps(result, "web_search")[0]
    assert web_step.ok and web_step.inputs["query"] == "Zephyr bridge opening year"


def test_ambiguous_uses_both_sources_merged():
    web = FakeWeb([WEB_PAGE])
    script = dict(BASE, evaluate_retrieval=score_if(Zephyr=6), generate_answer=answer_citing(1, 2))  # in [5.84, 6.64)
    pred, result, engine = run(script, web=web)
    assert routes(result)[0] == "ambiguous"
    evidence = inputs_of(engine, "generate_answer")[0]["passages"]
    assert evidence.index("[1] (p1)") < evidence.index("[2] (w1)")
    assert [s.inputs["source"] for s in steps(result, "refine")] == ["kb", "web"]
    assert pred.cited_doc_ids == ["p1", "w1"]
    assert [c.source for c in result.citations] == ["p1.md", "https://example.org/zephyr"]
    assert result.used_web


def test_incorrect_without_web_abstains_and_records_why():
    script = dict(BASE, evaluate_retrieval={"score": 0})
    pred, result, engine = run(script, web=None)
    assert result.abstained and result.answer == ABSTAIN_ANSWER and pred.cited_doc_ids == []
    assert routes(result) == ["incorrect", "abstain"]
    web_step = steps(result, "web_search")[0]
    assert not web_step.ok and web_step.error.startswith("disabled")
    assert engine.roles() == ["evaluate_retrieval"] * 3  # no rewrite, no strip, no draft
    assert steps(result, "abstain")


def test_web_failure_is_recorded_then_abstains_when_nothing_else_is_known():
    web = FakeWeb(error=WebSearchError("rate_limited", "429 after 2 retries"))
    script = dict(BASE, evaluate_retrieval={"score": 1})
    _, result, engine = run(script, web=web, max_web_rounds=3)
    failed = steps(result, "web_search")
    assert len(failed) == 1 and not failed[0].ok and "rate_limited" in failed[0].error  # not retried
    assert routes(result) == ["incorrect", "give_up", "abstain"]
    assert result.abstained and engine.count("rewrite_web_query") == 1


def test_web_failure_when_ambiguous_answers_from_the_refined_knowledge_base():
    web = FakeWeb(error=WebSearchError("timeout", "10s"))
    script = dict(BASE, evaluate_retrieval=score_if(Zephyr=6))
    pred, result, _ = run(script, web=web)
    assert routes(result)[:2] == ["ambiguous", "give_up"]
    assert not steps(result, "web_search")[0].ok
    assert not result.abstained and not result.used_web and pred.cited_doc_ids == ["p1"]


def test_a_crashing_web_backend_is_recorded_not_fatal():
    class Broken:
        def search(self, query, max_results=5):
            raise KeyError("bug")

    _, result, _ = run(dict(BASE, evaluate_retrieval={"score": 1}), web=Broken())
    step = steps(result, "web_search")[0]
    assert not step.ok and "KeyError" in step.error and result.abstained


def test_retriever_failure_is_recorded_and_the_web_answers():
    class Broken:
        def retrieve(self, query, k=5, filters=None):
            raise ConnectionError("chroma down")

    _, result, engine = run(BASE, retriever=Broken(), web=FakeWeb([WEB_PAGE]))
    assert "chroma down" in steps(result, "retrieve")[0].error
    assert routes(result)[0] == "incorrect" and "evaluate_retrieval" not in engine.roles()
    assert result.citations[0].source == "https://example.org/zephyr"


# ---------------------------------------------------------------------- bounds
def test_strip_judgements_are_bounded_by_max_strips():
    long = passage("long", " ".join(f"Zephyr fact number {i} is 1931." for i in range(20)))
    _, result, engine = run(BASE, retriever=ListRetriever([long]), max_strips=5)
    assert engine.count("filter_strip") == 5
    refine = steps(result, "refine")[0]
    assert refine.output["strips"] == 5 and refine.output["left_out_by_limit"] == 15


def test_web_rounds_are_bounded_and_each_retry_uses_a_new_keyword_query():
    useless = FakeWeb([passage(f"w{i}", f"Zephyr page {i}. Nothing here.", url=f"https://e.org/{i}") for i in range(3)])
    queries = iter(["zephyr bridge", "zephyr bridge opening 1931", "never used"])
    script = dict(BASE, evaluate_retrieval={"score": 0}, rewrite_web_query=lambda inp: {"web_query": next(queries)})
    _, result, engine = run(script, web=useless, max_web_rounds=2, max_strips=4)
    assert useless.queries == ["zephyr bridge", "zephyr bridge opening 1931"]
    assert engine.count("rewrite_web_query") == 2
    rewrites = inputs_of(engine, "rewrite_web_query")
    assert "zephyr bridge" in rewrites[1]["failed_queries"]
    assert engine.count("filter_strip") == 2 * 4  # max_strips per web round
    assert routes(result) == ["incorrect", "retry", "give_up", "abstain"]
    assert len(steps(result, "web_search")) == 2 and result.abstained


def test_an_empty_web_result_is_retried_within_the_budget():
    web = FakeWeb(error=WebSearchError("empty", "no results"))
    _, result, engine = run(dict(BASE, evaluate_retrieval={"score": 0}), web=web, max_web_rounds=2)
    assert len(web.queries) == 2 and engine.count("rewrite_web_query") == 2
    assert all(not s.ok for s in steps(result, "web_search"))


def test_web_routing_reads_the_error_kind_not_the_message():
    error = WebSearchError("empty", "no results")
    error.args = ("rate_limited: worded like a failure that would repeat",)
    web = FakeWeb(error=error)
    _, result, _ = run(dict(BASE, evaluate_retrieval={"score": 0}), web=web, max_web_rounds=2)
    assert len(web.queries) == 2  # "empty" is worth another query, whatever the message says
    assert [s.error_kind for s in steps(result, "web_search")] == ["empty", "empty"]
    assert routes(result) == ["incorrect", "retry", "give_up", "abstain"]


def test_zero_web_rounds_refuses_without_any_lm_call():
    web = FakeWeb([WEB_PAGE])
    _, result, engine = run(dict(BASE, evaluate_retrieval={"score": 0}), web=web, max_web_rounds=0)
    assert web.queries == [] and "rewrite_web_query" not in engine.roles()
    assert steps(result, "web_search")[0].error.startswith("budget")


def test_unsupported_answer_is_regenerated_then_returned_flagged():
    script = dict(BASE, judge_support={"support": "no"})
    _, result, engine = run(script, max_regenerations=2)
    assert engine.count("generate_answer") == 3 and engine.count("judge_support") == 3
    assert routes(result)[-3:] == ["regenerate", "regenerate", "flag_unsupported"]
    assert result.supported == "no" and not result.abstained


def test_unanswerable_draft_abstains():
    script = dict(BASE, generate_answer={"answer": "Not stated.", "citations": [], "answerable": False})
    _, result, _ = run(script, max_regenerations=1)
    assert result.abstained and result.answer == ABSTAIN_ANSWER and steps(result, "candidate_dropped")


def test_lm_calls_never_exceed_the_documented_bound():
    """Worst case: ambiguous, every strip kept on the KB, useless web pages, answers never supported."""
    web = FakeWeb([passage(f"w{i}", f"Web page {i}. More text. Even more.", url=f"https://e.org/{i}") for i in range(5)])
    script = dict(BASE, evaluate_retrieval={"score": 6},
                  filter_strip=lambda inp: {"keep": inp["strip"].startswith("(p")},  # KB strips only
                  judge_support={"support": "no"})
    cfg = dict(k=3, max_strips=4, max_web_rounds=2, max_regenerations=1)
    _, result, engine = run(script, web=web, **cfg)
    bound = 3 + 4 * (1 + 2) + 2 + (1 + 1) * 2
    assert len(engine.calls) <= bound
    assert result.usage.lm_calls == len(engine.calls)
    assert engine.count("filter_strip") == 4 * 3  # KB: 4 of 5 strips; 2 web rounds × 4


# ---------------------------------------------------------------------- failures and plumbing
def test_parse_failure_of_the_evaluator_is_recorded_not_fatal():
    script = dict(BASE, evaluate_retrieval="this is not json at all")
    _, result, engine = run(script, web=FakeWeb([WEB_PAGE]))
    failed = [s for s in result.trace if not s.ok]
    assert len(failed) == 3 and all(s.step == "evaluate_retrieval" and s.error for s in failed)
    assert routes(result)[0] == "ambiguous"  # unknown scores: consult both sources
    assert steps(result, "route")[0].inputs["scores"] == "[None, None, None]"
    assert not result.abstained and result.answer == "It opened in 1931."


def test_one_failed_evaluation_does_not_hide_a_correct_passage():
    script = dict(BASE, evaluate_retrieval=lambda inp: "garbage" if "trout" in inp["passage"]
                  else {"score": 9 if "Zephyr" in inp["passage"] else 1})
    _, result, engine = run(script, web=FakeWeb([WEB_PAGE]))
    assert routes(result)[0] == "correct" and "rewrite_web_query" not in engine.roles()
    # the unevaluated trout passage is still refined (its strip is dropped by the filter)
    assert any("trout" in s["strip"] for s in inputs_of(engine, "filter_strip"))


def test_parallel_evaluation_gives_the_same_result_and_counts():
    _, seq, e1 = run(BASE, num_threads=1)
    _, par, e2 = run(BASE, num_threads=4)
    assert seq.answer == par.answer and seq.citations == par.citations
    assert len(e1.calls) == len(e2.calls) == par.usage.lm_calls


def test_separate_critic_lm_gets_the_judgements():
    gen, gen_engine = scripted_lm(BASE)
    critic, critic_engine = scripted_lm(BASE)
    program = CorrectiveRAG(ListRetriever(KB), config=ProgramSettings(k=3), generator_lm=gen, critic_lm=critic,
                            adapter=dspy.JSONAdapter())
    result = program(question=QUESTION).result
    assert set(gen_engine.roles()) == {"generate_answer"}
    assert set(critic_engine.roles()) == {"evaluate_retrieval", "filter_strip", "judge_support"}
    assert result.usage.lm_calls == len(gen_engine.calls) + len(critic_engine.calls)


def test_empty_question_is_rejected():
    lm, _ = scripted_lm(BASE)
    with pytest.raises(ValueError, match="non-empty"):
        CorrectiveRAG(ListRetriever(KB), generator_lm=lm)(question=" ")


def test_constructor_rejects_a_non_retriever_and_a_non_web_search():
    with pytest.raises(TypeError, match="retriever must implement"):
        CorrectiveRAG(object())
    with pytest.raises(TypeError, match="web_search must implement"):
        CorrectiveRAG(ListRetriever(KB), web_search=object())


def test_each_judgement_is_a_named_predictor():
    names = {name for name, _ in CorrectiveRAG(ListRetriever(KB)).named_predictors()}
    assert names == {"evaluate_retrieval", "filter_strip", "rewrite_web_query", "generate_answer", "judge_support"}


class BrokenStore:
    def retrieve(self, query, k=5, filters=None):
        raise RuntimeError("collection missing")


@pytest.mark.parametrize("store,web,expected", [
    (BrokenStore(), FakeWeb(error=WebSearchError("timeout", "timed out")), "retrieval_failed"),
    (None, FakeWeb(error=WebSearchError("timeout", "timed out")), "web_failed"),
    (BrokenStore(), None, "retrieval_failed"),
    (None, FakeWeb([passage("w9", "Cats like milk.", url="https://e.org/c")]), "no_relevant_passage"),
])
def test_abstain_reason_says_what_failed(store, web, expected):
    script = dict(BASE, evaluate_retrieval={"score": 1}, filter_strip={"keep": False})
    _, result, _ = run(script, retriever=store, web=web)
    assert result.abstained and result.abstain_reason == expected


def test_with_web_rounds_off_nothing_found_is_no_relevant_passage_not_web_failed():
    script = dict(BASE, evaluate_retrieval={"score": 1}, filter_strip={"keep": False})
    _, result, _ = run(script, web=FakeWeb([passage("w9", "x", url="https://e.org/x")]), max_web_rounds=0)
    assert result.abstained and result.abstain_reason == "no_relevant_passage"


def test_a_drafter_that_finds_no_answer_abstains_as_no_answer_in_passages():
    script = dict(BASE, generate_answer={"answer": "", "citations": [], "answerable": False})
    _, result, _ = run(script, max_regenerations=0)
    assert result.abstained and result.abstain_reason == "no_answer_in_passages"


# ---------------------------------------------------------------------- soft judgements
def run_soft(script, probs, **cfg):
    cfg.setdefault("k", 3)
    lm, engine = scripted_lm(script, probs=probs)
    program = CorrectiveRAG(ListRetriever(KB), web_search=None, config=ProgramSettings(**cfg),
                            generator_lm=lm, adapter=dspy.JSONAdapter())
    return program(question=QUESTION).result, engine


def test_the_evaluator_and_strip_filter_record_probabilities_and_route_on_the_argmax():
    # p1's text decodes 3 (ambiguous), but its probabilities put 0.6 on 9: the argmax routes (correct)
    script = dict(BASE, evaluate_retrieval=score_if(Zephyr=3))
    probs = {
        "evaluate_retrieval": lambda inp: {"score": {3: 0.3, 9: 0.6, 1: 0.1} if "Zephyr" in inp["passage"]
                                           else {1: 0.8, 0: 0.2}},
        "filter_strip": lambda inp: {"keep": {True: 0.9, False: 0.1} if "1931" in inp["strip"]
                                     else {False: 0.7, True: 0.3}},
    }
    result, engine = run_soft(script, probs, max_web_rounds=0, crag_score="argmax", crag_upper=7, crag_lower=4)
    assert routes(result)[0] == "correct"
    route = steps(result, "route")[0]
    assert route.inputs["scores"] == "[9, 1, 1]"
    evaluated = steps(result, "evaluate_retrieval")
    assert [s.inputs["passage_id"] for s in evaluated] == ["p1", "p2", "p3"]
    first = evaluated[0]
    assert first.soft is True and first.probs["9"] == pytest.approx(0.6) and first.probs["3"] == pytest.approx(0.3)
    assert first.output == 9 and first.decoded == 3  # the trace shows the routed label and what the text held
    assert evaluated[1].output == 1 and evaluated[1].decoded is None
    strips = steps(result, "filter_strip")
    assert [s.probs["true"] for s in strips] == pytest.approx([0.9, 0.3, 0.3])
    assert steps(result, "refine")[0].output["kept"] == 1
    assert "1931" in inputs_of(engine, "generate_answer")[0]["passages"]


def test_a_strip_whose_argmax_is_keep_is_kept_though_the_text_said_false():
    script = dict(BASE, filter_strip=keep_if("no such word"))  # every strip decodes false
    probs = {"filter_strip": lambda inp: {"keep": {False: 0.4, True: 0.6} if "1931" in inp["strip"]
                                          else {False: 0.9, True: 0.1}}}
    result, engine = run_soft(script, probs)
    kept = [s for s in steps(result, "filter_strip") if s.output is True]
    assert len(kept) == 1 and kept[0].decoded is False
    assert steps(result, "refine")[0].output["kept"] == 1 and not result.abstained


def test_without_log_probabilities_the_evaluator_records_hard_labels():
    _, result, _ = run(BASE)
    first = steps(result, "evaluate_retrieval")[0]
    assert first.soft is False and first.probs["9"] == 1.0 and first.output == 9 and first.decoded is None


def test_the_expected_score_routes_where_the_argmax_would_not():
    # p1's distribution: argmax 9 ("correct" at upper 7) but E[score] = 0.3*3 + 0.6*9 + 0.1*2 = 6.5 (2, not 1: a
    # '1' token is a prefix of '10') ("ambiguous")
    script = dict(BASE, evaluate_retrieval=score_if(Zephyr=9))
    probs = {"evaluate_retrieval": lambda inp: {"score": {3: 0.3, 9: 0.6, 2: 0.1} if "Zephyr" in inp["passage"]
                                                else {1: 0.8, 0: 0.2}}}
    paper = dict(max_web_rounds=0, crag_upper=7, crag_lower=4)
    argmax, _ = run_soft(script, probs, crag_score="argmax", **paper)
    expected, _ = run_soft(script, probs, crag_score="expected", **paper)
    assert routes(argmax)[0] == "correct" and routes(expected)[0] == "ambiguous"
    route = steps(expected, "route")[0]
    assert route.inputs["scores"] == "[6.5, 0.8, 0.8]"
    assert [s.output for s in steps(expected, "evaluate_retrieval")] == [9, 1, 1]  # the steps keep the argmax
    # only p1 (6.5 >= lower 4) is refined; the web is off, so the knowledge base answers alone
    assert {s.inputs["passage_id"] for s in steps(expected, "evaluate_retrieval")} == {"p1", "p2", "p3"}
    assert len(steps(expected, "filter_strip")) == len(steps(argmax, "filter_strip"))
    assert not expected.abstained


def test_the_expected_score_thresholds_are_fractional():
    probs = {"evaluate_retrieval": lambda inp: {"score": {3: 0.3, 9: 0.6, 2: 0.1} if "Zephyr" in inp["passage"]
                                                else {1: 0.8, 0: 0.2}}}
    result, _ = run_soft(BASE, probs, max_web_rounds=0, crag_score="expected", crag_upper=6.45, crag_lower=0.9)
    assert routes(result)[0] == "correct"
    assert crag_action([0.8, 0.85], upper=6.3, lower=0.9) == "incorrect"


def test_without_log_probabilities_the_expected_score_is_the_decoded_one():
    _, result, _ = run(BASE)  # the default score is the expected one
    assert steps(result, "route")[0].inputs["scores"] == "[9.0, 1.0, 1.0]"
    assert routes(result)[0] == "correct"


def test_the_defaults_route_on_the_expected_score_with_its_fitted_thresholds():
    program = CorrectiveRAG(ListRetriever(KB), config=ProgramSettings())
    cut = program.crag_thresholds
    assert (cut.score, cut.upper, cut.lower) == ("expected", 6.64, 5.84)
    assert crag_action([6.7, 2.0], cut.upper, cut.lower) == "correct"
    assert crag_action([6.5, 2.0], cut.upper, cut.lower) == "ambiguous"
    assert crag_action([5.8, 2.0], cut.upper, cut.lower) == "incorrect"


def compiled_crag(**cfg):
    program = CorrectiveRAG(ListRetriever(KB), config=ProgramSettings(**cfg))
    program.compiled_thresholds = Thresholds(crag=CragThresholds(score="expected", upper=6.2, lower=3.0))
    return program


def test_the_compiled_thresholds_hold_unless_the_settings_set_one():
    assert compiled_crag().crag_thresholds == CragThresholds(score="expected", upper=6.2, lower=3.0)
    assert compiled_crag(crag_upper=8).crag_thresholds == CragThresholds(score="expected", upper=8, lower=3.0)
    assert compiled_crag(crag_lower=1.5, crag_upper=2).crag_thresholds.lower == 1.5


def test_argmax_alone_takes_the_papers_thresholds_not_ones_fitted_on_the_expectation():
    assert compiled_crag(crag_score="argmax").crag_thresholds == PAPER_CRAG
    bare = CorrectiveRAG(ListRetriever(KB), config=ProgramSettings(crag_score="argmax"))
    assert (bare.crag_thresholds.upper, bare.crag_thresholds.lower) == (7.0, 4.0)
    assert compiled_crag(crag_score="argmax", crag_upper=9).crag_thresholds == CragThresholds(
        score="argmax", upper=9, lower=4.0)


def test_a_lower_set_above_the_compiled_upper_is_refused_naming_both():
    with pytest.raises(ValueError, match=r"crag_lower \(6.5\) must not exceed program.crag_upper \(6.2\)"):
        compiled_crag(crag_lower=6.5).crag_thresholds
    with pytest.raises(ValidationError, match="lower CRAG threshold"):
        CragThresholds(upper=3, lower=4)


def test_the_route_records_the_thresholds_and_score_it_used():
    probs = {"evaluate_retrieval": lambda inp: {"score": {3: 0.3, 9: 0.6, 2: 0.1} if "Zephyr" in inp["passage"]
                                                else {1: 0.8, 0: 0.2}}}
    lm, _ = scripted_lm(BASE, probs=probs)
    program = compiled_crag(k=3, max_web_rounds=0)  # E[p1] = 6.5 >= the compiled 6.2 (the default 6.64 is not)
    program.generator_lm = program.critic_lm = lm
    program.adapter = dspy.JSONAdapter()
    result = program(question=QUESTION).result
    route = steps(result, "route")[0]
    assert route.output == "correct"
    assert (route.inputs["score"], route.inputs["upper"], route.inputs["lower"]) == ("expected", "6.2", "3.0")


def test_crag_thresholds_survive_an_artifact_round_trip(tmp_path):
    program = compiled_crag()
    path = save_artifact(program, tmp_path / "crag.json")
    loaded = load_state_into(CorrectiveRAG(ListRetriever(KB), config=ProgramSettings()), path, strict=True)
    assert loaded.crag_thresholds == CragThresholds(score="expected", upper=6.2, lower=3.0)


def bilingual_crag(**cfg):
    """A CRAG artifact with a set for any language and one for Chinese questions."""
    program = compiled_crag(**cfg)
    program.compiled_thresholds = program.compiled_thresholds.model_copy(
        update={"crag_by_language": {"zh": CragThresholds(score="expected", upper=6.6, lower=6.1)}})
    return program


def test_a_set_fitted_for_a_language_holds_for_its_questions_only():
    program = bilingual_crag()
    assert program.crag_thresholds_for("zh") == CragThresholds(score="expected", upper=6.6, lower=6.1)
    assert program.crag_thresholds_for("en") == program.crag_thresholds_for(None) == CragThresholds(
        score="expected", upper=6.2, lower=3.0)
    assert program.crag_thresholds == CragThresholds(score="expected", upper=6.2, lower=3.0)  # outside a question
    assert bilingual_crag(crag_upper=8).crag_thresholds_for("zh") == CragThresholds(score="expected", upper=8,
                                                                                    lower=6.1)


def test_a_chinese_question_routes_on_the_chinese_set():
    probs = {"evaluate_retrieval": lambda inp: {"score": {3: 0.3, 9: 0.6, 2: 0.1} if "Zephyr" in inp["passage"]
                                                else {1: 0.8, 0: 0.2}}}
    lm, _ = scripted_lm(BASE, probs=probs)
    program = bilingual_crag(k=3, max_web_rounds=0)
    program.generator_lm = program.critic_lm = lm
    program.adapter = dspy.JSONAdapter()
    # E[p1] = 6.5: "correct" at the any-language upper 6.2, "ambiguous" at the Chinese 6.6 (lower 6.1)
    for question, upper, action in ((QUESTION, "6.2", "correct"), ("Zephyr 大桥是哪一年通车的？", "6.6", "ambiguous")):
        route = steps(program(question=question).result, "route")[0]
        assert (route.inputs["upper"], route.output) == (upper, action)
    assert program.crag_thresholds.upper == 6.2  # the (last, Chinese) question's language does not leak out


def test_a_setting_against_a_languages_set_is_refused_naming_both():
    program = bilingual_crag(crag_upper=6.0)  # below the Chinese lower 6.1, above the any-language 3.0
    assert program.crag_thresholds.upper == 6.0
    with pytest.raises(ValueError, match=r"crag_lower \(6.1\) must not exceed program.crag_upper \(6\)"):
        program.check_crag_settings()
    compiled_crag(crag_upper=6.0).check_crag_settings()  # no Chinese set: nothing against it


def test_chinese_questions_take_their_own_defaults_unless_an_artifact_holds_a_set():
    bare = CorrectiveRAG(ListRetriever(KB), config=ProgramSettings())
    assert bare.crag_thresholds_for("zh") == CRAG_DEFAULTS_BY_LANGUAGE["zh"] != bare.crag_thresholds
    assert bare.crag_thresholds_for("en") == CragThresholds()
    # an artifact's set for any language (fitted on the user's own questions) wins over the built-in Chinese one
    assert compiled_crag().crag_thresholds_for("zh") == CragThresholds(score="expected", upper=6.2, lower=3.0)
    argmax = CorrectiveRAG(ListRetriever(KB), config=ProgramSettings(crag_score="argmax"))
    assert argmax.crag_thresholds_for("zh") == PAPER_CRAG  # the defaults are fitted on the expectation
    # a setting against the Chinese default only is refused too, naming the language
    zh_lower = CRAG_DEFAULTS_BY_LANGUAGE["zh"].lower
    between = CorrectiveRAG(ListRetriever(KB), config=ProgramSettings(crag_upper=zh_lower - 0.01))
    with pytest.raises(ValueError, match="for zh questions"):
        between.check_crag_settings()


def test_per_language_sets_survive_an_artifact_round_trip_and_are_omitted_when_empty(tmp_path):
    path = save_artifact(bilingual_crag(), tmp_path / "crag.json")
    loaded = load_state_into(CorrectiveRAG(ListRetriever(KB), config=ProgramSettings()), path, strict=True)
    assert loaded.crag_thresholds_for("zh") == CragThresholds(score="expected", upper=6.6, lower=6.1)
    assert "crag_by_language" not in Thresholds().model_dump()
    assert "crag_by_language" not in compiled_crag().compiled_thresholds.model_dump()


def test_an_unknown_crag_score_is_refused():
    with pytest.raises(ValidationError, match="crag_score"):
        ProgramSettings(crag_score="mean")
