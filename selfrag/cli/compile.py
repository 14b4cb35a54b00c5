"""``selfrag compile``: compile the judgements (and optionally the whole program) into an artifact."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from selfrag.cli.common import ConfigOption, ModelOption, ProfileOption, console, fail, settings_from

OPTIMIZERS = ("bootstrap", "random-search", "mipro", "gepa")


def compile_cmd(
    optimizer: str = typer.Option("bootstrap", "--optimizer", "-o",
                                  help="bootstrap | random-search | mipro | gepa."),
    judgement: str = typer.Option("all", "--judgement", "-j",
                                  help="retrieve | relevance | support | usefulness | all (comma list allowed)."),
    train: int = typer.Option(50, "--train", help="Training examples per judgement."),
    dev: int = typer.Option(40, "--dev", help="Dev examples per judgement, scored before and after (0 = skip)."),
    budget: Optional[int] = typer.Option(
        None, "--budget",
        help="Optimizer budget: bootstrap max demos (4), random-search candidate programs (4), "
             "mipro trials (auto=light), gepa max metric calls (auto=light)."),
    e2e: bool = typer.Option(False, "--e2e", help="Also compile the whole program end to end on qa_en (slow)."),
    e2e_train: Optional[int] = typer.Option(None, "--e2e-train", help="qa_en training questions (default min(train, 20))."),
    e2e_dev: Optional[int] = typer.Option(None, "--e2e-dev", help="qa_en dev questions (default min(dev, 10))."),
    name: Optional[str] = typer.Option(None, "--name", help="Artifact name: OUT_DIR/NAME.json (default compiled-OPTIMIZER)."),
    out_dir: Optional[Path] = typer.Option(None, "--out-dir", help="Where to write the artifact (default artifacts/)."),
    profile: Optional[str] = ProfileOption,
    model: Optional[str] = ModelOption,
    threads: Optional[int] = typer.Option(None, "--threads", help="CPU threads for the in-process model."),
    parallel: int = typer.Option(1, "--parallel", help="Examples scored in parallel (1 for an in-process model)."),
    config: Optional[Path] = ConfigOption,
) -> None:
    """Compile SelfRAG's judgements on their labelled sets and write a compiled artifact with its manifest."""
    if optimizer not in OPTIMIZERS:
        fail(f"--optimizer must be one of {', '.join(OPTIMIZERS)}, got {optimizer!r}", 2)
    if train < 1:
        fail(f"--train must be >= 1, got {train}", 2)
    if dev < 0:
        fail(f"--dev must be >= 0, got {dev}", 2)
    if budget is not None and budget < 1:
        fail(f"--budget must be >= 1, got {budget}", 2)
    if parallel < 1:
        fail(f"--parallel must be >= 1, got {parallel}", 2)
    from optimize.compile import CompileError, parse_judgements

    try:
        judgements = [] if judgement.strip().lower() == "none" and e2e else parse_judgements(judgement)
    except CompileError as exc:
        fail(str(exc), 2)
    settings = settings_from(config, {"lm": {"profile": profile, "model": model, "threads": threads}})

    from optimize.compile import compile_program

    try:
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=console, transient=False) as progress:
            result = compile_program(
                settings, optimizer=optimizer, judgements=judgements or "none", train=train, dev=dev, budget=budget,
                e2e=e2e, e2e_train=e2e_train, e2e_dev=e2e_dev, name=name, out_dir=out_dir, num_threads=parallel,
                reporter=RichReporter(progress),
            )
    except CompileError as exc:
        fail(str(exc), 2)
    except (FileNotFoundError, RuntimeError, ValueError) as exc:
        fail(f"{type(exc).__name__}: {exc}")

    render(result.manifest)
    console.print(f"Wrote {result.artifact} and {result.manifest_path}")


class RichReporter:
    """Draws :class:`optimize.compile.Reporter` events as rich progress bars."""

    def __init__(self, progress: Progress):
        self.progress = progress
        self.task = None

    def stage(self, description: str, total: int | None = None) -> None:
        self.done()
        self.task = self.progress.add_task(description, total=total)

    def advance(self, n: int = 1) -> None:
        task = self._current()
        if task is not None:
            if task.total is not None and task.completed + n > task.total:  # optimizers may call the metric more
                self.progress.update(task.id, total=task.completed + n)
            self.progress.advance(task.id, n)

    def done(self) -> None:
        task = self._current()
        if task is not None:
            self.progress.update(task.id, total=task.completed)
            self.task = None

    def _current(self):
        return next((t for t in self.progress.tasks if t.id == self.task), None) if self.task is not None else None

    def log(self, message: str) -> None:
        self.progress.console.log(message)


def render(manifest: dict) -> None:
    from optimize.compile import summary_rows

    table = Table(title=f"Dev scores — {manifest['optimizer']['name']}")
    for col in ("stage", "metric", "train/dev", "before", "after", "Δ", "demos"):
        table.add_column(col, justify="right" if col in ("before", "after", "Δ", "demos") else "left")
    for row in summary_rows(manifest):
        table.add_row(*row)
    console.print(table)
    c = manifest["cost"]
    console.print(f"{c['lm_calls']} LM calls · {c['prompt_tokens']} prompt + {c['completion_tokens']} completion "
                  f"tokens · {c['seconds']:.1f} s")


def register(app: typer.Typer) -> None:
    app.command("compile")(compile_cmd)
