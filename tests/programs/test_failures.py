"""A dead backend is an error, not an honest abstention: ``RAGResult.error`` is set exactly when the LM
calls that decide the answer failed, with the cause; ``used_web`` only when web passages were used; an
over-long question is refused before any LM call."""

import dspy
import pytest

from programs.baselines import GradedRAG
from programs.crag import CorrectiveRAG
from programs.failures import deciding_failure, failure_kind
from programs.registry import PROGRAM_NAMES, program_class
from programs.selfrag import SelfRAG
from programs.settings import ProgramSettings
from programs.types import TraceStep, WebSearchError
from tests.faults.engine import EXPECTED_KIND, FAULTS, every, faulty_lm, only, pattern
from tests.fakes import FakeWeb, ListRetriever, passage

KB = [
    passage("p1", "The Zephyr bridge opened in 1931 and spans the river Oda."),
    passage("p2", "Oda river trout season runs from April to June."),
]
QUESTION = "When did the Zephyr bridge open?"
GOOD = {
    "retrieve_decision": {"decision": "yes"},
    "grade_relevance": lambda inp: {"relevance": "relevant" if "Zephyr" in inp["passage"] else "irrelevant"},
    "generate_answer": {"answer": "It opened in 1931.", "citations": [1], "answerable": True},
    "answer_directly": {"answer": "In 1931."},
    "judge_support": {"support": "fully"},
    "judge_usefulness": {"usefulness": 5},
    "rewrite_query": {"query": "Zephyr bridge opening year"},
    "evaluate_retrieval": lambda inp: {"score": 9 if "Zephyr" in inp["passage"] else 1},
    "filter_strip": {"keep": True},
    "rewrite_web_query": {"web_query": "zephyr bridge"},
    "next_query": {"next_query": "Zephyr bridge river Oda"},
    "decompose_question": {"sub_questions": ["Which bridge spans the Oda?", "When did it open?"]},
    "answer_sub_question": {"sub_answer": "1931"},
}
PROGRAMS = [program_class(name) for name in PROGRAM_NAMES]  # every registered program


def run(cls, plan, web=None, **cfg):
    cfg.setdefault("retrieve_rules", False)  # the judge decides: its call is part of the failure plan
    lm, engine = faulty_lm(GOOD, plan)
    program = cls(ListRetriever(KB), web_search=web, config=ProgramSettings(**cfg), generator_lm=lm,
                  adapter=dspy.JSONAdapter())
    return program(question=QUESTION).result, engine


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("cls", PROGRAMS, ids=lambda c: c.__name__)
def test_a_dead_backend_is_an_error_with_its_cause_not_an_abstention(cls, fault):
    result, engine = run(cls, every(fault))
    assert result.abstained and result.abstain_reason == "lm_error"
    assert result.error_kind == EXPECTED_KIND[fault]
    assert result.error.startswith(f"{EXPECTED_KIND[fault]}: ")
    assert "\n" not in result.error and len(result.error) < 400
    assert result.usage.lm_calls == len(engine.log) > 0


@pytest.mark.parametrize("cls", PROGRAMS, ids=lambda c: c.__name__)
def test_a_healthy_backend_has_no_error(cls):
    result, engine = run(cls, pattern([]))
    assert result.error is None and result.error_kind is None
    assert not result.abstained and result.answer


def test_one_failed_grade_among_several_is_a_partial_failure_not_an_error():
    # per-passage grading: the second passage's grade fails, the first says relevant
    result, engine = run(SelfRAG, pattern([None, None, "timeout"]), grading="per_passage")
    assert engine.failed_roles() == ["grade_relevance"]
    assert not result.abstained and result.error is None
    assert any(not s.ok for s in result.trace)


def test_failed_drafts_make_an_error_even_when_grading_worked():
    result, engine = run(SelfRAG, only({"generate_answer"}, "refused"))
    assert result.abstained and result.error_kind == "unreachable" and "draft" in result.error


def test_failed_support_judgements_withhold_the_answer_as_an_error():
    result, engine = run(CorrectiveRAG, only({"judge_support"}, "timeout"))
    assert result.error_kind == "timeout" and "support" in result.error


def test_a_failed_composition_of_a_decomposed_question_is_an_error():
    # compose_answer has generate_answer's output fields: the engine sees it as generate_answer
    result, engine = run(program_class("decompose-serial"), only({"generate_answer"}, "timeout"))
    assert engine.failed_roles() == ["generate_answer"]
    assert result.abstained and result.error_kind == "timeout" and "draft" in result.error


def test_failed_drafts_of_every_iterative_round_are_an_error():
    result, engine = run(program_class("iterative"), only({"generate_answer"}, "refused"), max_iterations=2)
    assert result.abstained and result.error_kind == "unreachable" and "draft" in result.error


def test_an_irrelevant_knowledge_base_is_still_an_honest_abstention():
    script = {**GOOD, "grade_relevance": {"relevance": "irrelevant"}}
    lm, engine = faulty_lm(script, pattern([]))
    program = SelfRAG(ListRetriever(KB), config=ProgramSettings(), generator_lm=lm, adapter=dspy.JSONAdapter())
    result = program(question=QUESTION).result
    assert result.abstained and result.abstain_reason == "no_relevant_passage" and result.error is None


