"""Prometheus metrics of one service process (its own registry, so apps in one process never mix).

Requests and latencies are counted by an ASGI middleware keyed by the route template (never the raw
path, so a collection name cannot blow up the label set); answers add LM calls, tokens and abstentions.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from programs.types import RAGResult

_LATENCY_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class Metrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("selfrag_requests", "HTTP requests served", ["method", "route", "status"], registry=r)
        self.latency = Histogram("selfrag_request_seconds", "HTTP request latency (streams: until the last event)",
                                 ["route"], buckets=_LATENCY_BUCKETS, registry=r)
        self.errors = Counter("selfrag_errors", "Error responses by stable code", ["code"], registry=r)
        self.questions = Counter("selfrag_questions", "Questions answered by the program", ["outcome"], registry=r)
        self.lm_calls = Counter("selfrag_lm_calls", "LM calls made by answered questions", registry=r)
        self.tokens = Counter("selfrag_tokens", "LM tokens used by answered questions", ["kind"], registry=r)
        self.abstentions = Counter("selfrag_abstentions", "Questions the program abstained on", registry=r)
        self.question_seconds = Histogram("selfrag_question_seconds", "Program run time per question",
                                          buckets=_LATENCY_BUCKETS, registry=r)
        self.queue_depth = Gauge("selfrag_queue_depth", "Questions admitted and not finished (running + waiting)",
                                 registry=r)
        self.uploads = Counter("selfrag_chunks_added", "Chunks added through uploads", registry=r)

    def answered(self, result: RAGResult) -> None:
        self.questions.labels(outcome="abstained" if result.abstained else "answered").inc()
        if result.abstained:
            self.abstentions.inc()
        self.lm_calls.inc(result.usage.lm_calls)
        self.tokens.labels(kind="prompt").inc(result.usage.prompt_tokens)
        self.tokens.labels(kind="completion").inc(result.usage.completion_tokens)
        self.question_seconds.observe(result.seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class MetricsMiddleware:
    """Pure ASGI (not BaseHTTPMiddleware, which would buffer streams and hide client disconnects)."""

    def __init__(self, app: Any, metrics: Metrics):
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = {"code": 500}

        async def counting_send(message):
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        finally:
            route = scope.get("route")
            label = getattr(route, "path", None) or (
                "static" if scope["path"].startswith("/static/") else "unmatched")
            self.metrics.requests.labels(method=scope["method"], route=label, status=str(status["code"])).inc()
            self.metrics.latency.labels(route=label).observe(time.perf_counter() - start)
