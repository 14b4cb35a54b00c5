"""The step listener: steps reach listeners while the program runs; Cancelled stops the program."""

import threading

import dspy
import pytest

from programs.selfrag import SelfRAG
from programs.settings import ProgramSettings
from programs.tracing import Cancelled, Tracer, step_listener
from tests.fakes import ListRetriever, scripted_lm
from tests.programs.test_selfrag import GOOD, KB


def program(script, **cfg):
    cfg.setdefault("retrieve_rules", False)  # the retrieve judge is the first step
    cfg.setdefault("grade_pool", 2)  # two passages graded (in parallel with num_threads=2)
    lm, engine = scripted_lm(script)
    rag = SelfRAG(ListRetriever(KB), config=ProgramSettings(k=1, **cfg), generator_lm=lm, adapter=dspy.JSONAdapter())
    return rag, engine


def test_steps_reach_the_listener_in_order_while_the_program_runs():
    rag, engine = program(GOOD)
    seen: list[tuple[str, int]] = []  # (step, LM calls made so far when the step arrived)
    with step_listener(lambda step: seen.append((step.step, len(engine.calls)))):
        result = rag(question="When did the Zephyr bridge open?").result
    assert [name for name, _ in seen] == [s.step for s in result.trace]
    # each step arrives right after its own work, not replayed at the end
    assert seen[0] == ("retrieve_decision", 1)
    assert seen[1][0] == "route" and seen[1][1] == 1
    assert seen[-1][1] == len(engine.calls) and seen[2][1] < len(engine.calls)


def test_no_listener_outside_the_block():
    rag, _ = program(GOOD)
    seen = []
    with step_listener(seen.append):
        pass
    rag(question="When did the Zephyr bridge open?")
    assert seen == []


def test_cancelled_stops_the_program_at_the_next_step():
    rag, engine = program(GOOD)
    names = []

    def stop_after_retrieve(step):
        names.append(step.step)
        if step.step == "retrieve":
            raise Cancelled()

    with step_listener(stop_after_retrieve), pytest.raises(Cancelled):
        rag(question="When did the Zephyr bridge open?")
    assert names == ["retrieve_decision", "route", "retrieve"]
    assert engine.roles() == ["retrieve_decision"]  # no grading, drafting or critique after the cancel


def test_cancelled_inside_a_judgement_is_not_turned_into_a_failed_step():
    # Tracer.call records every Exception of a judgement as a failed step and carries on; Cancelled
    # (raised here from inside the LM call, through DSPy's adapter and predictor) must get through.
    def cancel(_inputs):
        raise Cancelled()

    rag, engine = program(dict(GOOD, generate_answer=cancel))
    with pytest.raises(Cancelled):
        rag(question="When did the Zephyr bridge open?")
    assert engine.roles()[-1] == "generate_answer"
    assert "judge_support" not in engine.roles()


def test_listeners_follow_parallel_worker_threads_and_cancel_from_them():
    rag, engine = program(GOOD, num_threads=2, grading="per_passage")
    threads = set()
    lock = threading.Lock()

    def listener(step):
        with lock:
            threads.add(threading.get_ident())

    with step_listener(listener):
        result = rag(question="When did the Zephyr bridge open?").result
    assert len(threads) >= 2  # grading ran in pool threads and still reached the listener
    assert not result.abstained

    rag, engine = program(GOOD, num_threads=2, grading="per_passage")

    def cancel_on_grade(step):
        if step.step == "grade_relevance":
            raise Cancelled()

    with step_listener(cancel_on_grade), pytest.raises(Cancelled):
        rag(question="When did the Zephyr bridge open?")
    assert "generate_answer" not in engine.roles()


def test_nested_listeners_all_see_the_step_and_the_tracer_keeps_it():
    tracer = Tracer()
    a, b = [], []
    with step_listener(a.append), step_listener(b.append):
        tracer.note("route", "generate", mode="always")
    assert [s.step for s in a] == [s.step for s in b] == ["route"]
    assert [s.step for s in tracer.steps] == ["route"]
