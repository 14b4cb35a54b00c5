"""The bounded queue in front of the one in-process model.

An in-process model answers one call at a time, so questions run on ``workers`` threads (1 by default)
and at most ``max_queue`` more wait; a question beyond that is refused at once (503 + Retry-After),
never queued without bound. A question keeps its place until its program has really stopped, so a
cancelled question that is still finishing its current LM call is still counted.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from programs.tracing import Cancelled

log = logging.getLogger(__name__)

T = TypeVar("T")


class QueueFull(RuntimeError):
    """Every place in the queue is taken."""


@dataclass
class Job:
    """A submitted question: its future and the flag that cancels it at its next step."""

    future: Future
    cancel_event: threading.Event = field(default_factory=threading.Event)

    def cancel(self) -> None:
        self.cancel_event.set()
        self.future.cancel()  # only succeeds while it is still waiting; a running job stops at its next step

    @property
    def cancelled(self) -> bool:
        return self.cancel_event.is_set()


class ModelGate:
    def __init__(self, max_queue: int, workers: int = 1, on_change: Callable[[int], None] | None = None):
        if workers < 1 or max_queue < 0:
            raise ValueError(f"workers must be >= 1 and max_queue >= 0, got {workers} and {max_queue}")
        self.capacity = workers + max_queue
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="selfrag-model")
        self._admitted = 0
        self._lock = threading.Lock()
        self._on_change = on_change or (lambda depth: None)

    @property
    def depth(self) -> int:
        """Questions admitted and not finished (running and waiting)."""
        with self._lock:
            return self._admitted

    def submit(self, fn: Callable[[threading.Event], Any]) -> Job:
        """Run ``fn(cancel_event)`` on a model thread, in a copy of the caller's context.
        Raises :class:`QueueFull` when every place is taken."""
        with self._lock:
            if self._admitted >= self.capacity:
                raise QueueFull(f"{self._admitted} questions are already admitted (limit {self.capacity})")
            self._admitted += 1
            depth = self._admitted
        self._on_change(depth)
        job_cancel = threading.Event()
        context = contextvars.copy_context()

        def run() -> Any:
            if job_cancel.is_set():
                raise Cancelled()
            return context.run(fn, job_cancel)

        try:
            future = self._executor.submit(run)
        except RuntimeError:  # shut down
            self._release(None)
            raise
        future.add_done_callback(self._release)
        return Job(future=future, cancel_event=job_cancel)

    def _release(self, _future: Future | None) -> None:
        with self._lock:
            self._admitted -= 1
            depth = self._admitted
        self._on_change(depth)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
