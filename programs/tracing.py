"""The typed trace: every decision the program takes is recorded with its inputs, output, time and cost."""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import dspy
from dspy.utils.callback import BaseCallback
from dspy.utils.usage_tracker import track_usage

from programs.types import TraceStep, Usage

logger = logging.getLogger(__name__)

_BRIEF = 120

StepListener = Callable[[TraceStep], None]
_listeners: contextvars.ContextVar[tuple[StepListener, ...]] = contextvars.ContextVar(
    "selfrag_step_listeners", default=())


class Cancelled(BaseException):
    """Raised by a step listener to stop the program at its next recorded step.

    A ``BaseException`` so the ``except Exception`` that turns LM failures into recorded steps lets it
    through: it propagates out of ``program(question=...)``."""


@contextlib.contextmanager
def step_listener(fn: StepListener) -> Iterator[None]:
    """Call ``fn(step)`` for every :class:`TraceStep` recorded while the block runs, as it is recorded.

    Listeners live in a context variable, so they follow worker threads that run in a copy of the
    caller's context (as :func:`programs.base.parallel_map` does) and never leak to other requests.
    ``fn`` may raise :class:`Cancelled` to stop the program."""
    token = _listeners.set(_listeners.get() + (fn,))
    try:
        yield
    finally:
        _listeners.reset(token)


def brief(value: Any, limit: int = _BRIEF) -> str:
    text = value if isinstance(value, str) else repr(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _CallCounter(BaseCallback):
    def __init__(self) -> None:
        self.calls = 0

    def on_lm_start(self, call_id, instance, inputs):  # noqa: D401 - dspy callback
        self.calls += 1


class Tracer:
    """Collects :class:`TraceStep` records and LM usage for one question. Thread-safe."""

    def __init__(self) -> None:
        self.steps: list[TraceStep] = []
        self.usage = Usage()
        self._lock = threading.Lock()

    def record(self, step: TraceStep, usage: Usage | None = None) -> TraceStep:
        with self._lock:
            self.steps.append(step)
            if usage is not None:
                self.usage = self.usage.add(usage)
        for listener in _listeners.get():  # outside the lock: a listener may block or raise Cancelled
            listener(step)
        return step

    def note(self, step: str, output: Any = None, **inputs: Any) -> TraceStep:
        """Record a decision taken without an LM (retrieval, routing, abstention)."""
        return self.record(TraceStep(step=step, inputs={k: brief(v) for k, v in inputs.items()}, output=output))

    def call(self, step: str, predictor: Callable[..., dspy.Prediction], output_field: str,
             config: dict[str, Any] | None = None, **inputs: Any) -> tuple[dspy.Prediction | None, TraceStep]:
        """Run one judgement. A parse failure, timeout or any LM error becomes a recorded failed
        step (``ok=False``) and ``None`` is returned: the caller decides the fallback route."""
        counter = _CallCounter()
        callbacks = list(dspy.settings.get("callbacks") or []) + [counter]
        start = time.perf_counter()
        pred, error = None, None
        with dspy.context(callbacks=callbacks), track_usage() as tracker:
            try:
                pred = predictor(**inputs, config=config) if config else predictor(**inputs)
            except Exception as exc:  # noqa: BLE001 - every LM failure is a recorded decision
                error = f"{type(exc).__name__}: {brief(str(exc), 300)}"
                logger.warning("step %s failed: %s", step, error)
        usage = _usage_from(tracker, counter.calls)
        record = TraceStep(
            step=step,
            inputs={k: brief(v) for k, v in inputs.items()},
            output=None if pred is None else _jsonable(getattr(pred, output_field, None)),
            ok=pred is not None,
            error=error,
            seconds=round(time.perf_counter() - start, 4),
            lm_calls=counter.calls,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cached_tokens=usage.cached_tokens,
        )
        self.record(record, usage)
        return pred, record


def _usage_from(tracker, calls: int) -> Usage:
    """Tokens of the calls a tracker saw; ``cached_tokens`` from OpenAI-style ``prompt_tokens_details``
    (the llama.cpp engine reports its prefix-cache reuse there; 0 when a backend does not say)."""
    prompt = completion = cached = 0
    for entry in tracker.get_total_tokens().values():
        prompt += int(entry.get("prompt_tokens") or 0)
        completion += int(entry.get("completion_tokens") or 0)
        details = entry.get("prompt_tokens_details")
        if isinstance(details, dict):
            cached += int(details.get("cached_tokens") or 0)
    return Usage(lm_calls=calls, prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached)


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return str(value)
