"""Shared CLI plumbing: the common options, settings from flags, and the one boundary for user errors.

Commands raise :class:`selfrag.errors.SelfRAGError` (or let one through) for what the user got wrong;
:class:`CommandBoundary`, the application's group class, turns it into one ``error:`` line and its exit
code. Any other exception is a bug and keeps its traceback. Nothing heavy is imported here: the
offline environment is set by the root callback before a command imports dspy or chromadb.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, Optional

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from selfrag.errors import SelfRAGError

if TYPE_CHECKING:  # pragma: no cover
    from selfrag.settings import Settings

console = Console()
err_console = Console(stderr=True)

_CONFIG_HELP = "TOML settings file (default: $SELFRAG_CONFIG, else ./selfrag.toml if present)."
_PROFILE_HELP = "LM profile: local | tiny | litellm."
_MODEL_HELP = "LiteLLM model string, or a .gguf path for local/tiny."

ConfigOpt = Annotated[Optional[Path], typer.Option("--config", "-c", help=_CONFIG_HELP)]
ProfileOpt = Annotated[Optional[str], typer.Option("--profile", help=_PROFILE_HELP)]
ModelOpt = Annotated[Optional[str], typer.Option("--model", help=_MODEL_HELP)]
ThreadsOpt = Annotated[Optional[int], typer.Option("--threads", help="CPU threads for the in-process model.")]
CollectionOpt = Annotated[Optional[str], typer.Option("--collection", help="Collection name (default: kb.collection).")]

# The same options as default values, for commands not yet written with ``Annotated`` (compile, eval).

# Errors of lower layers that mean "the user's input is unusable", with their exit codes. Looked up in
# sys.modules: an exception of a module that was never imported cannot have been raised.
_FOREIGN_USER_ERRORS = (
    ("programs.artifacts", "ArtifactError", 2),  # a compiled artifact refused
    ("selfrag.lm.model_files", "ModelFileError", 1),  # a model file missing or corrupt
)


def fail(message: str, code: int = 1) -> NoReturn:
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def settings_from(config: Path | None, overrides: dict[str, Any]) -> Settings:
    """The resolved settings for a command (flags in ``overrides``; None values are ignored).
    Raises :class:`selfrag.errors.ConfigError` for a bad file or value (the boundary prints it)."""
    from selfrag.settings import resolve

    return resolve(overrides, config_file=config)


def user_error(exc: BaseException) -> SelfRAGError | None:
    """``exc`` as a user error, or None when it is a bug."""
    if isinstance(exc, SelfRAGError):
        return exc
    for module, name, code in _FOREIGN_USER_ERRORS:
        cls = getattr(sys.modules.get(module), name, None)
        if cls is not None and isinstance(exc, cls):
            return SelfRAGError(str(exc), code)
    return None


class CommandBoundary(TyperGroup):
    """The application's command group: a user error raised by any command (or sub-command) becomes
    one ``error:`` line on stderr and its exit code."""

    def invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as exc:
            error = user_error(exc)
            if error is None:
                raise
            fail(str(error), error.exit_code)
