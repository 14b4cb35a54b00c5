"""WebBudget: bounded, recorded web rounds that never raise; every failed step carries its typed kind."""

from __future__ import annotations

import pytest

from programs.types import Passage, TraceStep, WebSearchError
from programs.web_budget import WebBudget
from selfrag.web.static import StaticWebSearch


class Clock:
    def __init__(self, step: float = 0.25):
        self.t, self.step = 0.0, step

    def __call__(self) -> float:
        self.t += self.step
        return self.t


class Failing:
    def __init__(self, kind: str):
        self.kind, self.calls = kind, 0

    def search(self, query: str, max_results: int = 5) -> list[Passage]:
        self.calls += 1
        raise WebSearchError(self.kind, f"simulated {self.kind}")


WEB = StaticWebSearch([Passage(id="p", text="Denver won Super Bowl 50.")])


def test_budget_one_refuses_the_second_round_and_records_it():
    budget = WebBudget(max_rounds=1, clock=Clock())

    passages, step = budget.try_search(WEB, "Super Bowl 50 winner", max_results=2)
    assert [p.id for p in passages] == ["p"]
    assert isinstance(step, TraceStep)
    assert step.step == "web_search" and step.ok and step.error is None
    assert step.inputs["query"] == "Super Bowl 50 winner" and step.inputs["round"] == "1"
    assert step.output == 1 and step.seconds == pytest.approx(0.25)
    assert budget.rounds_used == 1 and budget.exhausted

    again, refused = budget.try_search(WEB, "another query")
    assert again == [] and not refused.ok and refused.output is None
    assert refused.error.startswith("budget:") and "max 1" in refused.error
    assert refused.error_kind == "budget"
    assert WEB.calls == ["Super Bowl 50 winner"]  # the refused round never reached the backend
    assert budget.steps == [step, refused] and budget.rounds_used == 1


def test_failure_is_recorded_not_raised_and_spends_the_round():
    web = Failing("timeout")
    budget = WebBudget(max_rounds=2, clock=Clock())
    passages, step = budget.try_search(web, "q")
    assert passages == [] and not step.ok and step.output is None
    assert step.error == "timeout: simulated timeout" and step.error_kind == "timeout"
    assert step.seconds == pytest.approx(0.25)
    assert budget.remaining == 1
    budget.try_search(web, "q2")
    _, refused = budget.try_search(web, "q3")
    assert web.calls == 2 and refused.error_kind == "budget"


def test_no_backend_is_recorded_without_spending():
    budget = WebBudget()
    passages, step = budget.try_search(None, "q")
    assert passages == [] and step.error_kind == "disabled"
    assert budget.rounds_used == 0 and budget.remaining == 1


def test_zero_budget_refuses_at_once():
    web = Failing("empty")
    _, step = WebBudget(max_rounds=0).try_search(web, "q")
    assert step.error_kind == "budget" and web.calls == 0


def test_a_crashing_backend_is_recorded_as_crashed_and_spends_the_round():
    class Broken:
        def search(self, query, max_results=5):
            raise KeyError("bug")

    budget = WebBudget(clock=Clock())
    passages, step = budget.try_search(Broken(), "q")
    assert passages == [] and not step.ok and step.error_kind == "crashed"
    assert step.error == "crashed: KeyError: 'bug'" and step.seconds == pytest.approx(0.25)
    assert budget.rounds_used == 1


def test_the_kind_comes_from_the_error_not_its_message():
    error = WebSearchError("empty", "nothing found")
    error.args = ("rate_limited: a message that looks like another kind",)

    class Raising:
        def search(self, query, max_results=5):
            raise error

    _, step = WebBudget().try_search(Raising(), "q")
    assert step.error_kind == "empty" and step.error.startswith("rate_limited")


def test_a_successful_step_has_no_kind():
    _, step = WebBudget().try_search(WEB, "Super Bowl 50")
    assert step.ok and step.error_kind is None


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown web error kind"):
        WebSearchError("teapot", "418")


def test_negative_budget_is_rejected():
    with pytest.raises(ValueError, match="max_rounds"):
        WebBudget(-1)
