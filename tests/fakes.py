"""Deterministic fakes shared by the tests: a scripted LM engine and an in-memory retriever/web."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from typing import Any

import dspy
from dspy.lm15 import Message, Response, TextPart, Usage, response_to_events

from programs.types import Passage, WebSearchError

# Which judgement a request is for, told by its output fields (the adapter lists them in the system prompt).
ROLES = {
    ("decision",): "retrieve_decision",
    ("passage_topic", "relevance"): "grade_relevance",
    ("support",): "judge_support",
    ("usefulness",): "judge_usefulness",
    ("query",): "rewrite_query",
    ("answer", "citations", "answerable"): "generate_answer",
    ("answer",): "answer_directly",
    ("score",): "evaluate_retrieval",
    ("keep",): "filter_strip",
    ("web_query",): "rewrite_web_query",
    # retrieval strategies (programs/retrieval_pipeline.py, programs/iterative.py) and index builders
    ("paraphrases",): "paraphrase_query",
    ("sub_questions",): "decompose_question",
    ("step_back_question",): "step_back_question",
    ("hypothetical_passage",): "hypothetical_passage",
    ("chosen",): "route_collections",
    ("filters",): "extract_filters",
    ("ranking",): "rerank",
    ("next_query",): "next_query",
    ("sub_answer",): "answer_sub_question",
    ("summary",): "summarize_texts",
    ("questions",): "hypothetical_questions",
}

# Free-text "scratch" outputs a script may leave out; the engine fills them so scripts stay about verdicts.
SCRATCH_DEFAULTS = {"passage_topic": "the passage's subject"}

Reply = dict[str, Any] | str | Callable[[dict[str, str]], "dict[str, Any] | str"]


def _system_text(request) -> str:
    if request.system is None:
        return ""
    return request.system if isinstance(request.system, str) else "".join(p.text for p in request.system)


def _output_fields(system: str) -> tuple[str, ...]:
    block = system.split("Your output fields are:", 1)[1].split("All interactions", 1)[0]
    return tuple(re.findall(r"^\d+\. `(\w+)`", block, flags=re.M))


def _inputs(user: str) -> dict[str, str]:
    user = user.split("\n\nRespond with", 1)[0]
    parts = re.split(r"\[\[ ## (\w+) ## \]\]\n", user)
    return {parts[i]: parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)}


class ScriptedEngine:
    """A dspy engine answering each judgement from a script: ``{role: reply}``.

    A reply is a dict of output fields, a raw string (e.g. unparseable text), or a callable of the
    request's inputs returning either. Every call is recorded as ``(role, inputs)``.
    """

    def __init__(self, script: dict[str, Reply], prompt_tokens: int = 10, completion_tokens: int = 5):
        self.script = script
        self.calls: list[tuple[str, dict[str, str]]] = []
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self._lock = threading.Lock()

    def complete(self, request):
        system = _system_text(request)
        user = request.messages[-1].text or ""
        role = ROLES[_output_fields(system)]
        inputs = _inputs(user)
        with self._lock:
            self.calls.append((role, inputs))
        reply = self.script.get(role)
        if reply is None:
            raise AssertionError(f"no scripted reply for {role}")
        if callable(reply):
            reply = reply(inputs)
        if isinstance(reply, dict):
            fields = _output_fields(system)
            reply = {**{k: v for k, v in SCRATCH_DEFAULTS.items() if k in fields}, **reply}
        text = reply if isinstance(reply, str) else json.dumps(reply)
        return Response(id=None, model="scripted", message=Message.assistant([TextPart(text)]), finish_reason="stop",
                        usage=Usage(input_tokens=self.prompt_tokens, output_tokens=self.completion_tokens,
                                    total_tokens=self.prompt_tokens + self.completion_tokens))

    def stream(self, request):
        return response_to_events(self.complete(request))

    def close(self) -> None:
        pass

    def roles(self) -> list[str]:
        return [role for role, _ in self.calls]

    def count(self, role: str) -> int:
        return self.roles().count(role)


def scripted_lm(script: dict[str, Reply], **kwargs) -> tuple[dspy.LM, ScriptedEngine]:
    engine = ScriptedEngine(script, **kwargs)
    return dspy.LM("scripted/test", engine=engine, cache=False), engine


class ListRetriever:
    """Returns its passages ranked by word overlap with the query; records each query."""

    def __init__(self, passages: list[Passage]):
        self.passages = passages
        self.queries: list[str] = []

    def retrieve(self, query: str, k: int = 5, filters: dict[str, Any] | None = None) -> list[Passage]:
        self.queries.append(query)
        words = set(query.lower().split())
        ranked = sorted(self.passages, key=lambda p: -len(words & set(p.text.lower().split())))
        return ranked[:k]


class FakeWeb:
    """A web search returning fixed passages, or raising a given error; counts its calls."""

    def __init__(self, passages: list[Passage] | None = None, error: WebSearchError | None = None):
        self.passages = passages or []
        self.error = error
        self.queries: list[str] = []

    def search(self, query: str, max_results: int = 5) -> list[Passage]:
        self.queries.append(query)
        if self.error is not None:
            raise self.error
        return self.passages[:max_results]


def passage(pid: str, text: str, **metadata: Any) -> Passage:
    return Passage(id=pid, text=text, score=1.0, metadata={"source": f"{pid}.md", "title": pid, **metadata})
