"""Fault injection, as a property: for any pattern of failing LM calls (timeouts, 429, connection
refused, auth, garbage JSON, empty output, context overflow), on any program and bounded settings, the
program terminates within its LM-call bound, never raises, and ``result.error`` is set exactly when the
calls that decide the answer failed — with the kind of fault that failed them.

Every test is parametrized over the program registry (``tests.faults.scenario.PROGRAMS`` is
``programs.registry``), so each registered program gets its own examples and a newly registered one is
covered without editing this file."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from programs.settings import ProgramSettings
from tests.faults.engine import EXPECTED_KIND, FAULTS, every, pattern, per_role, share
from tests.faults.scenario import (PROGRAMS, STAGE_OF_ROLE, Behaviour, deciding_calls_failed, lm_call_bound,
                                   run_question)

FAULT_OR_NONE = st.one_of(st.none(), st.sampled_from(FAULTS))

configs = st.builds(
    ProgramSettings,
    k=st.integers(1, 3),
    max_rewrites=st.integers(0, 2),
    max_web_rounds=st.integers(0, 2),
    max_regenerations=st.integers(0, 2),
    max_candidates=st.integers(1, 2),
    grading=st.sampled_from(["batched", "per_passage"]),
    judge_usefulness=st.sampled_from(["always", "multiple"]),
    max_strips=st.integers(1, 4),
    max_iterations=st.integers(1, 3),
    max_subquestions=st.integers(1, 3),
    answer_check=st.booleans(),
    continue_retrieval=st.booleans(),
)
behaviours = st.builds(Behaviour, relevant=st.booleans(), support=st.sampled_from(["fully", "partially", "no"]),
                       answerable=st.booleans(), web=st.sampled_from(["none", "passages", "failing"]),
                       stated=st.booleans(), on_draft=st.sampled_from(["continue", "no"]))
EVERY_PROGRAM = pytest.mark.parametrize("name", sorted(PROGRAMS))
PROPERTY = settings(max_examples=30, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def check(run) -> None:
    assert run.raised is None, f"{run.name} raised {run.raised!r}"
    result = run.result
    unscripted = [s.step for s in result.trace if s.error and "no scripted reply" in s.error]
    assert not unscripted, f"{run.name}: give {unscripted} a healthy reply in tests/faults/scenario.py"
    assert run.calls <= lm_call_bound(run.name, run.config, run.check_prior), (run.name, run.calls, run.engine.log)
    assert result.usage.lm_calls == run.calls
    failed = deciding_calls_failed(run.engine.log)
    assert (result.error is not None) == failed, (run.name, run.engine.log, result.error)
    if failed:
        assert result.abstained and result.abstain_reason == "lm_error"
        injected = {EXPECTED_KIND[f] for _, f in run.engine.log if f is not None}
        assert result.error_kind in injected and result.error.startswith(result.error_kind + ": ")
    else:
        assert result.error_kind is None and result.abstain_reason != "lm_error"
    if result.used_web:  # web passages were used: they answered
        assert not result.abstained and result.error is None
        assert any(s.step == "web_search" and s.ok and s.output for s in result.trace)


@EVERY_PROGRAM
@PROPERTY
@given(faults=st.lists(FAULT_OR_NONE, max_size=30), config=configs,
       behaviour=behaviours, check_prior=st.booleans())
def test_any_failure_pattern_terminates_in_bound_never_raises_and_reports_exactly(name, faults, config, behaviour,
                                                                                 check_prior):
    check(run_question(name, pattern(faults), config, behaviour, check_prior))


ROLES = sorted({*STAGE_OF_ROLE, "retrieve_decision", "rewrite_query", "judge_usefulness", "rewrite_web_query",
                "evaluate_retrieval", "next_query", "decompose_question", "answer_sub_question",
                "check_answer"})


ROLE_FAULTS = st.one_of(st.sampled_from(FAULTS).map(lambda f: [f] * 12),  # every call of the role fails
                        st.lists(FAULT_OR_NONE, min_size=1, max_size=6))


@EVERY_PROGRAM
@PROPERTY
@given(config=configs, behaviour=st.one_of(st.just(Behaviour()), behaviours),
       faults=st.dictionaries(st.sampled_from(ROLES), ROLE_FAULTS, min_size=1, max_size=3), check_prior=st.booleans())
def test_failures_of_single_judgements_are_reported_exactly(name, config, behaviour, faults, check_prior):
    """Faults aimed at chosen judgements (every support call failing while the drafts work, ...)."""
    check(run_question(name, per_role(faults), config, behaviour, check_prior))


@EVERY_PROGRAM
@settings(max_examples=15, deadline=None, derandomize=True)
@given(fraction=st.floats(0.0, 1.0), seed=st.integers(0, 1000),
       behaviour=behaviours)
def test_a_share_of_failing_calls_is_handled_the_same_way(name, fraction, seed, behaviour):
    check(run_question(name, share(fraction, seed=seed), ProgramSettings(), behaviour))


@EVERY_PROGRAM
@settings(max_examples=15, deadline=None, derandomize=True)
@given(fault=st.sampled_from(FAULTS), behaviour=behaviours)
def test_a_dead_backend_is_always_an_error_of_its_kind(name, fault, behaviour):
    run = run_question(name, every(fault), ProgramSettings(), behaviour)
    check(run)
    assert run.result.error_kind == EXPECTED_KIND[fault]


def test_the_property_covers_every_registered_program():
    from programs.registry import PROGRAM_NAMES

    assert sorted(PROGRAMS) == sorted(PROGRAM_NAMES)
    for name in PROGRAM_NAMES:
        assert lm_call_bound(name, ProgramSettings()) > 0  # a new program needs its bound in scenario.py


def test_the_answer_check_and_the_continue_rounds_are_reached_and_covered_by_the_bound():
    """SelfRAG's answer check (``check_answer``) and its ``continue`` rounds are under the property: a
    healthy check saying "not stated" abstains honestly; a dead check never blocks the answer; a
    low-confidence draft with ``continue`` re-queries — all within the bound, never an error."""
    not_stated = run_question("selfrag", pattern([]), ProgramSettings(), Behaviour(stated=False))
    check(not_stated)
    assert not_stated.result.abstain_reason == "answer_not_stated"
    assert "generate_answer" not in dict(not_stated.engine.log)
    dead = per_role({"check_answer": ["timeout"] * 5})
    dead_check = run_question("selfrag", dead, ProgramSettings(), Behaviour())
    check(dead_check)
    assert not dead_check.result.abstained and dead_check.result.error is None
    with_prior = run_question("selfrag", pattern([]), ProgramSettings(), Behaviour(), check_prior=True)
    check(with_prior)  # the check and its prior: two check_answer calls, within the bound
    assert [r for r, _ in with_prior.engine.log].count("check_answer") == 2
    assert any(s.step == "check_prior" and s.ok for s in with_prior.result.trace)
    dead_prior = run_question("selfrag", per_role({"check_answer": [None, "timeout"]}), ProgramSettings(),
                              Behaviour(stated=False), check_prior=True)
    check(dead_prior)  # "not stated", but its prior failed: the check decides nothing, the answer goes on
    assert not dead_prior.result.abstained and dead_prior.result.error is None
    config = ProgramSettings(continue_retrieval=True, max_iterations=3, max_regenerations=0, max_web_rounds=0)
    continued = run_question("selfrag", pattern([]), config, Behaviour(support="no"))
    check(continued)
    assert ("next_query", None) in continued.engine.log
