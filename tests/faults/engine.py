"""A scripted engine that fails a chosen share (or pattern) of its calls the way real backends fail.

:class:`FaultyEngine` answers like :class:`tests.fakes.ScriptedEngine` and, for the calls its plan
picks, raises what a dead or refusing backend raises (a timeout, HTTP 429, connection refused, an
authentication error, a context overflow) or replies with what a broken model writes (garbage JSON,
an empty completion). Every call is logged as ``(role, fault or None)`` so a test can say which
judgements failed without reading the program's trace.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import dspy
from dspy._vendor.lm15 import errors as lm15
from dspy.lm15 import Message, Response, TextPart, Usage

from tests.fakes import ROLES, Reply, ScriptedEngine, _output_fields, _system_text

FAULTS = ("timeout", "rate_limited", "refused", "auth", "garbage", "empty", "overflow")

# The kind programs.failures must report for each injected fault.
EXPECTED_KIND = {"timeout": "timeout", "rate_limited": "rate_limited", "refused": "unreachable", "auth": "auth",
                 "garbage": "parse", "empty": "parse", "overflow": "context_overflow"}

# Which fault a call gets: a function of (call number, role), None = answer normally.
Plan = Callable[[int, str], "str | None"]


def every(fault: str) -> Plan:
    """A dead backend: every call fails with ``fault``."""
    return lambda n, role: fault


def pattern(faults: Sequence[str | None]) -> Plan:
    """Call ``n`` gets ``faults[n]`` (None beyond the end of the list)."""
    faults = list(faults)
    return lambda n, role: faults[n] if n < len(faults) else None


def share(fraction: float, faults: Sequence[str] = FAULTS, seed: int = 0) -> Plan:
    """Each call fails with probability ``fraction``, with a fault drawn from ``faults`` (seeded)."""
    rng = random.Random(seed)
    return lambda n, role: rng.choice(list(faults)) if rng.random() < fraction else None


def per_role(faults: dict[str, Sequence[str | None]]) -> Plan:
    """The ``i``-th call of a role gets ``faults[role][i]`` (None beyond the end, or for other roles)."""
    seen: dict[str, int] = {}

    def plan(n: int, role: str) -> str | None:
        i = seen.get(role, 0)
        seen[role] = i + 1
        mine = faults.get(role, ())
        return mine[i] if i < len(mine) else None

    return plan


def only(roles: set[str], fault: str) -> Plan:
    """Calls of ``roles`` fail with ``fault``; the others answer."""
    return lambda n, role: fault if role in roles else None


def _raise(fault: str) -> None:
    if fault == "timeout":
        raise lm15.TimeoutError("Request timed out after 120 s", provider="fault")
    if fault == "rate_limited":
        raise lm15.RateLimitError("Too Many Requests", provider="fault", status=429)
    if fault == "refused":
        raise lm15.TransportError("[Errno 111] Connection refused")
    if fault == "auth":
        raise lm15.AuthError("Incorrect API key provided", provider="fault", status=401)
    if fault == "overflow":
        raise lm15.ContextLengthError("Requested tokens (9000) exceed context window of 4096", provider="fault")
    raise AssertionError(f"unknown fault {fault!r}")


class FaultyEngine(ScriptedEngine):
    """A :class:`ScriptedEngine` whose ``plan`` decides, call by call, which fault to inject."""

    def __init__(self, script: dict[str, Reply], plan: Plan = pattern([]), **kwargs):
        super().__init__(script, **kwargs)
        self.plan = plan
        self.log: list[tuple[str, str | None]] = []

    def complete(self, request):
        role = ROLES[_output_fields(_system_text(request), request.messages[-1].text or "")]
        with self._lock:
            fault = self.plan(len(self.log), role)
            self.log.append((role, fault))
        if fault is None:
            return super().complete(request)
        if fault in ("garbage", "empty"):
            text = '}}}{{{ <html>502 Bad Gateway' if fault == "garbage" else ""
            return Response(id=None, model="faulty", message=Message.assistant([TextPart(text)]), finish_reason="stop",
                            usage=Usage(input_tokens=self.prompt_tokens, output_tokens=0,
                                        total_tokens=self.prompt_tokens))
        _raise(fault)

    def failed_roles(self) -> list[str]:
        return [role for role, fault in self.log if fault is not None]


def faulty_lm(script: dict[str, Reply], plan: Plan = pattern([]), **kwargs) -> tuple[dspy.LM, FaultyEngine]:
    """A ``dspy.LM`` over a :class:`FaultyEngine`, without dspy's retries (a retried fault would take
    seconds of backoff and hide what the program saw)."""
    engine = FaultyEngine(script, plan, **kwargs)
    return dspy.LM("scripted/faulty", engine=engine, cache=False, num_retries=0), engine
