"""Knowledge-base commands: ingest, search, collections, stats, delete-collection, remove-source.

Thin: each command resolves settings, builds the knowledge base through
:func:`selfrag.kb.factory.build_knowledge_base` and renders the result with rich.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

_COLLECTION = typer.Option(None, "--collection", "-c", help="Collection name (default: kb.collection).")


def _console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr)


def _settings(collection: str | None = None, mode: str | None = None):
    from selfrag.settings import resolve

    return resolve({"kb": {"collection": collection}, "retrieval": {"mode": mode}})


def _kb(collection: str | None = None, mode: str | None = None):
    from selfrag.kb.factory import build_knowledge_base

    s = _settings(collection, mode)
    return build_knowledge_base(s.kb, s.retrieval)


def _fail(message: str, code: int = 1) -> None:
    _console(stderr=True).print(f"[red]error:[/red] {message}")
    raise typer.Exit(code)


def ingest(
    paths: list[Path] = typer.Argument(..., help="Files or folders (.txt .md .html .pdf .jsonl)."),
    collection: Optional[str] = _COLLECTION,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Ingest files and folders into the knowledge base."""
    from rich.table import Table

    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        _fail(f"path does not exist: {', '.join(missing)}", 2)
    try:
        kb = _kb(collection)
        report = kb.ingest(paths, progress=not quiet)
    except (ValueError, FileNotFoundError) as exc:
        _fail(str(exc), 2)
    console = _console()
    table = Table(title=f"ingest into {kb.name!r}", show_header=False)
    for label, value in [
        ("files loaded", report.files_loaded), ("documents", report.documents),
        ("chunks (total)", report.chunks_total), ("chunks added", report.chunks_added),
        ("chunks unchanged", report.chunks_unchanged), ("stale chunks removed", report.chunks_removed),
        ("files skipped", len(report.skipped)), ("seconds", f"{report.seconds:.2f}"),
    ]:
        table.add_row(label, str(value))
    console.print(table)
    if report.skipped:
        skipped = Table(title="skipped files")
        skipped.add_column("path")
        skipped.add_column("reason")
        for s in report.skipped:
            skipped.add_row(s.path, s.reason)
        console.print(skipped)
    if report.nothing_ingested:
        _fail("nothing was ingested (every input was skipped or empty)", 1)


def search(
    query: str = typer.Argument(..., help="The query."),
    k: Optional[int] = typer.Option(None, "-k", "--k", min=1, help="How many passages (default: retrieval.k)."),
    mode: Optional[str] = typer.Option(None, "--mode", "-m", help="dense | bm25 | hybrid (default: retrieval.mode)."),
    collection: Optional[str] = _COLLECTION,
    where: Optional[str] = typer.Option(None, "--where", help='Metadata filter as JSON, e.g. \'{"language": "zh"}\'.'),
) -> None:
    """Search the knowledge base."""
    import json

    from rich.table import Table

    if mode is not None and mode not in ("dense", "bm25", "hybrid"):
        _fail(f"--mode must be dense, bm25 or hybrid, got {mode!r}", 2)
    filters: dict[str, Any] | None = None
    if where:
        try:
            filters = json.loads(where)
        except json.JSONDecodeError as exc:
            _fail(f"--where is not valid JSON: {exc}", 2)
    try:
        kb = _kb(collection, mode)
        passages = kb.retrieve(query, k=k, filters=filters)
    except ValueError as exc:
        _fail(str(exc), 2)
    table = Table(title=f"{len(passages)} result(s) from {kb.name!r} ({mode or kb.retrieval.mode})")
    table.add_column("#", justify="right")
    table.add_column("score", justify="right")
    table.add_column("source / title")
    table.add_column("text")
    for i, p in enumerate(passages, 1):
        text = p.text if len(p.text) <= 300 else p.text[:300] + "…"
        table.add_row(str(i), f"{p.score:.4f}", f"{p.source}\n[dim]{p.title} #{p.metadata.get('chunk_index', '')}[/dim]", text)
    _console().print(table)


def collections() -> None:
    """List the collections and their chunk counts."""
    from rich.table import Table

    from selfrag.kb.factory import list_collections

    s = _settings()
    table = Table(title=f"collections at {s.kb.path if s.kb.server == 'persistent' else f'{s.kb.host}:{s.kb.port}'}")
    table.add_column("name")
    table.add_column("chunks", justify="right")
    for name, n in list_collections(s.kb):
        table.add_row(name, str(n))
    _console().print(table)


def stats(collection: Optional[str] = _COLLECTION) -> None:
    """Show statistics of a collection."""
    from rich.table import Table

    info = _kb(collection).stats()
    table = Table(title=f"collection {info['collection']!r}", show_header=False)
    for key in ("chunks", "sources", "embedder", "bm25_index"):
        table.add_row(key, str(info[key]))
    table.add_row("languages", ", ".join(f"{k}: {v}" for k, v in sorted(info["languages"].items())) or "-")
    _console().print(table)


def delete_collection(
    name: str = typer.Argument(..., help="Collection to delete."),
    yes: bool = typer.Option(True, "--yes/--confirm", help="Ask for confirmation with --confirm."),
) -> None:
    """Delete a collection (its chunks and BM25 index)."""
    from selfrag.kb.factory import list_collections

    s = _settings(name)
    if name not in {n for n, _ in list_collections(s.kb)}:
        _fail(f"no collection named {name!r}", 1)
    if not yes and not typer.confirm(f"delete collection {name!r}?"):
        raise typer.Exit(1)
    _kb(name).delete_collection()
    _console().print(f"deleted collection [bold]{name}[/bold]")


def remove_source(
    path: str = typer.Argument(..., help="The file (or folder) whose chunks to delete; it may no longer exist."),
    collection: Optional[str] = _COLLECTION,
) -> None:
    """Delete the chunks of a removed (or any) source file."""
    n = _kb(collection).delete_source(path)
    if n == 0:
        _fail(f"no chunks found for source {path!r}", 1)
    _console().print(f"removed {n} chunk(s) of {path}")


def register(app: typer.Typer) -> None:
    app.command("ingest")(ingest)
    app.command("search")(search)
    app.command("collections")(collections)
    app.command("stats")(stats)
    app.command("delete-collection")(delete_collection)
    app.command("remove-source")(remove_source)
