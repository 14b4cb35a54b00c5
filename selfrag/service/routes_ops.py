"""Health, readiness, metrics, the OpenAPI schema and the web page."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from selfrag.service.errors import error_body

log = logging.getLogger(__name__)

health = APIRouter()  # never behind auth: load balancers and orchestrators call these
page = APIRouter()  # static, holds no data: the page asks for the token itself when auth is on
protected = APIRouter()


def _state(request: Request):
    return request.app.state.service


@health.get("/healthz")
async def healthz() -> dict:
    """The process is up and serving HTTP."""
    return {"status": "ok"}


@health.get("/readyz")
async def readyz(request: Request) -> JSONResponse:
    """Ready to answer: the model is loaded and the store is reachable."""
    state = _state(request)
    checks = {"model": "ok" if state.runtime.model_ready else "loading", "store": "ok"}
    try:
        await run_in_threadpool(state.runtime.collections.ping)
    except Exception as exc:  # noqa: BLE001 - any store failure means not ready
        log.warning("readiness: store unreachable: %s", type(exc).__name__)
        checks["store"] = "unreachable"
    ok = all(v == "ok" for v in checks.values())
    if ok:
        return JSONResponse({"status": "ready", "checks": checks, "queue_depth": state.runner.gate.depth})
    body = error_body("not_ready", "not ready: " + ", ".join(f"{k} {v}" for k, v in checks.items() if v != "ok"))
    body["checks"] = checks
    return JSONResponse(body, status_code=503, headers={"Retry-After": str(state.settings.retry_after)})


@page.get("/", include_in_schema=False)
async def index() -> FileResponse:
    from selfrag.service.app import STATIC_DIR

    return FileResponse(STATIC_DIR / "index.html", media_type="text/html; charset=utf-8",
                        headers={"Content-Security-Policy": _CSP, "X-Content-Type-Options": "nosniff"})


# The page loads only its own script and style, and talks only to this origin.
_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


@protected.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    m = _state(request).metrics
    return Response(m.render(), media_type=m.content_type)


@protected.get("/v1/openapi.json", include_in_schema=False)
async def openapi(request: Request) -> JSONResponse:
    return JSONResponse(request.app.openapi())
