"""Ingestion: documents -> chunks with content-derived ids -> embeddings -> Chroma.

Ids hash the source, the document key, the chunk index and the chunk text, so re-ingesting the
same files adds nothing, a changed file gets new ids (its stale chunks are deleted after the new
ones are written) and an ingest killed half-way converges when run again (upserts are idempotent).
A chunk whose text is unchanged but whose metadata changed (a JSONL line's fields, an HTML title)
keeps its id and embedding and gets the new metadata (``chunks_updated``); the store's revision then
changes, so the BM25 index and anything built on the collection's version follow.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from selfrag.kb.chunking import Chunker
from selfrag.kb.embedder import Embedder
from selfrag.kb.loaders import Document, Skipped
from selfrag.kb.store import ChromaStore, clean_metadata
from selfrag.kb.text import content_hash, detect_language

log = logging.getLogger(__name__)


@dataclass
class ChunkRecord:
    id: str
    text: str
    metadata: dict[str, Any]


@dataclass
class IngestReport:
    files_loaded: int = 0
    documents: int = 0
    chunks_total: int = 0
    chunks_added: int = 0
    chunks_unchanged: int = 0
    chunks_updated: int = 0  # same text, new metadata: stored again with it (not re-embedded)
    chunks_removed: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    skipped_lines: list[Skipped] = field(default_factory=list)  # bad lines of JSONL files that were loaded
    # Reconciling a re-ingested folder: the stored sources under it that vanished or became unusable
    # (empty, undecodable, ...), and how many of their chunks were deleted (none with --no-prune).
    pruned_sources: list[str] = field(default_factory=list)
    chunks_pruned: int = 0
    stale_sources: list[str] = field(default_factory=list)  # what --no-prune kept
    seconds: float = 0.0

    @property
    def nothing_ingested(self) -> bool:
        """True when no input could be used at all (every file skipped, or none given)."""
        return self.documents == 0


def chunk_id(source: str, key: str, index: int, text: str) -> str:
    return hashlib.sha256(f"{source}\x1f{key}\x1f{index}\x1f{text}".encode("utf-8")).hexdigest()[:32]


def chunk_documents(docs: Iterable[Document], chunker: Chunker) -> list[ChunkRecord]:
    records: list[ChunkRecord] = []
    seen: set[str] = set()
    for doc in docs:
        for index, piece in enumerate(chunker.chunk(doc.text)):
            cid = chunk_id(doc.source, doc.key, index, piece)
            if cid in seen:
                continue
            seen.add(cid)
            meta = dict(doc.metadata)
            meta.update(
                source=doc.source,
                title=doc.title,
                chunk_index=index,
                content_hash=content_hash(piece),
                language=str(doc.metadata.get("language") or detect_language(piece)),
            )
            records.append(ChunkRecord(cid, piece, meta))
    return records


def _progress(enabled: bool, total: int, description: str):
    if not enabled:
        return None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeRemainingColumn(), console=Console(stderr=True), transient=False)
    progress.start()
    progress.add_task(description, total=total)
    return progress


def changed_metadata(store: ChromaStore, records: Sequence[ChunkRecord]) -> list[ChunkRecord]:
    """The stored ``records`` whose stored metadata differs from theirs (as Chroma would store it)."""
    stored = store.metadatas([r.id for r in records])
    return [r for r in records if r.id in stored and stored[r.id] != clean_metadata(r.metadata)]


def write_chunks(store: ChromaStore, embedder: Embedder, records: Sequence[ChunkRecord],
                 replace_sources: Sequence[str] = (), batch_size: int = 256,
                 progress: bool = False, report: IngestReport | None = None) -> IngestReport:
    """Embed and store the records that are not stored yet, in batches, and give stored ones whose
    metadata changed their new metadata; then delete chunks of ``replace_sources`` that are not among
    ``records`` (the stale chunks of changed files)."""
    if batch_size < 1:
        raise ValueError(f"write batch_size must be >= 1, got {batch_size!r}")
    report = report or IngestReport()
    t0 = time.perf_counter()
    present = store.existing([r.id for r in records])
    # length-sorted so each embedding batch pads little (as model.encode does within one call)
    todo = sorted((r for r in records if r.id not in present), key=lambda r: len(r.text))
    restamp = changed_metadata(store, [r for r in records if r.id in present])
    report.chunks_total += len(records)
    report.chunks_unchanged += len(records) - len(todo) - len(restamp)
    bar = _progress(progress and bool(todo), len(todo), "embedding")
    try:
        for n, start in enumerate(range(0, len(todo), batch_size), start=1):
            batch = todo[start:start + batch_size]
            vectors = embedder.embed([r.text for r in batch])
            store.add([r.id for r in batch], [r.text for r in batch], vectors, [r.metadata for r in batch])
            report.chunks_added += len(batch)
            log.info("wrote batch %d (%d chunks, %d/%d)", n, len(batch), report.chunks_added, len(todo))
            if bar is not None:
                bar.advance(bar.task_ids[0], len(batch))
    finally:
        if bar is not None:
            bar.stop()
    if restamp:
        store.replace_metadata([r.id for r in restamp], [r.metadata for r in restamp])
        report.chunks_updated += len(restamp)
        log.info("updated the metadata of %d unchanged chunk(s)", len(restamp))
    if replace_sources:
        keep = {r.id for r in records}
        stale: list[str] = []
        sources = sorted(set(replace_sources))
        for s in range(0, len(sources), 100):
            ids = store.ids_where({"source": {"$in": sources[s:s + 100]}})
            stale.extend(i for i in ids if i not in keep)
        if stale:
            store.delete(stale)
            report.chunks_removed += len(stale)
            log.info("removed %d stale chunk(s)", len(stale))
    report.seconds += time.perf_counter() - t0
    return report
