"""The web loop guard: at most ``max_rounds`` web searches per question, each recorded as a TraceStep.

Make one :class:`WebBudget` per question (``WebBudget(settings.program.max_web_rounds)``) and call
:meth:`WebBudget.try_search`; it never raises for a :class:`~programs.types.WebSearchError`: a failure,
a missing backend or a spent budget comes back as no passages and a step with ``ok=False``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from programs.types import Passage, TraceStep, WebSearch, WebSearchError

logger = logging.getLogger(__name__)

STEP = "web_search"


class WebBudget:
    """Counts web rounds for one question. A failed search still spends its round; a refusal does not."""

    def __init__(self, max_rounds: int = 1, clock: Callable[[], float] = time.perf_counter):
        if max_rounds < 0:
            raise ValueError(f"max_rounds must be >= 0, got {max_rounds}")
        self.max_rounds = max_rounds
        self.rounds_used = 0
        self.steps: list[TraceStep] = []  # every attempt and refusal, in order
        self._clock = clock

    @property
    def remaining(self) -> int:
        return max(0, self.max_rounds - self.rounds_used)

    @property
    def exhausted(self) -> bool:
        return self.remaining == 0

    def try_search(
        self, web: WebSearch | None, query: str, max_results: int = 3
    ) -> tuple[list[Passage], TraceStep]:
        """Search once if a backend is configured and a round is left; record what happened."""
        inputs = {"query": query, "round": str(self.rounds_used + 1), "max_rounds": str(self.max_rounds)}
        if web is None:
            return [], self._record(TraceStep(step=STEP, inputs=inputs, ok=False, error="disabled: no web backend configured"))
        if self.exhausted:
            msg = f"budget: web round limit reached ({self.rounds_used} of max {self.max_rounds} used)"
            logger.info("web search refused for %r: %s", query, msg)
            return [], self._record(TraceStep(step=STEP, inputs=inputs, ok=False, error=msg))
        self.rounds_used += 1
        start = self._clock()
        try:
            passages = web.search(query, max_results=max_results)
        except WebSearchError as exc:
            seconds = self._clock() - start
            logger.warning("web search failed for %r: %s", query, exc)
            return [], self._record(TraceStep(step=STEP, inputs=inputs, ok=False, error=str(exc), seconds=seconds))
        seconds = self._clock() - start
        return passages, self._record(TraceStep(step=STEP, inputs=inputs, output=len(passages), seconds=seconds))

    def _record(self, step: TraceStep) -> TraceStep:
        self.steps.append(step)
        return step


def error_kind(step: TraceStep) -> str | None:
    """The failure kind of a web step (``"timeout"``, ``"budget"``, ``"disabled"``...), None if it succeeded."""
    if step.ok or not step.error:
        return None
    return step.error.split(":", 1)[0]
