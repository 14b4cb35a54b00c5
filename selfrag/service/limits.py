"""Request size limits, checked before a body is read: ``Content-Length`` over the limit is refused with
413 and no byte of the body is parsed; a body without a length is cut off at the same limit."""

from __future__ import annotations

import json
import re
from typing import Any

from selfrag.service.errors import CODES, error_body

_UPLOAD_PATH = re.compile(r"^/v1/collections/[^/]+/documents/?$")


class BodyTooLarge(Exception):
    pass


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
                    raise BodyTooLarge(f"request body over {limit} bytes")
            return message

        await self.app(scope, counting_receive, send)


async def _refuse(send, limit: int) -> None:
    body = json.dumps(error_body("body_too_large", f"request body over the limit of {limit} bytes")).encode()
    await send({"type": "http.response.start", "status": CODES["body_too_large"],
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})
