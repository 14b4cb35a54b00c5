"""Bearer-token auth. The token is handed over once by the entry point (read from the environment
there); it is compared in constant time and never logged, echoed or put in an error message.

Without a token the service listens on loopback only, where a web page the user visits can still reach
it: :class:`LoopbackGuard` refuses a request naming another host (DNS rebinding) and a cross-site write."""

from __future__ import annotations

import hmac
from typing import Any
from urllib.parse import urlsplit

from fastapi import Request

from selfrag.service.errors import ServiceError, send_error
from selfrag.service.settings import is_loopback

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


class TokenRequired(ValueError):
    """Binding an address other machines can reach without a token."""


def check_bind(host: str, token: str | None, token_env: str) -> None:
    """Refuse to serve a non-loopback address without a token (raises :class:`TokenRequired`)."""
    if not token and not is_loopback(host):
        raise TokenRequired(f"refusing to bind {host} without a token: set {token_env} "
                            "(or bind 127.0.0.1)")


class BearerAuth:
    """A FastAPI dependency: with no token configured everything passes; otherwise the request needs
    ``Authorization: Bearer <token>``. A missing and a wrong token get the same 401."""

    def __init__(self, token: str | None):
        self._token = token.encode("utf-8") if token else None

    @property
    def enabled(self) -> bool:
        return self._token is not None

    def __repr__(self) -> str:  # never show the token, even in a debugger or a log of the app state
        return f"BearerAuth(enabled={self.enabled})"

    def __call__(self, request: Request) -> None:
        if self._token is None:
            return
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode("utf-8"), self._token):
            raise ServiceError("unauthorized", "missing or invalid bearer token",
                               headers={"WWW-Authenticate": "Bearer"})


def _host_name(host: str) -> str:
    """The name in a ``Host`` header (``[::1]:8080`` → ``::1``, ``localhost:8080`` → ``localhost``)."""
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


def loopback_refusal(method: str, headers: dict[bytes, bytes]) -> str | None:
    """Why a request to a loopback service without a token is refused, or None: a ``Host`` that is not a
    loopback name (a page on another site resolving its name to 127.0.0.1), or a state-changing request
    whose ``Origin`` is not loopback (a page on another site posting to it)."""
    host = headers.get(b"host", b"").decode("latin-1").strip()
    if host and not is_loopback(_host_name(host)):
        return f"Host {host[:100]!r} is not a loopback address: without a token this service answers loopback only"
    if method in SAFE_METHODS:
        return None
    origin = headers.get(b"origin", b"").decode("latin-1").strip()
    if origin and not is_loopback(urlsplit(origin).hostname or ""):
        return f"cross-site {method} from Origin {origin[:100]!r} refused: without a token only loopback pages may write"
    if headers.get(b"sec-fetch-site", b"").decode("latin-1").strip().lower() == "cross-site":
        return f"cross-site {method} refused (Sec-Fetch-Site: cross-site)"
    return None


class LoopbackGuard:
    """Pure ASGI middleware for a loopback service without a token: a :func:`loopback_refusal` is a 403."""

    def __init__(self, app: Any, metrics: Any = None):
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            why = loopback_refusal(scope["method"], dict(scope.get("headers") or []))
            if why is not None:
                if self.metrics is not None:
                    self.metrics.errors.labels(code="forbidden").inc()
                await send_error(send, "forbidden", why)
                return
        await self.app(scope, receive, send)
