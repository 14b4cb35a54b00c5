"""Every error the service answers is a JSON body ``{"error": {"code", "message"}}`` with a stable code.

Codes are part of the API: clients branch on them, never on the message.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from selfrag.errors import InputError
from selfrag.kb.store import EmbedderMismatch

log = logging.getLogger(__name__)

# code -> HTTP status
CODES: dict[str, int] = {
    "invalid_request": 422,
    "question_too_long": 422,
    "top_k_too_large": 422,
    "unauthorized": 401,
    "forbidden": 403,  # a loopback service without a token refuses another Host, or a cross-site write
    "not_found": 404,
    "collection_not_found": 404,
    "index_not_found": 404,  # retrieval.index names an index the collection lacks (selfrag ingest --index)
    "source_not_found": 404,
    "chunk_not_found": 404,
    "method_not_allowed": 405,
    "body_too_large": 413,
    "upload_too_large": 413,
    "too_many_files": 413,
    "embedder_mismatch": 409,  # the collection was embedded with another embedder than kb.embedding_model
    "unsupported_file_type": 415,
    "nothing_ingested": 422,
    "queue_full": 503,
    "not_ready": 503,
    "timeout": 504,
    "client_closed": 499,  # nginx's convention; nobody reads it but the logs and the metrics
    "internal": 500,
}


class ServiceError(Exception):
    """An error answered as JSON with ``code`` (a key of :data:`CODES`) and its HTTP status."""

    def __init__(self, code: str, message: str, headers: dict[str, str] | None = None):
        if code not in CODES:
            raise ValueError(f"unknown service error code {code!r}")
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = CODES[code]
        self.headers = headers or {}


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, **extra}}


def error_response(code: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(code, message), status_code=CODES[code], headers=headers)


async def send_error(send: Any, code: str, message: str) -> None:
    """Answer an ASGI request with the error body from a pure ASGI middleware (before any route runs)."""
    body = json.dumps(error_body(code, message)).encode()
    await send({"type": "http.response.start", "status": CODES[code],
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


def _validation_message(exc: RequestValidationError) -> str:
    # field locations and pydantic's messages only: the submitted values are never echoed back
    parts = []
    for err in exc.errors()[:5]:
        loc = ".".join(str(x) for x in err.get("loc", ()) if x != "body") or "body"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


def _count(request: Request, code: str) -> None:
    metrics = getattr(request.app.state, "metrics", None)
    if metrics is not None:
        metrics.errors.labels(code=code).inc()


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ServiceError)
    async def _service_error(request: Request, exc: ServiceError) -> JSONResponse:
        _count(request, exc.code)
        return error_response(exc.code, exc.message, exc.headers)

    @app.exception_handler(InputError)
    async def _input_error(request: Request, exc: InputError) -> JSONResponse:
        """A bad argument found below the routes (a source to remove, a filter, a collection built with
        another embedder): its one-line message, as a 4xx."""
        code = "embedder_mismatch" if isinstance(exc, EmbedderMismatch) else "invalid_request"
        _count(request, code)
        return error_response(code, str(exc))

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        _count(request, "invalid_request")
        return error_response("invalid_request", _validation_message(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed", 401: "unauthorized", 413: "body_too_large"}.get(
            exc.status_code, "invalid_request")
        _count(request, code)
        message = {"not_found": "no such route", "method_not_allowed": "method not allowed",
                   "unauthorized": "missing or invalid bearer token",
                   "body_too_large": "request body too large"}.get(code, "invalid request")
        return JSONResponse(error_body(code, message), status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        _count(request, "internal")
        return error_response("internal", "internal error")
