"""The service's own settings: where it listens, where its token comes from, and its limits.

A plain pydantic model, embedded in the runtime's :class:`selfrag.settings.Settings` as its ``[service]``
section (TOML, ``SELFRAG_SERVICE__*``); ``selfrag serve``'s flags override it.
"""

from __future__ import annotations

import ipaddress

from pydantic import BaseModel, ConfigDict, Field


class ServiceSettings(BaseModel):
    """``selfrag serve``: address, auth and the bound of everything a request can ask for."""

    model_config = ConfigDict(extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(8080, ge=1, le=65535)
    token_env: str = "SELFRAG_API_TOKEN"  # the environment variable holding the bearer token
    max_question_chars: int = Field(2000, ge=1, le=100_000)
    max_top_k: int = Field(20, ge=1, le=100)
    max_upload_bytes: int = Field(10 * 1024 * 1024, ge=1)  # per file
    max_upload_files: int = Field(10, ge=1, le=1000)
    upload_suffixes: tuple[str, ...] = Field(default_factory=lambda: _ingest_suffixes())  # default: what ingest takes
    max_body_bytes: int = Field(1024 * 1024, ge=1024)  # JSON request bodies
    max_queue: int = Field(8, ge=0, le=10_000)  # requests waiting for the model beyond the one running
    request_timeout: float = Field(300.0, gt=0)  # seconds a question may take, queue wait included
    retry_after: int = Field(5, ge=1)  # seconds, sent with 503 when the queue is full
    heartbeat: float = Field(10.0, gt=0)  # seconds between SSE keep-alive comments
    demo_corpus: bool = True  # ingest the demo corpus into an empty default collection at start-up

    def max_upload_request_bytes(self) -> int:
        return self.max_upload_bytes * self.max_upload_files + 64 * 1024


def _ingest_suffixes() -> tuple[str, ...]:
    from selfrag.kb.loaders import SUPPORTED_SUFFIXES  # imported late: settings stay import-light

    return tuple(sorted(SUPPORTED_SUFFIXES))


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
