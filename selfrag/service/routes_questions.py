"""``POST /v1/ask``, ``POST /v1/ask/stream`` (server-sent events) and the OpenAI-compatible
``POST /v1/chat/completions``."""

from __future__ import annotations

import time
import uuid
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from programs.types import RAGResult
from selfrag.service.errors import ServiceError
from selfrag.service.schemas import AskRequest, ChatRequest, SelfRAGExtra
from selfrag.service.streaming import open_stream, sse

router = APIRouter(prefix="/v1")

_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def _state(request: Request):
    return request.app.state.service


def _question(text: str, limit: int) -> str:
    question = text.strip()
    if not question:
        raise ServiceError("invalid_request", "the question is empty")
    if len(question) > limit:
        raise ServiceError("question_too_long", f"the question has {len(question)} characters; the limit is {limit}")
    return question


@router.post("/ask", response_model=RAGResult)
async def ask(body: AskRequest, request: Request) -> RAGResult:
    """Answer a question: the same result as ``selfrag ask --json``."""
    state = _state(request)
    question = _question(body.question, state.settings.max_question_chars)
    return await state.runner.ask(question, body.collection, request.is_disconnected)


@router.post("/ask/stream")
async def ask_stream(body: AskRequest, request: Request) -> StreamingResponse:
    """Answer a question as server-sent events: ``started``, one ``step`` per trace step as the program
    records it, then ``result`` (or ``error``). Disconnecting cancels the question at its next step."""
    state = _state(request)
    question = _question(body.question, state.settings.max_question_chars)
    events = await open_stream(state.runner, question, body.collection)
    return StreamingResponse(events, media_type="text/event-stream", headers=_SSE_HEADERS)


def _last_user_message(body: ChatRequest, limit: int) -> str:
    for message in reversed(body.messages):
        if message.role == "user":
            return _question(message.text(), limit)
    raise ServiceError("invalid_request", "messages has no user message")


def _completion(result: RAGResult, model: str) -> dict[str, Any]:
    extra = SelfRAGExtra(citations=result.citations, abstained=result.abstained, supported=result.supported,
                         usefulness=result.usefulness, trace=result.trace, usage=result.usage, seconds=result.seconds)
    usage = result.usage
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": result.answer},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                  "total_tokens": usage.prompt_tokens + usage.completion_tokens},
        "selfrag": extra.model_dump(mode="json"),
    }


def _chunks(completion: dict[str, Any]):
    """The answer as OpenAI ``chat.completion.chunk`` events (the program does not stream tokens: one
    content chunk), ending with ``data: [DONE]``."""
    base = {"id": completion["id"], "object": "chat.completion.chunk", "created": completion["created"],
            "model": completion["model"]}
    content = completion["choices"][0]["message"]["content"]
    for delta, finish, extra in (({"role": "assistant"}, None, {}), ({"content": content}, None, {}),
                                 ({}, "stop", {"usage": completion["usage"], "selfrag": completion["selfrag"]})):
        chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
        yield sse(None, chunk)
    yield "data: [DONE]\n\n"


@router.post("/chat/completions")
async def chat_completions(body: ChatRequest, request: Request):
    """OpenAI-compatible: the last user message is the question, the answer the assistant message;
    citations, trace and the reflection verdicts are in the extra field ``selfrag``."""
    state = _state(request)
    question = _last_user_message(body, state.settings.max_question_chars)
    result = await state.runner.ask(question, body.collection, request.is_disconnected)
    completion = _completion(result, body.model or state.runtime.model_id)
    if body.stream:
        return StreamingResponse(_chunks(completion), media_type="text/event-stream", headers=_SSE_HEADERS)
    return completion
