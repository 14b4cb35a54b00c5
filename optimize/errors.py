"""The errors ``optimize`` raises for a bad request or bad input data (not for a bug).

The command line maps each to a one-line message and exit code 2; anything else keeps its traceback.
"""

from __future__ import annotations


class OptimizeError(ValueError):
    """A request or input the user can fix (the message says what is wrong)."""


class CompileError(OptimizeError):
    """Bad compile request (unknown judgement or optimizer, sizes out of range, no data)."""


class DataError(OptimizeError):
    """Missing or malformed labelled data: an unknown task or split, a split file not built, a bad record."""
