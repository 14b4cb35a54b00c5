"""selfrag: Self-reflective Retrieval-Augmented Generation as a compiled DSPy program.

The runtime around the program lives here: settings, paths and the environment, LM backends, the
knowledge base, web search backends, the composition root (``wiring``) and the CLI. The program
itself is in ``programs/``, its declarations in ``signatures/`` and its optimisation in ``optimize/``.

``from selfrag import load_compiled`` gives a ready program from a compiled artifact; it is imported
on first use, so ``import selfrag`` stays cheap.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["load_compiled"]


def __getattr__(name: str) -> Any:
    if name == "load_compiled":
        from selfrag.wiring import load_compiled

        return load_compiled
    raise AttributeError(f"module 'selfrag' has no attribute {name!r}")
