"""Running questions through the one wired program: admitted by the gate, bounded in time, cancellable,
with every trace step handed to the caller as the program records it.

A step is handed over the moment it is recorded. Some programs complete a step right after recording it
(its duration, an error, the judged passage's id); such a step is handed over again, with the same
index, once its thread records its next step or the program ends, so the last event of an index is
the step as the final trace has it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool

from programs.tracing import Cancelled, step_listener
from programs.types import RAGResult, TraceStep
from selfrag.service.errors import ServiceError
from selfrag.service.gate import Job, ModelGate, QueueFull
from selfrag.service.knowledge import Collections
from selfrag.service.metrics import Metrics

log = logging.getLogger(__name__)

Event = tuple[str, dict[str, Any]]  # (event name, JSON payload)
_POLL_SECONDS = 0.5  # how often a waiting /v1/ask checks that its client is still there


class StepRelay:
    """A step listener numbering steps and re-sending a step its program completed after recording it."""

    def __init__(self, emit: Callable[[Event], None]):
        self._emit = emit
        self._count = 0
        self._pending: dict[int, tuple[int, TraceStep, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def __call__(self, step: TraceStep) -> None:
        snapshot = step.model_dump(mode="json")
        with self._lock:
            previous = self._pending.pop(threading.get_ident(), None)
            index = self._count
            self._count += 1
            self._pending[threading.get_ident()] = (index, step, snapshot)
        if previous is not None:
            self._resend_if_changed(previous)
        self._emit(("step", {"index": index, "step": snapshot}))

    def _resend_if_changed(self, pending: tuple[int, TraceStep, dict[str, Any]]) -> None:
        index, step, snapshot = pending
        now = step.model_dump(mode="json")
        if now != snapshot:
            self._emit(("step", {"index": index, "step": now}))

    def flush(self) -> None:
        with self._lock:
            pending, self._pending = list(self._pending.values()), {}
        for item in sorted(pending, key=lambda p: p[0]):
            self._resend_if_changed(item)


class QuestionRunner:
    def __init__(self, program: Any, collections: Collections, gate: ModelGate, metrics: Metrics,
                 timeout: float, retry_after: int, heartbeat: float = 10.0):
        self.program = program
        self.collections = collections
        self.gate = gate
        self.metrics = metrics
        self.timeout = timeout
        self.retry_after = retry_after
        self.heartbeat = heartbeat

    async def start(self, question: str, collection: str | None,
                    emit: Callable[[Event], None] | None = None) -> Job:
        """Admit the question (``queue_full`` when every place is taken) and start it when a model
        thread is free. ``emit`` gets ``("started", {})`` and then every ``("step", ...)``, called
        from the model thread."""
        name = collection or self.collections.default
        # collection_not_found / index_not_found before queueing
        await run_in_threadpool(self.collections.answering_retriever, name)
        return self._submit(question, name, emit)

    def _submit(self, question: str, name: str, emit: Callable[[Event], None] | None) -> Job:
        relay = StepRelay(emit) if emit is not None else None

        def work(cancel: threading.Event) -> RAGResult:
            def listener(step: TraceStep) -> None:
                if cancel.is_set():
                    raise Cancelled()
                if relay is not None:
                    relay(step)

            if emit is not None:
                emit(("started", {}))
            self.collections.refresh(name)
            try:
                with step_listener(listener), self.collections.using(name):
                    result: RAGResult = self.program(question=question).result
            except Cancelled:
                self.metrics.questions.labels(outcome="cancelled").inc()
                log.info("question cancelled at a step boundary")
                raise
            finally:
                if relay is not None:
                    relay.flush()
            self.metrics.answered(result)
            return result

        try:
            return self.gate.submit(work)
        except QueueFull:
            raise ServiceError("queue_full", "the model is busy and the queue is full; retry later",
                               headers={"Retry-After": str(self.retry_after)}) from None

    async def ask(self, question: str, collection: str | None,
                  disconnected: Callable[[], Awaitable[bool]] | None = None) -> RAGResult:
        """The result of the question; ``timeout`` past the time limit. ``disconnected`` (the request's
        ``is_disconnected``) is polled while waiting: a client that went away cancels the question."""
        job = await self.start(question, collection)
        future = asyncio.wrap_future(job.future)
        deadline = time.monotonic() + self.timeout
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ServiceError("timeout", f"the question took longer than {self.timeout:g} s")
                done, _ = await asyncio.wait({future}, timeout=min(remaining, _POLL_SECONDS))
                if done:
                    try:
                        return future.result()
                    except Cancelled:  # cancelled by the deadline an instant before it finished
                        raise ServiceError("timeout", f"the question took longer than {self.timeout:g} s") from None
                if disconnected is not None and await disconnected():
                    raise ServiceError("client_closed", "the client closed the connection")
        finally:
            if not job.future.done():
                job.cancel()  # timeout or a client that went away: stop the program at its next step
