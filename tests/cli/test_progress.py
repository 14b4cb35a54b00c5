"""The progress bars of compile and eval (selfrag/cli/progress.py): what they show is untrusted text."""

import io

from rich.console import Console

from selfrag.cli.progress import RichReporter


def test_descriptions_and_log_lines_are_shown_as_text():
    """An eval record's id or a compiled:PATH label in the bar (issue 15, 1): not markup, no escapes."""
    console = Console(file=io.StringIO(), force_terminal=True, width=120)
    with RichReporter(console) as reporter:
        reporter.stage("eval [bold]", total=2)
        reporter.describe("selfrag · [/b]\x1b]0;title\x07q1")
        reporter.advance()
        reporter.log("resuming [/b] \x1b[31m")
    out = console.file.getvalue()
    assert "[/b]q1" in out and "resuming [/b]" in out and "eval [bold]" in out
    assert "\x1b]0;" not in out and "\x1b[31m" not in out
