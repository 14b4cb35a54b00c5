"""The runtime's one base error: what a user did wrong (bad input, bad settings, missing file).

Commands catch :class:`SelfRAGError` at their boundary (:func:`selfrag.cli.common.user_errors`) and
print its message on one line with its ``exit_code``; anything else is a bug and keeps its traceback.
The subclasses also derive from the built-in error they refine, so library callers catching
``ValueError`` / ``FileNotFoundError`` keep working.
"""

from __future__ import annotations


class SelfRAGError(Exception):
    """A user-facing error: one line, a non-zero exit code (2 = bad input or settings)."""

    exit_code: int = 1

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class ConfigError(SelfRAGError, ValueError):
    """Settings that cannot be used: a malformed TOML file, an unknown key, a value out of range."""

    exit_code = 2


class InputError(SelfRAGError, ValueError):
    """A bad argument: an invalid collection name, an unusable filter, a collection built differently."""

    exit_code = 2


class MissingPathError(SelfRAGError, FileNotFoundError):
    """A file or folder the user named does not exist."""

    exit_code = 2
