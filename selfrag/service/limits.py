"""Request size limits, checked before a body is read: ``Content-Length`` over the limit is refused with
413 and no byte of the body is parsed; a body without a length (chunked) is cut off at the same limit,
also with 413 ``body_too_large``."""

from __future__ import annotations

import re
from typing import Any

from starlette.exceptions import HTTPException

from selfrag.service.errors import CODES, send_error

_UPLOAD_PATH = re.compile(r"^/v1/collections/[^/]+/documents/?$")


class BodyTooLarge(HTTPException):
    """Raised while the body is read, past the limit: an HTTP error, so FastAPI's body parsing passes it on
    (any other error there becomes a 400) and it is answered as 413 ``body_too_large``."""

    def __init__(self, limit: int):
        super().__init__(status_code=CODES["body_too_large"], detail=f"request body over the limit of {limit} bytes")


class BodyLimit:
    """Pure ASGI middleware: ``uploads`` bytes for the upload route, ``default`` bytes elsewhere."""

    def __init__(self, app: Any, default: int, uploads: int, metrics: Any = None):
        self.app = app
        self.metrics = metrics
        self.default = default
        self.uploads = uploads

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.uploads if _UPLOAD_PATH.match(scope["path"]) else self.default
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None:
            try:
                too_large = int(length) > limit
            except ValueError:
                too_large = False
            if too_large:
                if self.metrics is not None:
                    self.metrics.errors.labels(code="body_too_large").inc()
                await _refuse(send, limit)
                return
        seen = 0

        async def counting_receive():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge(limit)
            return message

        await self.app(scope, counting_receive, send)


async def _refuse(send, limit: int) -> None:
    await send_error(send, "body_too_large", f"request body over the limit of {limit} bytes")
