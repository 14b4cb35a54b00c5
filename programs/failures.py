"""A dead backend versus an honest abstention: did the LM calls that decide the answer fail, and why.

A program that cannot reach its LM still finishes (every judgement becomes a failed trace step with a
safe fallback), and the fallback route usually ends in an abstention that reads like "the sources do
not say". :func:`deciding_failure` reads the trace and tells the two apart: the answer was decided by
failed LM calls when some *deciding stage* the program reached has no successful step at all —

- ``relevance``: the relevance grades (batched or per passage), which decide whether anything is answered;
- ``retrieval_evaluation`` and ``refinement``: CRAG's evaluator and strip filter, the same role;
- ``draft``: the answer drafts (or the direct answer without retrieval, or decompose-serial's composed answer);
- ``support``: the support judgements, which decide whether a draft is given.

A stage where some calls failed and others succeeded is a partial failure: the trace records it and
the result stands. Steps that only steer (the retrieve decision, a query rewrite, usefulness) fall back
safely and never make the result an error. :func:`failure_kind` classifies one failed step's error
text — ``unreachable``, ``auth``, ``context_overflow``, ``timeout``, ``rate_limited``, ``parse`` or
``other`` — from the exception type and message the tracer recorded (``"TypeName: message"``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

from programs.types import AbstainReason, LMFailureKind, TraceStep

DECIDING_STAGES: dict[str, frozenset[str]] = {
    "relevance": frozenset({"grade_relevance", "grade_relevance_batch"}),
    # CRAG's retrieval evaluator is not deciding: a failed evaluation routes as "ambiguous" (unknown evidence
    # is not evidence of irrelevance, programs.routing.crag_action) and the refinement still decides.
    "refinement": frozenset({"filter_strip"}),
    "draft": frozenset({"generate_answer", "answer_directly", "compose_answer"}),  # compose: decompose-serial
    "support": frozenset({"judge_support"}),
}

# (kind, pattern on "TypeName: message"), first match wins: the type names of dspy / lm15 / LiteLLM /
# httpx errors, then the words their messages use.
_RULES: tuple[tuple[LMFailureKind, re.Pattern[str]], ...] = tuple((kind, re.compile(pattern, re.IGNORECASE)) for kind, pattern in (
    ("context_overflow", r"ContextWindowExceeded|ContextLength|context (window|length)|maximum context|"
                         r"too many tokens|exceeds? (the )?(model'?s? )?(context|n_ctx)"),
    ("auth", r"^(\w*Auth\w*|PermissionDenied\w*|\w*BillingError)\b|\b401\b|\b403\b|invalid api key|"
             r"incorrect api key|api key (is )?(missing|invalid|not (set|valid))|unauthori[sz]ed"),
    ("rate_limited", r"^\w*RateLimit\w*|\b429\b|rate.?limit|too many requests|quota"),
    ("timeout", r"^\w*Timeout\w*|^ReadTimeout|timed? ?out|deadline exceeded"),
    ("unreachable", r"^(\w*Transport\w*|\w*Connect\w*|ServiceUnavailable\w*|APIConnection\w*)\b|"
                    r"connection (refused|reset|error|aborted)|name or service not known|"
                    r"failed to establish|no route to host|unreachable|nodename nor servname|getaddrinfo"),
    ("parse", r"^(AdapterParseError|JSONDecodeError|ValidationError)\b|failed to parse|empty or null response"),
))


def failure_kind(error: str | None) -> LMFailureKind:
    """The kind of one failed LM step, from its recorded ``"TypeName: message"`` text."""
    text = (error or "").strip()
    for kind, pattern in _RULES:
        if pattern.search(text):
            return kind
    return "other"


_DESCRIPTIONS: dict[str, str] = {
    "unreachable": "the LM backend is unreachable",
    "auth": "the LM backend refused the credentials",
    "context_overflow": "the prompt overflows the model's context",
    "timeout": "the LM calls timed out",
    "rate_limited": "the LM backend is rate-limiting",
    "parse": "the LM replies could not be parsed",
    "other": "the LM calls failed",
}


class DecidingFailure(NamedTuple):
    kind: LMFailureKind
    stage: str
    failed: int  # failed steps of the deciding stages that failed entirely
    first_error: str

    def message(self) -> str:
        """One line for the user, starting with the kind:
        ``"timeout: the LM calls timed out (every relevance call failed: 8); first error: …"``."""
        error = " ".join(self.first_error.split(" To fix:")[0].split())
        error = error if len(error) <= 160 else error[:159] + "…"
        return (f"{self.kind}: {_DESCRIPTIONS[self.kind]} (every {self.stage} call failed: {self.failed}); "
                f"first error: {error}")


def failed_stages(steps: Sequence[TraceStep]) -> list[str]:
    """The deciding stages (in :data:`DECIDING_STAGES` order) that were reached and had no successful step."""
    out = []
    for stage, names in DECIDING_STAGES.items():
        mine = [s for s in steps if s.step in names]
        if mine and not any(s.ok for s in mine):
            out.append(stage)
    return out


def deciding_failure(steps: Sequence[TraceStep]) -> DecidingFailure | None:
    """Why the answer was decided by failed LM calls, or None when it was not (see the module docstring).
    The kind is the most common kind among the failed deciding steps (ties: the earliest)."""
    stages = failed_stages(steps)
    if not stages:
        return None
    names = frozenset().union(*(DECIDING_STAGES[s] for s in stages))
    failed = [s for s in steps if s.step in names and not s.ok]
    kinds = Counter(failure_kind(s.error) for s in failed)
    best = max(kinds.values())
    kind = next(failure_kind(s.error) for s in failed if kinds[failure_kind(s.error)] == best)
    return DecidingFailure(kind=kind, stage=" and ".join(stages), failed=len(failed),
                           first_error=failed[0].error or "unknown error")


def web_passages_used(steps: Sequence[TraceStep]) -> bool:
    """Whether some web search of the trace succeeded with at least one passage."""
    return any(s.step == "web_search" and s.ok and isinstance(s.output, int) and s.output > 0 for s in steps)


def nothing_found_reason(steps: Sequence[TraceStep], retrieval_failed: bool) -> AbstainReason:
    """Why a program found no passage to draft from: every relevance grade failed (``lm_error``), the web
    it searched failed on every round (``web_failed``; ``retrieval_failed`` when the knowledge base had
    failed too — a round the web budget refused, or no web configured, is no search), the knowledge base
    could not be searched (``retrieval_failed``), else nothing passed the relevance judgement
    (``no_relevant_passage``)."""
    grades = [s for s in steps if s.step in DECIDING_STAGES["relevance"]]
    if grades and not any(s.ok for s in grades):
        return "lm_error"
    searched = [s for s in steps if s.step == "web_search" and s.error_kind not in ("budget", "disabled")]
    if searched and not any(s.ok for s in searched):
        return "retrieval_failed" if retrieval_failed else "web_failed"
    if retrieval_failed:
        return "retrieval_failed"
    return "no_relevant_passage"
