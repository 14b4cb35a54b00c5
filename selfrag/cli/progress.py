"""Rich progress bars for the long commands (compile, eval): draws :class:`optimize.progress.Reporter` events."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from optimize.progress import Reporter
from selfrag.cli.common import clean, plain


class RichReporter(Reporter):
    """One rich progress bar per stage. Use as a context manager: the live display starts with the
    first stage (so another display, e.g. the knowledge base's ingest bar, may run before it) and
    stops on exit."""

    def __init__(self, console: Console):
        self.console = console
        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}", markup=False), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(), console=console,
                                 transient=False)
        self.task = None
        self._started = False

    def __enter__(self) -> RichReporter:
        return self

    def __exit__(self, *exc_info) -> None:
        if self._started:
            self.progress.stop()

    def stage(self, description: str, total: int | None = None) -> None:
        self.done()
        if not self._started:
            self.progress.start()
            self._started = True
        self.task = self.progress.add_task(clean(description), total=total)  # ids, paths: untrusted text

    def describe(self, description: str) -> None:
        if self.task is not None:
            self.progress.update(self.task, description=clean(description))

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
        self.console.log(plain(message))
