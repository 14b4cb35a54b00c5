"""One question under injected faults: the program, its LM-call bound, and the independent oracle of
whether the calls that decide the answer failed (read from the engine's log, not from the trace).

Shared by the property tests (tests/faults/test_fault_injection.py) and bench/bench_faults.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import dspy

from programs.registry import PROGRAM_NAMES, program_class
from programs.settings import ProgramSettings
from programs.thresholds import Thresholds
from programs.types import RAGResult, WebSearchError
from tests.faults.engine import FaultyEngine, Plan, faulty_lm
from tests.fakes import FakeWeb, ListRetriever, passage

KB = [
    passage("p1", "The Zephyr bridge opened in 1931 and spans the river Oda."),
    passage("p2", "Oda river trout season runs from April to June."),
    passage("p3", "Glass recycling in Norwich is collected every second Tuesday."),
]
WEB = [passage("w1", "Zephyr bridge: opened 1931.", url="https://example.org/zephyr")]
QUESTION = "When did the Zephyr bridge open?"
# Every registered program (programs.registry is the one list): a program registered there is under the
# fault property and in bench_faults without touching this file — except its LM-call bound below.
PROGRAMS = {name: program_class(name) for name in PROGRAM_NAMES}

# The deciding stages by engine role (the roles are mostly the trace's step names; decompose-serial's
# compose_answer has generate_answer's output fields, so the engine sees it as generate_answer): the same
# grouping as programs.failures.DECIDING_STAGES, written out here so the oracle does not reuse the code
# under test.
STAGE_OF_ROLE = {"grade_relevance": "relevance", "grade_relevance_batch": "relevance",
                 "filter_strip": "refinement",  # evaluate_retrieval: a failure routes as "ambiguous"
                 "generate_answer": "draft", "answer_directly": "draft", "judge_support": "support"}


@dataclass
class Behaviour:
    """What the healthy calls answer: relevance of the Zephyr passages, support, answerability, web,
    whether SelfRAG's answer check finds the answer stated, and its retrieve judge's verdict on a draft."""

    relevant: bool = True
    support: str = "fully"
    answerable: bool = True
    web: str = "none"  # none | passages | failing
    stated: bool = True  # check_answer
    on_draft: str = "continue"  # the retrieve judge on a low-confidence draft (answer_so_far): continue | no

    def script(self) -> dict[str, Any]:
        rel = "relevant" if self.relevant else "irrelevant"
        return {
            "retrieve_decision": lambda inp: {"decision": self.on_draft if inp.get("answer_so_far")
                                              else "yes"},
            "check_answer": {"stated": "yes" if self.stated else "no"},
            "grade_relevance": lambda inp: {"relevance": rel if "Zephyr" in inp["passage"] else "irrelevant"},
            "generate_answer": {"answer": "It opened in 1931." if self.answerable else "",
                                "citations": [1], "answerable": self.answerable},
            "answer_directly": {"answer": "In 1931."},
            "judge_support": {"support": self.support},
            "judge_usefulness": {"usefulness": 4},
            "rewrite_query": {"query": "Zephyr bridge opening year"},
            "evaluate_retrieval": lambda inp: {"score": (9 if self.relevant else 2) if "Zephyr" in inp["passage"] else 1},
            "filter_strip": {"keep": True},
            "rewrite_web_query": {"web_query": "zephyr bridge opened"},
            "next_query": {"next_query": "Zephyr bridge river Oda"},  # iterative
            "decompose_question": {"sub_questions": ["Which bridge spans the Oda?", "When did it open?"]},
            "answer_sub_question": {"sub_answer": "1931" if self.answerable else "unknown"},
        }

    def web_search(self) -> FakeWeb | None:
        if self.web == "passages":
            return FakeWeb(WEB)
        if self.web == "failing":
            return FakeWeb(error=WebSearchError("connection", "cannot reach the web"))
        return None


@dataclass
class Run:
    name: str
    config: ProgramSettings
    engine: FaultyEngine
    result: RAGResult | None = None
    raised: BaseException | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    check_prior: bool = False  # the program's thresholds take the answer check less its prior

    @property
    def calls(self) -> int:
        return len(self.engine.log)


def run_question(name: str, plan: Plan, config: ProgramSettings, behaviour: Behaviour,
                 check_prior: bool = False) -> Run:
    """Ask :data:`QUESTION` of program ``name`` under the fault ``plan``; an exception is caught and kept
    (the property tests assert there is none). ``check_prior``: thresholds compiled with the answer check less
    its prior (SelfRAG asks its prior too)."""
    lm, engine = faulty_lm(behaviour.script(), plan)
    program = PROGRAMS[name](ListRetriever(KB), web_search=behaviour.web_search(), config=config, generator_lm=lm,
                             adapter=dspy.JSONAdapter())
    if check_prior:
        program.compiled_thresholds = Thresholds(check_prior=True)
    run = Run(name, config, engine, check_prior=check_prior)
    try:
        run.result = program(question=QUESTION).result
    except Exception as exc:  # noqa: BLE001 - recorded for the assertion
        run.raised = exc
    return run


def deciding_calls_failed(log: list[tuple[str, str | None]]) -> bool:
    """The oracle: some deciding stage was called and none of its calls succeeded."""
    outcomes: dict[str, list[bool]] = {}
    for role, fault in log:
        stage = STAGE_OF_ROLE.get(role)
        if stage is not None:
            outcomes.setdefault(stage, []).append(fault is None)
    return any(not any(ok) for ok in outcomes.values())


def lm_call_bound(name: str, cfg: ProgramSettings, check_prior: bool = False) -> int:
    """The most LM calls program ``name`` may make for one question under ``cfg`` (its docstring's bound;
    no retrieval strategy is configured here, so retrieval costs no LM call). A newly registered program
    fails the property tests with a KeyError until its bound is written here."""
    if name == "iterative":
        return 2 + 3 * (cfg.max_iterations - 1)  # draft + support, then per re-query: next query, draft, support
    if name == "decompose-serial":
        return 1 + cfg.max_subquestions + 1 + 1  # decompose, one answer per sub-question, compose, support
    if name not in ("selfrag", "crag", "vanilla-rag", "no-retrieval", "graded-rag"):
        raise KeyError(f"no LM-call bound for the registered program {name!r}: add it to tests/faults/scenario.py")
    if name in ("vanilla-rag", "no-retrieval"):
        return 1
    if name == "graded-rag":
        return 4 + 2 + 2  # its own k = 4 grades, draft + check, draft + check after the web round
    if name == "crag":
        return cfg.k + cfg.max_strips * (1 + cfg.max_web_rounds) + cfg.max_web_rounds + (1 + cfg.max_regenerations) * 2
    grading_rounds = 1 + cfg.max_rewrites + cfg.max_web_rounds
    per_round = 1 + 2 * cfg.k  # a batch, then per-passage re-grades of a failed or malformed batch
    # one answer check per grading round, and with check_prior its prior (asked again only after a failed one)
    checks = grading_rounds * (2 if check_prior else 1) if cfg.answer_check else 0
    answer_rounds = 1 + cfg.max_regenerations + cfg.max_web_rounds
    per_answer = max(cfg.max_candidates, cfg.draft_passages) * 3  # draft + support + usefulness per candidate
    # "continue": the retrieve judge on the draft, then per re-query round next query, grading, draft, support
    continuation = 1 + (cfg.max_iterations - 1) * (3 + per_round) if cfg.continue_retrieval else 0
    return (1 + grading_rounds * per_round + checks + cfg.max_rewrites + answer_rounds * per_answer
            + continuation)
