"""The web loop guard: at most ``max_rounds`` web searches per question, each recorded as a TraceStep.

Make one :class:`WebBudget` per question (``WebBudget(config.max_web_rounds)``) and call
:meth:`WebBudget.try_search`; it never raises for a failing backend: a
:class:`~programs.types.WebSearchError`, a crash, a missing backend or a spent budget comes back as no
passages and a step with ``ok=False`` whose ``error_kind`` says which (routing reads that kind, never
the message).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from programs.types import Passage, TraceStep, WebErrorKind, WebSearch, WebSearchError

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
            return [], self._failed(inputs, "disabled", "disabled: no web backend configured")
        if self.exhausted:
            error = f"budget: web round limit reached ({self.rounds_used} of max {self.max_rounds} used)"
            logger.info("web search refused for %r: %s", query, error)
            return [], self._failed(inputs, "budget", error)
        self.rounds_used += 1
        start = self._clock()
        try:
            passages = web.search(query, max_results=max_results)
        except WebSearchError as exc:
            logger.warning("web search failed for %r: %s", query, exc)
            return [], self._failed(inputs, exc.kind, str(exc), self._clock() - start)
        except Exception as exc:  # noqa: BLE001 - a backend bug is recorded like any web failure
            logger.warning("web search crashed for %r: %s: %s", query, type(exc).__name__, exc)
            error = f"crashed: {type(exc).__name__}: {exc}"
            return [], self._failed(inputs, "crashed", error, self._clock() - start)
        seconds = self._clock() - start
        return passages, self._record(TraceStep(step=STEP, inputs=inputs, output=len(passages), seconds=seconds))

    def _failed(self, inputs: dict[str, str], kind: WebErrorKind, error: str, seconds: float = 0.0) -> TraceStep:
        return self._record(TraceStep(step=STEP, inputs=inputs, ok=False, error=error, error_kind=kind,
                                      seconds=seconds))

    def _record(self, step: TraceStep) -> TraceStep:
        self.steps.append(step)
        return step
