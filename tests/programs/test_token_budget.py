"""TokenBudget: optional steps dropped in the stated order, each drop recorded with its reason."""

import pytest

from programs.token_budget import DROP_ORDER, TokenBudget


def test_unlimited_allows_everything_and_records_nothing():
    budget = TokenBudget(None, reserve={"web": 10**9})
    budget.spend(10**6)
    assert all(budget.allows(step, 10**6) for step in DROP_ORDER)
    assert budget.dropped == [] and budget.remaining is None


def test_drop_order_is_the_stated_one():
    assert DROP_ORDER == ("extra_candidates", "usefulness_single", "continuation", "regeneration", "web")


def test_a_step_that_fits_is_allowed():
    budget = TokenBudget(1000)
    budget.spend(400)
    assert budget.allows("extra_candidates", 600)
    assert budget.dropped == []


def test_reserve_keeps_room_for_later_steps():
    # 1000 tokens, 400 spent: an extra candidate (300) fits alone, but not with web's 500 held back
    budget = TokenBudget(1000, reserve={"regeneration": 0, "web": 500})
    budget.spend(400)
    assert not budget.allows("extra_candidates", 300)
    assert budget.allows("web", 500)
    (step, reason), = budget.dropped
    assert step == "extra_candidates"
    assert "needs ~300" in reason and "100 left" in reason and "reserving 500 for web" in reason


def test_once_a_step_is_dropped_every_earlier_step_is_dropped_too():
    budget = TokenBudget(1000)
    budget.spend(900)
    assert not budget.allows("regeneration", 200)
    assert not budget.allows("extra_candidates", 10)  # would fit, but comes earlier in the order
    assert not budget.allows("usefulness_single", 10)
    assert budget.allows("web", 50)  # later in the order: still judged on its own cost
    assert [s for s, _ in budget.dropped] == ["regeneration", "extra_candidates", "usefulness_single"]
    assert "'regeneration'" in budget.dropped[1][1]


def test_tight_budget_drops_in_order_as_the_program_asks():
    budget = TokenBudget(2600, reserve={"usefulness_single": 100, "regeneration": 600, "web": 800})
    budget.spend(900)  # decision + grading + first candidate
    assert not budget.allows("extra_candidates", 500)  # 1700 left − 1500 reserved
    assert budget.allows("usefulness_single", 100)
    budget.spend(100)
    assert budget.allows("regeneration", 600)
    budget.spend(900)  # it cost more than estimated
    assert not budget.allows("web", 800)  # 700 left
    assert [s for s, _ in budget.dropped] == ["extra_candidates", "web"]
    assert budget.summary() == {"limit": 2600, "spent": 1900,
                                "dropped": [{"step": s, "reason": r} for s, r in budget.dropped]}


def test_when_not_everything_fits_the_last_step_in_the_order_is_kept():
    budget = TokenBudget(2000, reserve={"usefulness_single": 100, "regeneration": 600, "web": 800})
    budget.spend(900)  # 1100 left: usefulness + regeneration + web (1500) cannot all run
    assert not budget.allows("usefulness_single", 100)
    assert not budget.allows("regeneration", 600)
    assert budget.allows("web", 800)
    assert [s for s, _ in budget.dropped] == ["usefulness_single", "regeneration"]


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="unknown optional step"):
        TokenBudget(100).allows("rerank", 1)
    with pytest.raises(ValueError, match="unknown optional step"):
        TokenBudget(100, reserve={"webb": 1})
    with pytest.raises(ValueError):
        TokenBudget(-1)
    with pytest.raises(ValueError):
        TokenBudget(100).spend(-5)
