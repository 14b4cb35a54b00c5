"""``selfrag eval``: run SelfRAG and baselines on the same dev questions and write a report.

The composition root of an evaluation: settings → LMs, web search, a knowledge-base factory, the
retriever (``wiring.build_retriever``: the chunks, or the index in ``retrieval.index``) and a strategy
program's components (``wiring.strategy_components``, as ``selfrag ask`` builds it) through
:mod:`selfrag.wiring`, folders from :mod:`selfrag.paths`, the program list through
:mod:`programs.registry`, handed to :func:`optimize.evaluate.evaluate`.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated, Optional

import typer

from selfrag import paths
from selfrag.cli.common import (ConfigOpt, IndexOpt, ModelOpt, ProfileOpt, ThreadsOpt, clean, console,
                                err_console, fail, plain, quiet_libraries, settings_from)
from selfrag.errors import SelfRAGError

DEFAULT_PROGRAMS = "selfrag,vanilla-rag,no-retrieval,graded-rag"


def eval_command(
    dataset: Annotated[str, typer.Option(
        "--dataset", help="clapnq | cmrc | a QA file (JSONL) | a derived data folder (its dev questions).")]
    = "clapnq",
    programs: Annotated[str, typer.Option(
        "--programs", help="Comma list: selfrag, compiled:PATH, crag, vanilla-rag, no-retrieval, graded-rag, "
                           "iterative, decompose-serial (every program in programs.registry).")]
    = DEFAULT_PROGRAMS,
    limit: Annotated[Optional[int], typer.Option("--limit", min=1, help="Questions (half answerable, half not).")]
    = None,
    run_id: Annotated[Optional[str], typer.Option("--run-id", help="Name of the run; an existing run resumes.")]
    = None,
    reports: Annotated[Path, typer.Option("--reports", help="Folder holding reports/<run-id>/.")] = Path("reports"),
    support_limit: Annotated[int, typer.Option(
        "--support-examples", min=0,
        help="Also score each support judge on this many labelled support dev examples.")] = 0,
    semantic_f1: Annotated[bool, typer.Option(
        "--semantic-f1", help="Also score answers with an LM-judged semantic F1 (one call per answer).")] = False,
    profile: ProfileOpt = None,
    model: ModelOpt = None,
    threads: ThreadsOpt = None,
    web: Annotated[Optional[str], typer.Option("--web", help="Web fallback: none | tavily | offline.")] = None,
    index: IndexOpt = None,
    strict: Annotated[bool, typer.Option(
        "--strict", help="Refuse a compiled artifact whose content does not match its recorded hash.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
    collection: Annotated[Optional[str], typer.Option(
        "--collection", help="Answer from this collection (default for a derived folder: the one it was "
                             "derived from); gold documents matched by doc id or source.")] = None,
    config: ConfigOpt = None,
) -> None:
    """Evaluate programs on dev questions: results.jsonl, summary.json, summary.md and a plot."""
    from optimize.errors import OptimizeError
    from optimize.evaluate import evaluate
    from programs.artifacts import ArtifactError
    from programs.registry import parse_programs
    from selfrag import wiring
    from selfrag.cli.progress import RichReporter
    from selfrag.lm.factory import forget_prompts
    from selfrag.lm.model_files import ModelFileError

    try:
        specs = parse_programs(programs)
    except ValueError as exc:
        fail(str(exc), 2)
    from optimize.evaluate import in_sample_warnings

    for warning in in_sample_warnings(dataset, specs):  # read from the artifacts' manifests, before any model
        err_console.print(plain(f"warning: {warning}", "yellow"), soft_wrap=True)
    settings = settings_from(config, {"lm": {"profile": profile, "model": model, "threads": threads},
                                      "web": {"backend": web}, "retrieval": {"index": index}})
    if run_id is not None:
        from optimize.evaluate import check_run_id

        try:
            check_run_id(run_id)
        except OptimizeError as exc:
            fail(str(exc), 2)
    if quiet:
        quiet_libraries()
    if collection is None and Path(dataset).is_dir():  # a derived data folder knows its collection
        from optimize.derived_data import read_manifest

        try:
            collection = read_manifest(dataset)["collection"]
        except OptimizeError as exc:
            fail(str(exc), 2)
    if collection is not None:  # refuse an unknown or empty collection before any model is loaded
        from selfrag.cli.data import open_collection

        kb = open_collection(settings, collection)
        try:  # and a missing retrieval.index, with the one line ask gives
            wiring.build_retriever(settings, kb)
        except SelfRAGError as exc:
            fail(str(exc), exc.exit_code)
    try:
        lms = wiring.build_lms(settings)
        web_search = wiring.build_web(settings) if settings.web.backend != "none" else None
        with RichReporter(err_console) if not quiet else contextlib.nullcontext() as reporter:  # progress: stderr
            out_dir, summary = evaluate(
                settings, dataset, specs, lms=lms, web_search=web_search,
                knowledge_base=lambda collection: wiring.build_knowledge_base(settings, collection=collection),
                datasets_dir=paths.datasets_dir(), splits_dir=paths.splits_dir(), limit=limit, run_id=run_id,
                reports_dir=reports, support_limit=support_limit, semantic_f1=semantic_f1,
                reporter=reporter, ingest_progress=not quiet, strict=strict, collection=collection,
                retriever_of=lambda kb: wiring.build_retriever(settings, kb),
                components_of=lambda kb, retriever: wiring.strategy_components(settings, kb, retriever),
                fresh_start=lambda: forget_prompts(*lms[:2]))
    except (OptimizeError, ArtifactError) as exc:
        fail(str(exc), 2)
    except SelfRAGError as exc:
        fail(str(exc), exc.exit_code)
    except ModelFileError as exc:
        fail(str(exc))
    typer.echo(clean((out_dir / "summary.md").read_text(encoding="utf-8")))  # plain: the table must not wrap
    errors = sum(s["errors"] for s in summary["programs"].values())
    questions = sum(s["questions"] for s in summary["programs"].values())
    kinds: dict[str, int] = {}
    for s in summary["programs"].values():
        for kind, n in s.get("errors_by_kind", {}).items():
            kinds[kind] = kinds.get(kind, 0) + n
    line = plain(f"reports in {out_dir}")
    if errors:
        by_kind = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
        line.append(f" · {errors} question error(s): {by_kind}", style="yellow")
    console.print(line)
    if questions and errors == questions:
        fail(f"every question failed (see {out_dir / 'results.jsonl'}); is the LM backend reachable?", 1)


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_command)
