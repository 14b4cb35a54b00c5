"""A per-question prompt-token budget (``program.token_budget``) and the order in which the program
gives up optional steps to stay inside it.

Required steps (the retrieve decision, grading, the first candidate and its support judgement) always
run and are charged with :meth:`TokenBudget.spend`. Before an optional step the program asks
:meth:`TokenBudget.allows`. Optional steps are dropped in this order, first to last:

1. ``extra_candidates`` — drafting (and critiquing) a candidate beyond the first;
2. ``usefulness_single`` — the usefulness judgement when there is only one candidate (it cannot
   change which candidate wins);
3. ``continuation`` — Self-RAG's ``continue``: asking the retrieve judge about a low-confidence draft
   and, when it says "continue", the answer-guided re-query rounds (not reserved for: it is taken
   only when what is left allows it, and every re-query round after the first asks again);
4. ``regeneration`` — redrafting an unsupported answer from all relevant passages;
5. ``web`` — a web search round (grading and drafting on its results).

A step that cannot come (``regeneration`` with ``max_regenerations = 0``, ``web`` without web rounds)
reserves nothing (:func:`reserved_steps`). The order is kept in two ways. A step is allowed only if its estimate fits in what is left after
reserving the declared estimates of the steps dropped after it (so early extra candidates cannot eat
the budget a later web round needs). And once a step is dropped, every step before it in the order
is dropped from then on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

OptionalStep = Literal["extra_candidates", "usefulness_single", "continuation", "regeneration", "web"]
DROP_ORDER: tuple[OptionalStep, ...] = ("extra_candidates", "usefulness_single", "continuation", "regeneration", "web")


class TokenBudget:
    """Decides, step by step, whether an optional step still fits in ``limit`` prompt tokens.

    Args:
        limit: max prompt tokens for the question; None = unlimited (every step allowed, nothing recorded).
        reserve: estimated prompt tokens of one more round of each optional step that may still come
            (e.g. no ``web`` entry when no web search is configured); missing steps reserve 0.
    """

    def __init__(self, limit: int | None, reserve: Mapping[str, int] | None = None):
        if limit is not None and limit < 0:
            raise ValueError(f"token budget must be >= 0 or None, got {limit}")
        reserve = dict(reserve or {})
        for step, tokens in reserve.items():
            _check_step(step)
            if tokens < 0:
                raise ValueError(f"reserve for {step!r} must be >= 0, got {tokens}")
        self.limit = limit
        self.reserve: dict[str, int] = reserve
        self.spent = 0
        self.dropped: list[tuple[str, str]] = []  # (step, reason), in the order they were dropped
        self._dropped_rank = -1  # highest rank dropped so far

    @property
    def remaining(self) -> int | None:
        return None if self.limit is None else self.limit - self.spent

    def spend(self, tokens: int) -> None:
        """Charge prompt tokens actually used (by any step, required or optional)."""
        if tokens < 0:
            raise ValueError(f"spent tokens must be >= 0, got {tokens}")
        self.spent += tokens

    def allows(self, step_name: str, estimated_tokens: int) -> bool:
        """Whether optional ``step_name`` may run at an estimated cost; a refusal is recorded in :attr:`dropped`."""
        rank = _check_step(step_name)
        if estimated_tokens < 0:
            raise ValueError(f"estimated tokens must be >= 0, got {estimated_tokens}")
        if self.limit is None:
            return True
        if rank <= self._dropped_rank:
            later = DROP_ORDER[self._dropped_rank]
            return self._drop(rank, step_name, f"{later!r}, later in the drop order, was already dropped")
        held = {s: self.reserve[s] for s in DROP_ORDER[rank + 1:] if self.reserve.get(s, 0) > 0}
        left = self.limit - self.spent - sum(held.values())
        if estimated_tokens <= left:
            return True
        note = f" after reserving {sum(held.values())} for {', '.join(held)}" if held else ""
        return self._drop(rank, step_name, f"needs ~{estimated_tokens} prompt tokens, {max(left, 0)} left{note} "
                                           f"(spent {self.spent} of {self.limit})")

    def _drop(self, rank: int, step: str, reason: str) -> bool:
        self.dropped.append((step, reason))
        self._dropped_rank = max(self._dropped_rank, rank)
        return False

    def summary(self) -> dict[str, object]:
        """For the trace: the limit, what was spent and what was dropped."""
        return {"limit": self.limit, "spent": self.spent,
                "dropped": [{"step": s, "reason": r} for s, r in self.dropped]}


def _check_step(step: str) -> int:
    if step not in DROP_ORDER:
        raise ValueError(f"unknown optional step {step!r}; expected one of {', '.join(DROP_ORDER)}")
    return DROP_ORDER.index(step)


def reserved_steps(estimates: Mapping[str, int], *, max_regenerations: int, web_rounds: int) -> dict[str, int]:
    """The reserve of a question: the estimates of the optional steps that can still run — none for
    ``regeneration`` when no regeneration is allowed, none for ``web`` without web rounds (no search
    configured, or ``max_web_rounds = 0``), so a step that cannot come never holds tokens back."""
    can_run = {"regeneration": max_regenerations > 0, "web": web_rounds > 0}
    return {step: tokens for step, tokens in estimates.items() if can_run.get(step, True)}
