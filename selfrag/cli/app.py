"""The typer application; each command group lives in its own module and registers itself here.

The command modules import only typer and rich at module level, so the root callback can set the
offline environment (:func:`selfrag.paths.offline_environment`) before any command imports dspy,
litellm, chromadb or sentence-transformers.
"""

from __future__ import annotations

from typing import Annotated

import typer

from selfrag.cli.common import CommandBoundary, configure_logging
from selfrag.paths import offline_environment

app = typer.Typer(cls=CommandBoundary, no_args_is_help=True, add_completion=False,
                  help="Self-reflective RAG as a compiled DSPy program.")


@app.callback()
def _root(verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log at DEBUG level to stderr.")] = False) -> None:
    offline_environment()
    configure_logging(verbose)  # stderr, cleaned of terminal control characters


def _register() -> None:
    from selfrag.cli import ask, data, kb, model
    from selfrag.cli import compile as compile_cli
    from selfrag.cli import eval as eval_cli
    from selfrag.cli import serve as serve_cli

    kb.register(app)
    ask.register(app)
    model.register(app)
    compile_cli.register(app)
    eval_cli.register(app)
    data.register(app)
    serve_cli.register(app)


_register()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
