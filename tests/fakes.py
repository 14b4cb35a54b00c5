"""Deterministic fakes shared by the tests: a scripted LM engine and an in-memory retriever/web."""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Callable
from typing import Any

import dspy
from dspy.lm15 import Message, Response, TextPart, Usage, response_to_events
from dspy._vendor.lm15.types import TokenLogprob, TopLogprob

from programs.types import Passage, WebSearchError

# Which judgement a request is for, told by its output fields (the adapter lists them in the system prompt).
ROLES = {
    ("decision",): "retrieve_decision",
    ("passage_topic", "relevance"): "grade_relevance",
    ("verdicts",): "grade_relevance_batch",
    ("support",): "judge_support",
    ("stated",): "check_answer",
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


COMPACT_OUTPUTS = "Reply with a JSON object with the fields:"


def _output_fields(system: str, user: str = "") -> tuple[str, ...]:
    """The requested output fields: JSONAdapter/ChatAdapter list them in the system message, the
    compact adapter at the end of the user message."""
    if "Your output fields are:" in system:
        block = system.split("Your output fields are:", 1)[1].split("All interactions", 1)[0]
        return tuple(re.findall(r"^\d+\. `(\w+)`", block, flags=re.M))
    block = user.rsplit(COMPACT_OUTPUTS, 1)[1]
    return tuple(re.findall(r"^`(\w+)`:", block, flags=re.M))


def _inputs(user: str) -> dict[str, str]:
    user = re.split(r"\n\n(?:Respond with|Task: )", user, maxsplit=1)[0]
    parts = re.split(r"\[\[ ## (\w+) ## \]\]\n", user)
    return {parts[i]: parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)}


def _batch_from_single(reply: Reply, inputs: dict[str, str]) -> dict[str, Any]:
    """A batched relevance reply built from a per-passage ``grade_relevance`` script entry: each
    ``[n] …`` line of the passages is judged as if it were graded alone."""
    verdicts = []
    for line in inputs.get("passages", "").splitlines():
        m = re.match(r"\[(\d+)\] ", line)
        if not m:
            continue
        one = reply({"passage": "[1] " + line[m.end():], "question": inputs.get("question", "")}) \
            if callable(reply) else reply
        verdicts.append({"number": int(m.group(1)), "topic": "the passage's subject",
                         "relevance": one["relevance"] if isinstance(one, dict) else one})
    return {"verdicts": verdicts}


def label_logprobs(text: str, probs: dict[str, Any]) -> tuple[TokenLogprob, ...]:
    """Token log-probabilities for ``text`` (a JSON reply) in which every ``"field": value`` whose
    field is in ``probs`` is one token carrying the other labels as alternatives with the given
    probabilities; all other text is certain (logprob 0). A list of distributions gives the field's
    n-th occurrence the n-th one (the verdicts of a batch)."""
    tokens: list[TokenLogprob] = []
    pos = 0
    seen: dict[str, int] = {}
    pattern = re.compile(r'"(%s)":\s*' % "|".join(map(re.escape, probs)))
    for m in pattern.finditer(text):
        dist = probs[m.group(1)]
        if isinstance(dist, list):
            n = seen[m.group(1)] = seen.get(m.group(1), -1) + 1
            if n >= len(dist):
                continue
            dist = dist[n]
        value_start = m.end()
        decoded = json.loads(re.match(r'"[^"]*"|-?\d+|true|false', text[value_start:]).group(0))
        if decoded not in dist:
            continue
        piece = json.dumps(decoded)
        head = piece[:-1] if piece.startswith('"') else piece  # '"fully' (the closing quote follows) or '5'
        if value_start > pos:
            tokens.append(TokenLogprob(token=text[pos:value_start], logprob=0.0))
        alts = tuple(TopLogprob(token=(json.dumps(label)[:-1] if isinstance(label, str) else json.dumps(label)),
                                logprob=math.log(max(p, 1e-9))) for label, p in dist.items())
        tokens.append(TokenLogprob(token=head, logprob=math.log(max(dist[decoded], 1e-9)), top=alts))
        pos = value_start + len(head)
    if pos < len(text):
        tokens.append(TokenLogprob(token=text[pos:], logprob=0.0))
    return tuple(tokens)


class ScriptedEngine:
    """A dspy engine answering each judgement from a script: ``{role: reply}``.

    A reply is a dict of output fields, a raw string (e.g. unparseable text), or a callable of the
    request's inputs returning either. Every call is recorded as ``(role, inputs)``.
    """

    def __init__(self, script: dict[str, Reply], prompt_tokens: int = 10, completion_tokens: int = 5,
                 probs: dict[str, Any] | None = None):
        """``probs``: role → ``{field: {label: p}}`` (or a callable of the inputs returning it): the
        reply then carries token log-probabilities giving those label probabilities (a soft judgement)."""
        self.script = script
        self.probs = probs or {}
        self.calls: list[tuple[str, dict[str, str]]] = []
        self.temperatures: list[tuple[str, float | None]] = []  # (role, the request's temperature)
        self.response_formats: list[tuple[str, Any]] = []  # (role, the request's response_format)
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self._lock = threading.Lock()

    def complete(self, request):
        system = _system_text(request)
        user = request.messages[-1].text or ""
        fields = _output_fields(system, user)
        role = ROLES[fields]
        inputs = _inputs(user)
        with self._lock:
            self.calls.append((role, inputs))
            self.temperatures.append((role, getattr(getattr(request, "config", None), "temperature", None)))
            self.response_formats.append((role, getattr(getattr(request, "config", None), "response_format", None)))
        reply = self.script.get(role)
        if reply is None and role == "grade_relevance_batch" and "grade_relevance" in self.script:
            reply = _batch_from_single(self.script["grade_relevance"], inputs)
        if reply is None:
            raise AssertionError(f"no scripted reply for {role}")
        if callable(reply):
            reply = reply(inputs)
        if isinstance(reply, dict):
            reply = {**{k: v for k, v in SCRATCH_DEFAULTS.items() if k in fields}, **reply}
        text = reply if isinstance(reply, str) else json.dumps(reply)
        probs = self.probs.get(role)
        if callable(probs):
            probs = probs(inputs)
        logprobs = label_logprobs(text, probs) if probs and isinstance(reply, dict) else None
        return Response(id=None, model="scripted", message=Message.assistant([TextPart(text)]), finish_reason="stop",
                        usage=Usage(input_tokens=self.prompt_tokens, output_tokens=self.completion_tokens,
                                    total_tokens=self.prompt_tokens + self.completion_tokens),
                        logprobs=logprobs)

    def stream(self, request):
        return response_to_events(self.complete(request))

    def close(self) -> None:
        pass

    def roles(self) -> list[str]:
        return [role for role, _ in self.calls]

    def count(self, role: str) -> int:
        return self.roles().count(role)


def scripted_lm(script: dict[str, Reply], **kwargs) -> tuple[dspy.LM, ScriptedEngine]:
    """A ``dspy.LM`` over a :class:`ScriptedEngine`; with ``probs=...`` it asks for log-probabilities
    (as the real backends are built), so judgements come out soft."""
    engine = ScriptedEngine(script, **kwargs)
    extra = {"logprobs": True, "top_logprobs": 5} if kwargs.get("probs") else {}
    return dspy.LM("scripted/test", engine=engine, cache=False, **extra), engine


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
