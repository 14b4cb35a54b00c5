"""Typed data the programs work with: passages, the Retriever / WebSearch protocols, trace and result.

This module sits at the bottom of ``programs/``: the runtime (knowledge base, web backends, CLI) imports
it, never the reverse.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field


class Passage(BaseModel):
    """One retrieved unit of text (a knowledge-base chunk or a web result)."""

    model_config = ConfigDict(frozen=True)

    id: str
    text: str
    score: float = 0.0
    metadata: dict[str, Any] = Field(default_factory=dict)
    similarity: float | None = None
    """The query–passage cosine similarity of the dense search that found it (None when no dense search
    did: keyword-only, web, a summary node built without one). Unlike ``score``, it survives fusion."""

    @property
    def source(self) -> str:
        return str(self.metadata.get("url") or self.metadata.get("source") or "")

    @property
    def title(self) -> str:
        return str(self.metadata.get("title") or "")


@runtime_checkable
class Retriever(Protocol):
    """Anything that turns a query into ranked passages (dense, BM25, hybrid, web, a fake)."""

    def retrieve(self, query: str, k: int = 5, filters: dict[str, Any] | None = None) -> list[Passage]: ...


WebErrorKind = Literal[
    "no_key", "auth", "forbidden", "rate_limited", "bad_request", "empty", "timeout", "connection",
    "server_error", "http_error", "bad_response", "offline_error", "disabled", "budget", "crashed",
]
"""Why a web search failed. The backends raise the first ones (``offline_error``: the local offline-web
collection failed); ``disabled`` (no backend), ``budget`` (round limit reached) and ``crashed`` (a backend
raised something other than :class:`WebSearchError`) are set by :class:`programs.web_budget.WebBudget`."""

WEB_ERROR_KINDS: frozenset[str] = frozenset(WebErrorKind.__args__)  # type: ignore[attr-defined]


class WebSearchError(RuntimeError):
    """A web search that failed (no key, auth, rate limit after retries, timeout, empty)."""

    def __init__(self, kind: WebErrorKind, message: str):
        if kind not in WEB_ERROR_KINDS:
            raise ValueError(f"unknown web error kind {kind!r}; expected one of {sorted(WEB_ERROR_KINDS)}")
        super().__init__(f"{kind}: {message}")
        self.kind: WebErrorKind = kind


@runtime_checkable
class WebSearch(Protocol):
    """Web search returning the same typed passages as the retriever; metadata carries url and title.

    Implementations raise :class:`WebSearchError` on failure; the program records it and carries on.
    """

    def search(self, query: str, max_results: int = 5) -> list[Passage]: ...


class Citation(BaseModel):
    id: str
    source: str = ""
    title: str = ""
    snippet: str = ""


class TraceStep(BaseModel):
    """One decision of the program: what it looked at, what it decided, what it cost."""

    step: str
    inputs: dict[str, str] = Field(default_factory=dict)
    output: Any = None
    ok: bool = True
    error: str | None = None
    seconds: float = 0.0
    lm_calls: int = 0
    error_kind: WebErrorKind | None = None  # set on failed web steps: routing reads it, never the message
    # Cost of this step's LM calls: prompt tokens (of which ``cached_tokens`` were reused from the backend's
    # prefix/KV cache, when it says) and completion tokens.
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    # A label judgement's probability per label (read from the label tokens' log-probabilities), and
    # whether it is soft: ``soft=False`` means the backend gave no log-probabilities and the decoded
    # label got probability 1.
    probs: dict[str, float] | None = None
    soft: bool | None = None
    # When the label the text held differs from the argmax of ``probs`` (a label split over several tokens
    # whose untaken prefix moves the mass): that decoded label. ``output`` is then the argmax, the label the
    # program routes on.
    decoded: Any = None
    # A free-text output's token log-probabilities (the drafted answer's): ``mean``, ``min`` and the
    # count ``n`` over its tokens (:func:`programs.judging.text_logprob`); None without log-probabilities.
    text_logprob: dict[str, float] | None = None


class Usage(BaseModel):
    lm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # of prompt_tokens, reused from the backend's prefix cache (0 when unknown)

    def add(self, other: "Usage") -> "Usage":
        return Usage(
            lm_calls=self.lm_calls + other.lm_calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
        )


SupportLevel = Literal["fully", "partially", "no"]

AbstainReason = Literal[
    "no_relevant_passage", "low_similarity", "no_answer_in_passages", "answer_not_stated", "unsupported",
    "low_confidence", "web_failed", "retrieval_failed", "lm_error", "direct_unanswerable",
]
"""Why a program abstained (see ``programs.thresholds.ABSTAIN_REASONS`` for each)."""

LMFailureKind = Literal["unreachable", "auth", "context_overflow", "timeout", "rate_limited", "parse", "other"]
"""Why the LM calls that decide an answer failed (:func:`programs.failures.failure_kind`)."""


class RAGResult(BaseModel):
    """What a question produced (every program returns it): the answer, its evidence, the path taken and its cost."""

    question: str
    answer: str
    citations: list[Citation] = Field(default_factory=list)
    retrieved: bool = False
    abstained: bool = False
    used_web: bool = False
    supported: SupportLevel | None = None
    usefulness: int | None = None
    score: float | None = None
    abstain_reason: AbstainReason | None = None  # set exactly when ``abstained``
    confidence: float | None = None  # P(the answer is supported), from the soft judgements; None when not judged
    # Set when the LM calls that decide the answer failed (a dead or refusing backend, an overflowing
    # prompt): the result is then not an honest answer or abstention. ``error`` starts with the kind.
    error: str | None = None
    error_kind: LMFailureKind | None = None
    trace: list[TraceStep] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    seconds: float = 0.0
