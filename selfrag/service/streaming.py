"""Server-sent events for ``POST /v1/ask/stream``.

Events, in order: ``started`` (a model thread took the question), one ``step`` per trace step as the
program records it (``{"index", "step"}``; a repeated index replaces the earlier event of that index),
then exactly one of ``result`` (the :class:`RAGResult`, as ``/v1/ask`` returns it) or ``error``
(``{"error": {"code", "message"}}``). Comment lines keep an idle connection alive. When the client goes
away the question is cancelled: the program stops at its next step.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from programs.tracing import Cancelled
from selfrag.service.errors import error_body
from selfrag.service.questions import Event, QuestionRunner

log = logging.getLogger(__name__)


def sse(event: str | None, data: dict[str, Any]) -> str:
    """One server-sent event (``event:`` omitted when None: the default ``message`` event)."""
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, ensure_ascii=False, separators=(',', ':'))}\n\n"


async def open_stream(runner: QuestionRunner, question: str, collection: str | None) -> AsyncIterator[str]:
    """Admit the question (raising ``queue_full`` / ``collection_not_found`` before any byte is sent)
    and return its event stream."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Event] = asyncio.Queue()

    def emit(event: Event) -> None:  # called on the model thread
        loop.call_soon_threadsafe(queue.put_nowait, event)

    job = await runner.start(question, collection, emit)
    return _events(runner, job, queue)


async def _events(runner: QuestionRunner, job, queue: asyncio.Queue) -> AsyncIterator[str]:
    done = asyncio.wrap_future(job.future)
    deadline = time.monotonic() + runner.timeout
    finished = False
    getter: asyncio.Future | None = None
    try:
        while not (done.done() and queue.empty()):
            getter = asyncio.ensure_future(queue.get())
            wait = max(0.0, min(runner.heartbeat, deadline - time.monotonic()))
            ready, _ = await asyncio.wait({getter, done}, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
            if getter in ready:
                name, data = getter.result()
                getter = None
                yield sse(name, data)
                continue
            getter.cancel()
            getter = None
            if done in ready:
                continue  # drain what the program emitted before it finished
            if time.monotonic() >= deadline:
                job.cancel()
                finished = True
                yield sse("error", error_body("timeout", f"the question took longer than {runner.timeout:g} s"))
                return
            yield ": keep-alive\n\n"  # writing to a closed connection ends the stream, which cancels the job
        finished = True
        yield _final_event(job)
    finally:
        if getter is not None:
            getter.cancel()
        if not finished:
            job.cancel()  # the client went away: stop the program at its next step


def _final_event(job) -> str:
    future = job.future
    exc = future.exception() if not future.cancelled() else Cancelled()
    if exc is None:
        return sse("result", future.result().model_dump(mode="json"))
    if isinstance(exc, Cancelled):
        return sse("error", error_body("timeout", "the question was cancelled"))
    log.error("question failed: %s: %s", type(exc).__name__, exc)
    return sse("error", error_body("internal", "internal error"))
