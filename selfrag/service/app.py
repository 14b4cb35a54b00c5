"""The FastAPI application factory: one wired program per process, passed in (tests pass a program
over the scripted LM engine), and the service settings and token from the entry point."""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from fastapi import Depends, FastAPI
from fastapi.staticfiles import StaticFiles

from selfrag.service.auth import BearerAuth, LoopbackGuard
from selfrag.service.errors import install_error_handlers
from selfrag.service.gate import ModelGate
from selfrag.service.limits import BodyLimit
from selfrag.service.metrics import Metrics, MetricsMiddleware
from selfrag.service.questions import QuestionRunner
from selfrag.service.runtime import ServiceRuntime
from selfrag.service.settings import ServiceSettings, is_loopback

log = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).with_name("static")


@dataclass
class ServiceState:
    runtime: ServiceRuntime
    settings: ServiceSettings
    runner: QuestionRunner
    metrics: Metrics
    auth: BearerAuth


def create_app(runtime: ServiceRuntime, settings: ServiceSettings | None = None, token: str | None = None,
               workers: int = 1) -> FastAPI:
    """The service around ``runtime``. ``token`` (read from the environment by the entry point, never
    here) turns on bearer auth for every route but the health checks and the static page; without one,
    on loopback, requests naming another host and cross-site writes are refused (:class:`LoopbackGuard`)."""
    from selfrag.service import routes_kb, routes_ops, routes_questions

    settings = settings or ServiceSettings()
    metrics = Metrics()
    gate = ModelGate(settings.max_queue, workers=workers, on_change=metrics.queue_depth.set)
    runner = QuestionRunner(runtime.program, runtime.collections, gate, metrics, settings.request_timeout,
                            settings.retry_after, settings.heartbeat)
    state = ServiceState(runtime=runtime, settings=settings, runner=runner, metrics=metrics, auth=BearerAuth(token))

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        gate.close()

    app = FastAPI(title="selfrag", version="1", lifespan=lifespan, docs_url=None, redoc_url=None,
                  openapi_url=None)  # the schema is served behind auth by routes_ops
    app.state.service = state
    app.state.metrics = metrics
    install_error_handlers(app)
    protected = [Depends(state.auth)]
    app.include_router(routes_ops.health)
    app.include_router(routes_ops.page)
    app.include_router(routes_ops.protected, dependencies=protected)
    app.include_router(routes_questions.router, dependencies=protected)
    app.include_router(routes_kb.router, dependencies=protected)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    app.add_middleware(BodyLimit, default=settings.max_body_bytes, uploads=settings.max_upload_request_bytes(),
                       metrics=metrics)
    if token is None and is_loopback(settings.host):  # no token: only this machine's own pages and clients
        app.add_middleware(LoopbackGuard, metrics=metrics)
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    return app
