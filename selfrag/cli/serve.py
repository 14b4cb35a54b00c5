"""``selfrag serve``: the program behind an HTTP API and a web page (one wired program per process)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from selfrag.cli.common import (CollectionOpt, ConfigOpt, ModelOpt, ProfileOpt, ThreadsOpt, err_console, fail,
                                plain, settings_from)


def serve(
    host: Annotated[Optional[str], typer.Option("--host", help="Address to bind (default 127.0.0.1). Another "
                                                "address needs a token in SELFRAG_API_TOKEN.")] = None,
    port: Annotated[Optional[int], typer.Option("--port", help="Port (default 8080).")] = None,
    profile: ProfileOpt = None,
    model: ModelOpt = None,
    strategy: Annotated[Optional[str], typer.Option("--strategy", help="A registered program: selfrag | crag | ...")]
    = None,
    collection: CollectionOpt = None,
    program: Annotated[Optional[Path], typer.Option("--program", help="Compiled artifact to load (JSON).")] = None,
    strict: Annotated[bool, typer.Option(
        "--strict", help="Refuse an artifact whose content does not match its recorded hash.")] = False,
    threads: ThreadsOpt = None,
    max_queue: Annotated[Optional[int], typer.Option("--max-queue", help="Questions that may wait for the model.")]
    = None,
    timeout: Annotated[Optional[float], typer.Option("--timeout", help="Seconds a question may take.")] = None,
    log_level: Annotated[str, typer.Option(
        "--log-level", help="uvicorn log level: critical | error | warning | info | debug | trace.")] = "warning",
    config: ConfigOpt = None,
) -> None:
    """Serve the API (/v1/...), the web page (/) and /healthz, /readyz, /metrics."""
    from pydantic import ValidationError

    from selfrag.service.auth import TokenRequired, check_bind
    from selfrag.service.settings import ServiceSettings

    settings = settings_from(config, {
        "lm": {"profile": profile, "model": model, "threads": threads},
        "program": {"strategy": strategy},
        "kb": {"collection": collection},
        "program_path": program,
    })
    flags = {"host": host, "port": port, "max_queue": max_queue, "request_timeout": timeout}
    base = settings.service
    try:
        given = {k: v for k, v in flags.items() if v is not None}
        service = ServiceSettings.model_validate({**base.model_dump(), **given})
    except ValidationError as exc:
        fail("invalid service settings: " + "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                                                      for e in exc.errors()), 2)
    if log_level.lower() not in LOG_LEVELS:
        fail(f"--log-level {log_level!r}: choose one of {', '.join(LOG_LEVELS)}", 2)
    token = os.environ.get(service.token_env) or None  # read once, here; never logged
    try:
        check_bind(service.host, token, service.token_env)
    except TokenRequired as exc:
        fail(str(exc), 2)
    taken = port_taken(service.host, service.port)
    if taken:  # said before the model loads (uvicorn would say it only after)
        fail(f"cannot listen on {service.host}:{service.port}: {taken}", 2)

    import uvicorn

    from selfrag.service.app import create_app
    from selfrag.service.runtime import build_service_runtime

    err_console.print(plain(f"loading the knowledge base and the model ({settings.lm.profile})…"))
    # user errors: SelfRAGError / ArtifactError at the boundary
    runtime = build_service_runtime(settings, service, strict=strict)
    app = create_app(runtime, service, token=token)
    auth = "bearer token required" if token else "no auth (loopback only)"
    err_console.print(plain(f"serving on http://{service.host}:{service.port} ({auth})"))
    uvicorn.run(app, host=service.host, port=service.port, log_level=log_level.lower(), access_log=False,
                timeout_graceful_shutdown=5)


LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")


def port_taken(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be listened on now (e.g. "Address already in use"), or None."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind((host, port))
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
