"""Knowledge-base commands: ingest, search, collections, stats, delete-collection, remove-source.

Thin: each command resolves settings, builds the knowledge base through
:func:`selfrag.kb.factory.build_knowledge_base` and renders the result with rich.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.table import Table

from selfrag.cli.common import CollectionOpt, ConfigOpt, console, fail, settings_from

if TYPE_CHECKING:  # pragma: no cover
    from selfrag.kb.knowledge_base import KnowledgeBase
    from selfrag.settings import Settings


def _settings(config: Path | None, collection: str | None = None, mode: str | None = None) -> Settings:
    return settings_from(config, {"kb": {"collection": collection}, "retrieval": {"mode": mode}})


def _knowledge_base(settings: Settings) -> KnowledgeBase:
    from selfrag.kb.factory import build_knowledge_base

    return build_knowledge_base(settings.kb, settings.retrieval)


def stdin_is_interactive() -> bool:
    """Whether a confirmation can be asked (a terminal on stdin)."""
    return sys.stdin.isatty()


def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders (.txt .md .html .pdf .jsonl).")],
    collection: CollectionOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    config: ConfigOpt = None,
) -> None:
    """Ingest files and folders into the knowledge base."""
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        fail(f"path does not exist: {', '.join(missing)}", 2)
    kb = _knowledge_base(_settings(config, collection))
    report = kb.ingest(paths, progress=not quiet)
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
        fail("nothing was ingested (every input was skipped or empty)", 1)


def search(
    query: Annotated[str, typer.Argument(help="The query.")],
    k: Annotated[Optional[int], typer.Option("-k", "--k", min=1, help="How many passages (default: retrieval.k).")] = None,
    mode: Annotated[Optional[str], typer.Option("--mode", "-m", help="dense | bm25 | hybrid (default: retrieval.mode).")] = None,
    collection: CollectionOpt = None,
    where: Annotated[Optional[str], typer.Option(
        "--where", help='Metadata filter as JSON, e.g. \'{"language": "zh"}\'.')] = None,
    config: ConfigOpt = None,
) -> None:
    """Search the knowledge base."""
    from selfrag.kb.knowledge_base import MODES

    if mode is not None and mode not in MODES:
        fail(f"--mode must be dense, bm25 or hybrid, got {mode!r}", 2)
    filters: dict[str, Any] | None = None
    if where:
        try:
            filters = json.loads(where)
        except json.JSONDecodeError as exc:
            fail(f"--where is not valid JSON: {exc}", 2)
    kb = _knowledge_base(_settings(config, collection, mode))
    passages = kb.retrieve(query, k=k, filters=filters)
    table = Table(title=f"{len(passages)} result(s) from {kb.name!r} ({kb.retrieval.mode})")
    table.add_column("#", justify="right")
    table.add_column("score", justify="right")
    table.add_column("source / title")
    table.add_column("text")
    for i, p in enumerate(passages, 1):
        text = p.text if len(p.text) <= 300 else p.text[:300] + "…"
        table.add_row(str(i), f"{p.score:.4f}", f"{p.source}\n[dim]{p.title} #{p.metadata.get('chunk_index', '')}[/dim]", text)
    console.print(table)


def collections(config: ConfigOpt = None) -> None:
    """List the collections and their chunk counts."""
    from selfrag.kb.factory import list_collections

    s = _settings(config)
    table = Table(title=f"collections at {s.kb.path if s.kb.server == 'persistent' else f'{s.kb.host}:{s.kb.port}'}")
    table.add_column("name")
    table.add_column("chunks", justify="right")
    for name, n in list_collections(s.kb):
        table.add_row(name, str(n))
    console.print(table)


def stats(collection: CollectionOpt = None, config: ConfigOpt = None) -> None:
    """Show statistics of a collection."""
    info = _knowledge_base(_settings(config, collection)).stats()
    table = Table(title=f"collection {info['collection']!r}", show_header=False)
    for key in ("chunks", "sources", "embedder", "bm25_index"):
        table.add_row(key, str(info[key]))
    table.add_row("languages", ", ".join(f"{k}: {v}" for k, v in sorted(info["languages"].items())) or "-")
    console.print(table)


def delete_collection(
    name: Annotated[str, typer.Argument(help="Collection to delete.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Delete without asking for confirmation.")] = False,
    config: ConfigOpt = None,
) -> None:
    """Delete a collection (its chunks and BM25 index); asks first unless --yes."""
    from selfrag.kb.factory import list_collections

    s = _settings(config, name)
    chunks = dict(list_collections(s.kb))
    if name not in chunks:
        fail(f"no collection named {name!r}", 1)
    if not yes:
        if not stdin_is_interactive():
            fail(f"not deleting {name!r} without confirmation: pass --yes", 2)
        if not typer.confirm(f"delete collection {name!r} ({chunks[name]} chunks)?"):
            raise typer.Exit(1)
    _knowledge_base(s).delete_collection()
    console.print(f"deleted collection [bold]{name}[/bold]")


def remove_source(
    path: Annotated[str, typer.Argument(help="The file (or folder) whose chunks to delete; it may no longer exist.")],
    collection: CollectionOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Delete the chunks of a removed (or any) source file."""
    n = _knowledge_base(_settings(config, collection)).delete_source(path)
    if n == 0:
        fail(f"no chunks found for source {path!r}", 1)
    console.print(f"removed {n} chunk(s) of {path}")


def register(app: typer.Typer) -> None:
    app.command("ingest")(ingest)
    app.command("search")(search)
    app.command("collections")(collections)
    app.command("stats")(stats)
    app.command("delete-collection")(delete_collection)
    app.command("remove-source")(remove_source)
