"""``selfrag ask``: answer one question with its citations and a readable trace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from selfrag.cli.common import (CollectionOpt, ConfigOpt, ModelOpt, ProfileOpt, ThreadsOpt, console, err_console, fail,
                                settings_from)

if TYPE_CHECKING:  # pragma: no cover
    from programs.types import RAGResult


def ask(
    question: Annotated[str, typer.Argument(help="The question to answer.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the full result (answer, citations, trace) as JSON.")] = False,
    program: Annotated[Optional[Path], typer.Option("--program", help="Compiled artifact to load (JSON).")] = None,
    profile: ProfileOpt = None,
    model: ModelOpt = None,
    strategy: Annotated[Optional[str], typer.Option("--strategy", help="selfrag | crag (corrective retrieval).")] = None,
    mode: Annotated[Optional[str], typer.Option("--retrieve", help="Retrieval decision: adaptive | always | never.")] = None,
    web: Annotated[Optional[str], typer.Option("--web", help="Web fallback: none | tavily | offline.")] = None,
    collection: CollectionOpt = None,
    threads: ThreadsOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Answer QUESTION from the knowledge base (the bundled demo corpus when it is empty)."""
    if not question.strip():
        fail("the question is empty", 2)
    settings = settings_from(config, {
        "lm": {"profile": profile, "model": model, "threads": threads},
        "program": {"retrieve_mode": mode, "strategy": strategy},
        "web": {"backend": web},
        "kb": {"collection": collection},
        "program_path": program,
    })
    from selfrag.wiring import build_runtime

    with console.status("Loading knowledge base and model…", spinner="dots") as status:
        runtime = build_runtime(settings, progress=False)
        if runtime.ingested_demo:
            err_console.print(f"Knowledge base was empty: ingested the demo corpus ({runtime.kb.count()} chunks).")
        status.update("Thinking: retrieve, grade, draft, critique…")
        result: RAGResult = runtime.answer(question)

    if as_json:
        typer.echo(json.dumps(result.model_dump(mode="json"), ensure_ascii=False, indent=2))
        return
    render(result)


def _flags(result: RAGResult) -> Text:
    flags = Text()

    def add(text: str, style: str = "") -> None:
        if flags:
            flags.append(" · ")
        flags.append(text, style=style)

    if result.abstained:
        add(f"abstained: {result.abstain_reason or 'no answer'}", "yellow")
    if result.used_web:
        add("web", "cyan")
    if result.supported == "no":
        add("not supported by its sources", "red")
    elif result.supported:
        add(f"support: {result.supported}")
    if result.confidence is not None:
        add(f"confidence: {result.confidence:.2f}")
    if result.usefulness is not None:
        add(f"usefulness: {result.usefulness}/5")
    return flags


def render(result: RAGResult) -> None:
    """The answer, its citations and the trace. Every value is shown as plain text (documents, answers
    and sources may contain rich markup such as ``[/b]``: it is never interpreted)."""
    from programs.thresholds import ABSTAIN_REASONS

    flags = _flags(result)
    console.print(Panel(Text(result.answer), title="Answer", subtitle=flags if flags else None, expand=False))
    if result.abstained and result.abstain_reason:
        console.print(Text(ABSTAIN_REASONS.get(result.abstain_reason, ""), style="dim"))
    if result.citations:
        table = Table(title="Citations", show_lines=False)
        for col in ("#", "source", "snippet"):
            table.add_column(col)
        for i, c in enumerate(result.citations, 1):
            table.add_row(str(i), Text(c.source or c.id), Text(c.snippet[:100] + ("…" if len(c.snippet) > 100 else "")))
        console.print(table)
    trace = Table(title="Trace")
    for col in ("step", "inputs", "output", "P", "ok", "s", "LM", "tokens"):
        trace.add_column(col, overflow="fold", no_wrap=col == "step")
    for s in result.trace:
        inputs = ", ".join(f"{k}={v[:40]}" for k, v in s.inputs.items())
        out = s.error if not s.ok else json.dumps(s.output, ensure_ascii=False)[:60]
        probs = "" if not s.probs else " ".join(f"{k}:{v:.2f}" for k, v in s.probs.items() if v >= 0.005)
        probs += "" if s.soft is not False else " (hard)"
        tokens = f"{s.prompt_tokens}+{s.completion_tokens}" if s.lm_calls else ""
        trace.add_row(Text(s.step), Text(inputs[:70]), Text(out or ""), Text(probs), "✓" if s.ok else "✗",
                      f"{s.seconds:.2f}", str(s.lm_calls), tokens)
    console.print(trace)
    u = result.usage
    cached = f" ({u.cached_tokens} from cache)" if u.cached_tokens else ""
    console.print(Text(f"{u.lm_calls} LM calls · {u.prompt_tokens} prompt{cached} + {u.completion_tokens} completion "
                       f"tokens · {result.seconds:.1f} s"))


def register(app: typer.Typer) -> None:
    app.command("ask")(ask)
