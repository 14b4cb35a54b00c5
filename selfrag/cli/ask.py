"""``selfrag ask``: answer one question with its citations and a readable trace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.panel import Panel
from rich.table import Table

from selfrag.cli.common import CollectionOpt, ConfigOpt, ModelOpt, ProfileOpt, ThreadsOpt, console, fail, settings_from

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
            console.log(f"Knowledge base was empty: ingested the demo corpus ({runtime.kb.count()} chunks).")
        status.update("Thinking: retrieve, grade, draft, critique…")
        result: RAGResult = runtime.program(question=question).result

    if as_json:
        typer.echo(json.dumps(result.model_dump(mode="json"), ensure_ascii=False, indent=2))
        return
    render(result)


def render(result: RAGResult) -> None:
    flags = []
    if result.abstained:
        flags.append("[yellow]abstained[/]")
    if result.used_web:
        flags.append("[cyan]web[/]")
    if result.supported == "no":
        flags.append("[red]not supported by its sources[/]")
    elif result.supported:
        flags.append(f"support: {result.supported}")
    if result.usefulness is not None:
        flags.append(f"usefulness: {result.usefulness}/5")
    console.print(Panel(result.answer, title="Answer", subtitle=" · ".join(flags) or None, expand=False))
    if result.citations:
        table = Table(title="Citations", show_lines=False)
        for col in ("#", "source", "snippet"):
            table.add_column(col)
        for i, c in enumerate(result.citations, 1):
            table.add_row(str(i), c.source or c.id, c.snippet[:100] + ("…" if len(c.snippet) > 100 else ""))
        console.print(table)
    trace = Table(title="Trace")
    for col in ("step", "inputs", "output", "ok", "s", "LM"):
        trace.add_column(col, overflow="fold")
    for s in result.trace:
        inputs = ", ".join(f"{k}={v[:40]}" for k, v in s.inputs.items())
        out = s.error if not s.ok else json.dumps(s.output, ensure_ascii=False)[:60]
        trace.add_row(s.step, inputs[:70], out, "✓" if s.ok else "✗", f"{s.seconds:.2f}", str(s.lm_calls))
    console.print(trace)
    u = result.usage
    console.print(f"{u.lm_calls} LM calls · {u.prompt_tokens} prompt + {u.completion_tokens} completion tokens · "
                  f"{result.seconds:.1f} s")


def register(app: typer.Typer) -> None:
    app.command("ask")(ask)
