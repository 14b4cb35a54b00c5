"""The typer application; each command group lives in its own module and registers itself here."""

from __future__ import annotations

import logging
import os

import typer

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Self-reflective RAG as a compiled DSPy program.")


@app.callback()
def _root(verbose: bool = typer.Option(False, "--verbose", "-v", help="Log at DEBUG level to stderr.")) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")


def _register() -> None:
    from selfrag.cli import ask, kb, model
    from selfrag.cli import compile as compile_cli
    from selfrag.cli import eval as eval_cli

    kb.register(app)
    ask.register(app)
    model.register(app)
    compile_cli.register(app)
    eval_cli.register(app)
    from selfrag.cli import serve as serve_cli
    serve_cli.register(app)


_register()


def main() -> None:
    app()
if __name__ == "__main__":
    main()
