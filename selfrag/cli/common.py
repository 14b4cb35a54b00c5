"""Shared CLI plumbing: the common options, settings from flags, and the one boundary for user errors.

Commands raise :class:`selfrag.errors.SelfRAGError` (or let one through) for what the user got wrong;
:class:`CommandBoundary`, the application's group class, turns it into one ``error:`` line and its exit
code. Any other exception is a bug and keeps its traceback. Nothing heavy is imported here: the
offline environment is set by the root callback before a command imports dspy or chromadb.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text
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
IndexOpt = Annotated[Optional[str], typer.Option(
    "--index", help="Retrieve over an index built by ingest --index: none | multi-representation | raptor "
                    "(default: retrieval.index).")]

# The same options as default values, for commands not yet written with ``Annotated`` (compile, eval).

# Errors of lower layers that mean "the user's input is unusable", with their exit codes. Looked up in
# sys.modules: an exception of a module that was never imported cannot have been raised.
_FOREIGN_USER_ERRORS = (
    ("programs.artifacts", "ArtifactError", 2),  # a compiled artifact refused
    ("selfrag.lm.model_files", "ModelFileError", 1),  # a model file missing or corrupt
)


# ANSI escape sequences (CSI, OSC, two-byte ESC forms), then any other C0/C1 control character except tab and
# newline, and the Unicode bidi overrides that reorder what a terminal shows.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def decoded(text: str) -> str:
    """A command-line argument as valid Unicode: bytes that were not UTF-8 (which Python keeps as lone
    surrogates) become U+FFFD, so they cannot break a prompt, a store or a JSON reply later."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        try:
            return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        except UnicodeEncodeError:
            return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def clean(value: object) -> str:
    """``value`` as text that is safe to show in a terminal: escape sequences and control characters
    removed (tab and newline kept), and undecodable file-name bytes (surrogates) shown as U+FFFD."""
    return _CONTROL.sub("", _ANSI.sub("", decoded(str(value))))


def plain(value: object, style: str = "") -> Text:
    """Untrusted text (a document, title, source, question, answer, path, collection name) as a rich
    :class:`Text`: never interpreted as markup, cleaned of control characters (:func:`clean`)."""
    return Text(clean(value), style=style)


def fail(message: str, code: int = 1) -> NoReturn:
    err_console.print(f"[bold red]error:[/] {escape(' '.join(clean(message).splitlines()))}", highlight=False,
                      soft_wrap=True)
    raise typer.Exit(code)


class _CleanFormatter(logging.Formatter):
    """Log lines (which quote file names, questions, documents) without terminal control characters."""

    def format(self, record: logging.LogRecord) -> str:
        return clean(super().format(record))


def configure_logging(verbose: bool = False) -> None:
    """Log to stderr (never stdout: ``--json`` output stays parseable), WARNING or DEBUG, cleaned (:func:`clean`)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_CleanFormatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, handlers=[handler])


def quiet_libraries() -> None:
    """No library progress bar (sentence-transformers' "Loading weights", tqdm): for ``-q``."""
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    os.environ["TQDM_DISABLE"] = "1"
    logging_module = sys.modules.get("transformers.utils.logging")
    if logging_module is not None:
        logging_module.disable_progress_bar()


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Inside, whatever would reach stdout — a print, a library's log line, a C library writing to
    file descriptor 1 — goes to stderr, so that stdout carries only the command's result (``--json``)."""
    sys.stdout.flush()
    saved = None
    try:
        if sys.stdout.fileno() == 1:
            saved = os.dup(1)
            os.dup2(sys.stderr.fileno(), 1)
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        saved = None
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stderr.flush()
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)


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
