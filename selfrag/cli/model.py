"""``selfrag model prepare``: locate, verify and assemble the in-process model files ahead of time."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from selfrag.cli.common import ConfigOpt, console, fail, plain, settings_from

model_app = typer.Typer(no_args_is_help=True, help="The in-process (llama.cpp) model files.")


@model_app.command("prepare")
def prepare(
    profile: Annotated[str, typer.Option("--profile", help="local | tiny")] = "local",
    config: ConfigOpt = None,
) -> None:
    """Assemble and hash-check the GGUF for PROFILE once (later runs reuse the cached file)."""
    if profile not in ("local", "tiny"):
        fail(f"--profile must be 'local' or 'tiny', got {profile!r}", 2)
    settings = settings_from(config, {})
    from selfrag.lm.model_files import gguf_path

    start = time.perf_counter()
    path = gguf_path(profile, None, settings.lm.model_cache)  # a ModelFileError is a user error (exit 1)
    size = path.stat().st_size / 2**20
    console.print(plain(f"{profile}: {path} ({size:.0f} MiB, ready in {time.perf_counter() - start:.1f} s)"))


def register(app: typer.Typer) -> None:
    app.add_typer(model_app, name="model")
