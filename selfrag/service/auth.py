"""Bearer-token auth. The token is handed over once by the entry point (read from the environment
there); it is compared in constant time and never logged, echoed or put in an error message."""

from __future__ import annotations

import hmac

from fastapi import Request

from selfrag.service.errors import ServiceError
from selfrag.service.settings import is_loopback


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
