"""``selfrag serve``: the program behind an HTTP API and a web page (one wired program per process)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

from selfrag.cli.common import ConfigOption, ModelOption, ProfileOption, err_console, fail, settings_from


def serve(
    host: Optional[str] = typer.Option(None, "--host", help="Address to bind (default 127.0.0.1). Another "
                                       "address needs a token in SELFRAG_API_TOKEN."),
    port: Optional[int] = typer.Option(None, "--port", help="Port (default 8080)."),
    profile: Optional[str] = ProfileOption,
    model: Optional[str] = ModelOption,
    strategy: Optional[str] = typer.Option(None, "--strategy", help="selfrag | crag (corrective retrieval)."),
    collection: Optional[str] = typer.Option(None, "--collection", help="Default knowledge-base collection."),
    program: Optional[Path] = typer.Option(None, "--program", help="Compiled artifact to load (JSON)."),
    threads: Optional[int] = typer.Option(None, "--threads", help="CPU threads for the in-process model."),
    max_queue: Optional[int] = typer.Option(None, "--max-queue", help="Questions that may wait for the model."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Seconds a question may take."),
    log_level: str = typer.Option("warning", "--log-level", help="uvicorn log level."),
    config: Optional[Path] = ConfigOption,
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
    base = getattr(settings, "service", None) or ServiceSettings()  # [service] once Settings embeds it
    try:
        given = {k: v for k, v in flags.items() if v is not None}
        service = ServiceSettings.model_validate({**base.model_dump(), **given})
    except ValidationError as exc:
        fail("invalid service settings: " + "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                                                      for e in exc.errors()), 2)
    token = os.environ.get(service.token_env) or None  # read once, here; never logged
    try:
        check_bind(service.host, token, service.token_env)
    except TokenRequired as exc:
        fail(str(exc), 2)

    import uvicorn

    from programs.artifacts import ArtifactError
    from selfrag.service.app import create_app
    from selfrag.service.runtime import build_service_runtime

    err_console.print(f"loading the knowledge base and the model ({settings.lm.profile})…")
    try:
        runtime = build_service_runtime(settings, service)
    except ArtifactError as exc:
        fail(str(exc), 2)
    except (FileNotFoundError, RuntimeError, ValueError) as exc:
        fail(f"{type(exc).__name__}: {exc}")
    app = create_app(runtime, service, token=token)
    auth = "bearer token required" if token else "no auth (loopback only)"
    err_console.print(f"serving on http://{service.host}:{service.port} ({auth})")
    uvicorn.run(app, host=service.host, port=service.port, log_level=log_level, access_log=False,
                timeout_graceful_shutdown=5)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
