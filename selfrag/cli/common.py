"""Shared CLI plumbing: settings resolution from flags and clear exits on bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NoReturn

import typer
from pydantic import ValidationError
from rich.console import Console

from selfrag.settings import Settings, resolve

console = Console()
err_console = Console(stderr=True)

ConfigOption = typer.Option(None, "--config", "-c", help="TOML settings file (default: ./selfrag.toml if present).")
ProfileOption = typer.Option(None, "--profile", help="LM profile: local | tiny | litellm.")
ModelOption = typer.Option(None, "--model", help="LiteLLM model string, or a .gguf path for local/tiny.")


def fail(message: str, code: int = 1) -> NoReturn:
    err_console.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code)


def settings_from(config: Path | None, overrides: dict[str, Any]) -> Settings:
    try:
        return resolve(overrides, config_file=config)
    except FileNotFoundError as exc:
        fail(str(exc), 2)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        fail(f"invalid settings: {problems}", 2)
