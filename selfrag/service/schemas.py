"""Request and response bodies. Answers are :class:`programs.types.RAGResult`, as ``ask --json`` prints."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from programs.types import Citation, Passage, TraceStep, Usage


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AskRequest(_Body):
    question: str = Field(min_length=1)
    collection: str | None = None  # default: kb.collection


class SearchRequest(_Body):
    query: str = Field(min_length=1)
    collection: str | None = None
    k: int | None = Field(None, ge=1)  # default: retrieval.k; at most the service's max_top_k
    mode: Literal["dense", "bm25", "hybrid"] | None = None
    filters: dict[str, Any] | None = None  # a metadata filter, as ``selfrag search --where``


class SearchResponse(BaseModel):
    collection: str
    mode: str
    index: str = "none"  # retrieval.index: the index searched (none: the chunks)
    passages: list[Passage]


class CollectionInfo(BaseModel):
    name: str
    chunks: int


class CollectionsResponse(BaseModel):
    default: str
    collections: list[CollectionInfo]


class DeleteResponse(BaseModel):
    collection: str
    source: str
    chunks_removed: int


# -- OpenAI-compatible chat completions -------------------------------------------------------------

class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")  # clients send name, tool_calls, ...

    role: str
    content: str | list[dict[str, Any]] | None = None

    def text(self) -> str:
        if isinstance(self.content, list):  # content parts: keep the text ones
            return "".join(str(p.get("text", "")) for p in self.content if p.get("type") == "text")
        return self.content or ""


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="allow")  # temperature, max_tokens, ... are accepted and ignored

    model: str | None = None
    messages: list[ChatMessage] = Field(min_length=1, max_length=200)
    stream: bool = False
    collection: str | None = None  # an extension: which collection to answer from


class SelfRAGExtra(BaseModel):
    """The reflection behind a chat answer (an extra field, ignored by plain chat clients)."""

    citations: list[Citation]
    abstained: bool
    supported: str | None
    usefulness: int | None
    trace: list[TraceStep]
    usage: Usage
    seconds: float