@pytest.mark.parametrize("cls", [SelfRAG, GradedRAG, CorrectiveRAG], ids=lambda c: c.__name__)
def test_used_web_is_false_when_the_web_search_failed(cls):
    script = {**GOOD, "grade_relevance": {"relevance": "irrelevant"},
              "evaluate_retrieval": {"score": 0}}
    lm, engine = faulty_lm(script, pattern([]))
    web = FakeWeb(error=WebSearchError("connection", "cannot reach the web"))
    program = cls(ListRetriever(KB), web_search=web, config=ProgramSettings(), generator_lm=lm,
                  adapter=dspy.JSONAdapter())
    result = program(question=QUESTION).result
    assert web.queries, "the web was tried"
    assert result.abstained and result.used_web is False


@pytest.mark.parametrize("cls", [SelfRAG, GradedRAG, CorrectiveRAG], ids=lambda c: c.__name__)
def test_used_web_is_false_when_web_passages_came_back_but_a_dead_backend_never_used_them(cls):
    web = FakeWeb([passage("w1", "The Zephyr bridge opened in 1931.", url="https://example.org/zephyr")])
    lm, engine = faulty_lm(GOOD, every("refused"))
    program = cls(ListRetriever(KB), web_search=web, config=ProgramSettings(), generator_lm=lm,
                  adapter=dspy.JSONAdapter())
    result = program(question=QUESTION).result
    assert result.error_kind == "unreachable"
    assert result.used_web is False


def test_used_web_is_true_when_web_passages_answered():
    web_passage = passage("w1", "The Zephyr bridge opened in 1931.", url="https://example.org/zephyr")
    script = {**GOOD, "grade_relevance": lambda inp: {"relevance": "relevant" if "example.org" in inp["passage"]
                                                       or "w1" in inp["passage"] else "irrelevant"}}
    lm, _ = faulty_lm(script, pattern([]))
    program = SelfRAG(ListRetriever(KB[1:]), web_search=FakeWeb([web_passage]), config=ProgramSettings(max_rewrites=0),
                      generator_lm=lm, adapter=dspy.JSONAdapter())
    result = program(question=QUESTION).result
    assert result.used_web is True


@pytest.mark.parametrize("cls", PROGRAMS, ids=lambda c: c.__name__)
def test_an_over_long_question_is_refused_before_any_lm_call(cls):
    lm, engine = faulty_lm(GOOD, pattern([]))
    program = cls(ListRetriever(KB), config=ProgramSettings(max_question_chars=50), generator_lm=lm,
                  adapter=dspy.JSONAdapter())
    with pytest.raises(ValueError, match="51 characters long; the limit is 50"):
        program(question="x" * 51)
    assert engine.log == []
    assert program(question="x" * 50).result is not None


@pytest.mark.parametrize("error, kind", [
    ("LMTimeoutError: [openai/gpt] Request timed out", "timeout"),
    ("Timeout: litellm.Timeout: APITimeoutError - Request timed out.", "timeout"),
    ("LMTransportError: [x] [Errno 111] Connection refused", "unreachable"),
    ("APIConnectionError: litellm.APIConnectionError: OllamaException - Cannot connect to host", "unreachable"),
    ("LMUnexpectedError: [x] HTTPConnectionPool(host='localhost'): Failed to establish a new connection",
     "unreachable"),
    ("LMAuthError: [x] Incorrect API key provided", "auth"),
    ("AuthenticationError: litellm.AuthenticationError: OpenAIException - 401", "auth"),
    ("LMRateLimitError: [x] Too Many Requests", "rate_limited"),
    ("RateLimitError: litellm.RateLimitError: 429 quota exceeded", "rate_limited"),
    ("ContextWindowExceededError: [x] Requested tokens exceed context window of 4096", "context_overflow"),
    ("LMInvalidRequestError: This model's maximum context length is 8192 tokens", "context_overflow"),
    ("AdapterParseError: Adapter JSONAdapter failed to parse the LM response.", "parse"),
    ("RuntimeError: something else", "other"),
    (None, "other"),
])
def test_failure_kind_reads_type_and_message(error, kind):
    assert failure_kind(error) == kind


def test_deciding_failure_is_by_stage():
    ok = TraceStep(step="grade_relevance", ok=True)
    bad = TraceStep(step="grade_relevance", ok=False, error="LMTimeoutError: timed out")
    assert deciding_failure([ok, bad]) is None
    assert deciding_failure([bad, bad]).kind == "timeout"
    assert deciding_failure([TraceStep(step="retrieve_decision", ok=False, error="x")]) is None  # only steers
    draft_failed = [ok, TraceStep(step="generate_answer", ok=False, error="AdapterParseError: bad")]
    assert deciding_failure(draft_failed).stage == "draft"
    assert deciding_failure([]) is None
