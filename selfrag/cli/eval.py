"""``selfrag eval``: run SelfRAG and baselines on the same dev questions and write a report."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from selfrag.cli.common import ConfigOption, ModelOption, ProfileOption, console, fail, settings_from

DEFAULT_PROGRAMS = "selfrag,vanilla-rag,no-retrieval,graded-rag"


def eval_command(
    dataset: str = typer.Option("clapnq", "--dataset", help="clapnq | cmrc | PATH to a JSONL of QA records."),
    programs: str = typer.Option(DEFAULT_PROGRAMS, "--programs",
                                 help="Comma list: selfrag, compiled:PATH, vanilla-rag, no-retrieval, graded-rag, crag."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Questions (half answerable, half not)."),
    run_id: Optional[str] = typer.Option(None, "--run-id", help="Name of the run; an existing run resumes."),
    reports: Path = typer.Option(Path("reports"), "--reports", help="Folder holding reports/<run-id>/."),
    support_limit: int = typer.Option(0, "--support-examples", min=0,
                                      help="Also score each support judge on this many labelled support dev examples."),
    semantic_f1: bool = typer.Option(False, "--semantic-f1",
                                     help="Also score answers with an LM-judged semantic F1 (one call per answer)."),
    profile: Optional[str] = ProfileOption,
    model: Optional[str] = ModelOption,
    threads: Optional[int] = typer.Option(None, "--threads", help="CPU threads for the in-process model."),
    web: Optional[str] = typer.Option(None, "--web", help="Web fallback: none | tavily | offline."),
    config: Optional[Path] = ConfigOption,
) -> None:
    """Evaluate programs on dev questions: results.jsonl, summary.json, summary.md and a plot."""
    settings = settings_from(config, {"lm": {"profile": profile, "model": model, "threads": threads},
                                      "web": {"backend": web}})
    from optimize.evaluate import evaluate, parse_programs
    from programs.artifacts import ArtifactError

    try:
        names = parse_programs(programs)
    except ValueError as exc:
        fail(str(exc), 2)
    try:
        out_dir, summary = evaluate(settings, dataset, names, limit=limit, run_id=run_id, reports_dir=reports,
                                    support_limit=support_limit, semantic_f1=semantic_f1, progress=True)
    except ArtifactError as exc:
        fail(str(exc), 2)
    except (FileNotFoundError, ValueError, RuntimeError) as exc:
        fail(f"{type(exc).__name__}: {exc}")
    typer.echo((out_dir / "summary.md").read_text(encoding="utf-8"))  # plain: the table must not wrap
    errors = sum(s["errors"] for s in summary["programs"].values())
    console.print(f"reports in {out_dir}" + (f" · [yellow]{errors} question error(s)[/]" if errors else ""))


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_command)
