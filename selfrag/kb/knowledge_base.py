"""The KnowledgeBase facade the program, the CLI and the eval harness use."""

from __future__ import annotations

import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

from selfrag.kb.bm25 import BM25Index
from selfrag.kb.chunking import Chunker
from selfrag.kb.embedder import Embedder
from selfrag.kb.ingest import IngestReport, chunk_documents, write_chunks
from selfrag.errors import InputError
from selfrag.kb.loaders import Document, Skipped, load_paths
from selfrag.kb.retriever import BM25Retriever, DenseRetriever, HybridRetriever
from selfrag.kb.store import ChromaStore, versioned
from selfrag.kb.text import content_hash
from selfrag.settings import RetrievalSettings
from programs.types import Passage, Retriever

log = logging.getLogger(__name__)

MODES = ("dense", "bm25", "hybrid")


class KnowledgeBase:
    """One Chroma collection plus its BM25 index, an embedder and a chunker.

    Build it with :func:`selfrag.kb.factory.build_knowledge_base`.
    """

    def __init__(self, store: ChromaStore, embedder: Embedder, chunker: Chunker,
                 retrieval: RetrievalSettings | None = None, bm25_dir: Path | None = None,
                 write_batch: int = 256, home: Path | None = None):
        """``home``: the knowledge base's own folder (Chroma data, BM25 indexes), never ingested."""
        if write_batch < 1:
            raise ValueError(f"write_batch must be >= 1, got {write_batch!r}")
        self.home = Path(home) if home is not None else None
        self.store = store
        self.embedder = embedder
        self.chunker = chunker
        self.retrieval = retrieval or RetrievalSettings()
        self.bm25_dir = Path(bm25_dir) if bm25_dir is not None else None
        self.write_batch = write_batch
        self._bm25: BM25Index | None = None
        self._bm25_checked = False

    @property
    def name(self) -> str:
        return self.store.name

    # -- writing -------------------------------------------------------------------------------
    def ingest(self, paths: Sequence[str | os.PathLike[str]], progress: bool = True, *, prune: bool = True,
               follow_symlinks: bool = False) -> IngestReport:
        """Load, chunk, embed and store files/folders. Raises FileNotFoundError for a missing path;
        anything unusable is skipped and listed in ``report.skipped`` (bad JSONL lines in
        ``report.skipped_lines``), the rest is ingested.

        Re-ingesting reconciles: a changed file's old chunks are replaced, and (``prune``) the chunks of
        stored sources under an ingested folder — or of an ingested file — that vanished or are now
        unusable are deleted (``report.pruned_sources``; without ``prune`` they are only listed in
        ``report.stale_sources``). The knowledge base's own folder is never ingested."""
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        t0 = time.perf_counter()
        lines: list[Skipped] = []
        docs, skipped, loaded = load_paths(paths, follow_symlinks=follow_symlinks,
                                           exclude=[self.home] if self.home is not None else [],
                                           skipped_lines=lines)
        report = IngestReport(files_loaded=loaded, documents=len(docs), skipped=skipped, skipped_lines=lines)
        self._choose_embedder([d.text for d in docs])
        records = chunk_documents(docs, self.chunker)
        write_chunks(self.store, self.embedder, records, replace_sources=sorted({d.source for d in docs}),
                     batch_size=self.write_batch, progress=progress, report=report)
        stale = self._stale_sources(paths, {d.source for d in docs}, skipped)
        if prune and stale:
            ids = [cid for ids in stale.values() for cid in ids]
            self.store.delete(ids)
            report.pruned_sources, report.chunks_pruned = sorted(stale), len(ids)
            log.info("pruned %d chunk(s) of %d vanished or unusable source(s)", len(ids), len(stale))
        elif stale:
            report.stale_sources = sorted(stale)
        self._invalidate()
        report.seconds = time.perf_counter() - t0
        log.info("ingested %d file(s): %d chunks added, %d unchanged, %d updated, %d removed, %d skipped",
                 loaded, report.chunks_added, report.chunks_unchanged, report.chunks_updated, report.chunks_removed,
                 len(skipped))
        return report

    def _stale_sources(self, paths: Sequence[str | os.PathLike[str]], loaded: set[str],
                       skipped: Sequence[Skipped]) -> dict[str, list[str]]:
        """Stored sources (source → chunk ids) that an ingest of ``paths`` shows to be stale: under an
        ingested folder or equal to an ingested file, not loaded now, and either gone from disk or skipped
        as unusable. Sources that exist but were not visited (hidden, excluded) are left alone."""
        folders: list[str] = []
        files: set[str] = set()
        for raw in paths:
            real = os.path.realpath(os.path.expanduser(raw))
            if os.path.isdir(real):
                folders.append(real)
            else:
                files.add(real)
        if (not folders and not files) or not self.store.exists():  # nothing stored: nothing stale (none created)
            return {}
        prefixes = tuple(f.rstrip(os.sep) + os.sep for f in folders)
        unusable = {os.path.realpath(s.path) for s in skipped}
        stale: dict[str, list[str]] = {}
        for cid, _text, meta in self.store.iter_all(include_sources_only=True):
            src = str(meta.get("source", ""))
            if not src or src in loaded or not (src in files or src.startswith(prefixes)):
                continue
            if src in unusable or not os.path.lexists(src):
                stale.setdefault(src, []).append(cid)
        return stale

    def add_documents(self, documents: Iterable[tuple[str, dict[str, Any]]], progress: bool = False) -> IngestReport:
        """Add ``(text, metadata)`` pairs. ``metadata`` may carry ``source``, ``title``, ``doc_id``
        (preserved in every chunk's metadata) and any scalar fields. Idempotent like ``ingest``."""
        t0 = time.perf_counter()
        docs: list[Document] = []
        for n, item in enumerate(documents):
            try:
                text, meta = item
            except (TypeError, ValueError) as exc:
                raise ValueError(f"add_documents expects (text, metadata) pairs; item {n} is {item!r}") from exc
            if not isinstance(text, str):
                raise ValueError(f"document {n}: text must be a str, got {type(text).__name__}")
            if not text.strip():
                continue
            meta = dict(meta or {})
            doc_id = meta.get("doc_id")
            if doc_id is not None:
                meta["doc_id"] = str(doc_id)
            source = str(meta.pop("source", "") or (f"doc:{doc_id}" if doc_id is not None else "memory"))
            title = str(meta.pop("title", "") or "")
            key = f"doc:{doc_id}" if doc_id is not None else f"hash:{content_hash(text)}"
            docs.append(Document(text=text, source=source, title=title, key=key, metadata=meta))
        report = IngestReport(documents=len(docs))
        self._choose_embedder([d.text for d in docs])
        records = chunk_documents(docs, self.chunker)
        write_chunks(self.store, self.embedder, records, batch_size=self.write_batch, progress=progress,
                     report=report)
        self._invalidate()
        report.seconds = time.perf_counter() - t0
        return report

    def _choose_embedder(self, texts: list[str]) -> None:
        """An ``auto`` knowledge base decides its embedder at its first write, from the language of ``texts``."""
        choose = getattr(self.embedder, "choose_for", None)
        if choose is not None and texts:
            choose(texts)

    def sources_matching(self, path: str | os.PathLike[str]) -> dict[str, list[str]]:
        """The stored sources a ``remove-source`` of ``path`` would delete (source → chunk ids): the
        source itself (as given or resolved), or every source under it when it is a folder (or when no
        source equals it). InputError for an empty path or the filesystem root."""
        raw = str(path)
        if not raw.strip():
            raise InputError("the source to remove is empty; name a file or folder")
        try:
            resolved = str(Path(raw).expanduser().resolve())
        except (OSError, RuntimeError):
            resolved = raw
        if resolved == os.sep or Path(resolved).parent == Path(resolved):
            raise InputError(f"refusing to remove every source under the filesystem root ({raw!r}); "
                             "use `selfrag delete-collection` to empty a collection")
        candidates = {raw, resolved}
        found: dict[str, list[str]] = {}
        for src in candidates:
            ids = self.store.ids_where({"source": src})
            if ids:
                found.setdefault(src, []).extend(ids)
        if not found or Path(raw).is_dir():
            prefixes = tuple(c.rstrip(os.sep) + os.sep for c in candidates)
            for cid, _text, meta in self.store.iter_all(include_sources_only=True):
                src = str(meta.get("source", ""))
                if src.startswith(prefixes):
                    found.setdefault(src, []).append(cid)
        return {src: sorted(set(ids)) for src, ids in sorted(found.items())}

    def delete_ids(self, ids: Sequence[str]) -> int:
        """Delete chunks by id; returns how many were asked for."""
        ids = sorted(set(ids))
        if ids:
            self.store.delete(ids)
            self._invalidate()
        return len(ids)

    def delete_source(self, path: str | os.PathLike[str]) -> int:
        """Delete the chunks of a source (a file path, or every file under a folder path, or a
        non-file source string). Returns how many chunks were removed. InputError for an empty path
        or the filesystem root (:meth:`sources_matching`)."""
        n = self.delete_ids([cid for ids in self.sources_matching(path).values() for cid in ids])
        log.info("removed %d chunk(s) of %s", n, path)
        return n

    def delete_collection(self) -> None:
        """Drop the whole collection and its BM25 index."""
        self.store.drop()
        if self.bm25_dir is not None:
            shutil.rmtree(self.bm25_dir, ignore_errors=True)
        self._bm25 = None
        self._bm25_checked = False

    # -- reading -------------------------------------------------------------------------------
    def count(self) -> int:
        return self.store.count()

    def is_empty(self) -> bool:
        return self.count() == 0

    def stats(self) -> dict[str, Any]:
        langs: dict[str, int] = {}
        sources: set[str] = set()
        n = 0
        for _id, _text, meta in self.store.iter_all(include_sources_only=True):
            n += 1
            sources.add(str(meta.get("source", "")))
            lang = str(meta.get("language", "und"))
            langs[lang] = langs.get(lang, 0) + 1
        return {"collection": self.name, "chunks": n, "sources": len(sources), "languages": langs,
                "embedder": self.embedder.name, "bm25_index": str(self.bm25_dir) if self.bm25_dir else "memory"}

    def retriever(self, mode: str | None = None) -> Retriever:
        mode = mode or self.retrieval.mode
        if mode not in MODES:
            raise ValueError(f"retrieval mode must be one of {MODES}, got {mode!r}")
        dense = DenseRetriever(self.store, self.embedder)
        if mode == "dense":
            return dense
        bm25 = BM25Retriever(self.bm25_index, repair=self.repair_bm25)
        if mode == "bm25":
            return bm25
        r = self.retrieval
        return HybridRetriever(dense, bm25, r.dense_weight, r.bm25_weight, r.rrf_k, r.candidates)

    def retrieve(self, query: str, k: int | None = None, filters: dict[str, Any] | None = None,
                 mode: str | None = None) -> list[Passage]:
        return self.retriever(mode).retrieve(query, k or self.retrieval.k, filters)

    # -- BM25 consistency ----------------------------------------------------------------------
    def _invalidate(self) -> None:
        self._bm25_checked = False

    def fingerprint(self) -> str:
        """The collection's version: its embedder and a hash of its chunk ids (content-derived) with the
        store's revision, so any added, changed or removed chunk, new metadata of a chunk, or a
        re-embedding, changes it."""
        return f"{self.name}:{self.embedder.name}:{self.store.version()}"

    def bm25_index(self) -> BM25Index:
        """The BM25 index matching the collection's current ids and revision: from memory, from disk, or
        rebuilt from Chroma (and saved) when stale. A cheap count check catches writes made by
        other processes after the index was verified."""
        if self._bm25 is not None and self._bm25_checked:
            if len(self._bm25) == self.store.count():
                return self._bm25
        fingerprint = self.store.version()
        if self._bm25 is not None and self._bm25.fingerprint == fingerprint:
            self._bm25_checked = True
            return self._bm25
        if self.bm25_dir is not None and BM25Index.stored_fingerprint(self.bm25_dir) == fingerprint:
            loaded = BM25Index.load(self.bm25_dir)
            if loaded is not None and loaded.fingerprint == fingerprint:
                log.info("loaded BM25 index for %s (%d chunks)", self.name, len(loaded))
                self._bm25, self._bm25_checked = loaded, True
                return loaded
        self._bm25 = self._rebuild_bm25()
        self._bm25_checked = True
        return self._bm25

    def repair_bm25(self) -> BM25Index:
        """Rebuild the BM25 index from Chroma (and save it) after a search found it damaged."""
        log.warning("the BM25 index of %s is damaged; rebuilding it from the collection", self.name)
        self._bm25 = self._rebuild_bm25()
        self._bm25_checked = True
        return self._bm25

    def _rebuild_bm25(self) -> BM25Index:
        t0 = time.perf_counter()
        revision = self.store.revision()  # before the chunks: see ChromaStore.version
        ids, texts, metas = [], [], []
        for cid, text, meta in self.store.iter_all():
            ids.append(cid)
            texts.append(text)
            metas.append(meta)
        index = BM25Index(ids, texts, metas, versioned(ids, revision))
        if self.bm25_dir is not None:
            index.save(self.bm25_dir)
        log.info("rebuilt BM25 index for %s: %d chunks in %.2fs", self.name, len(ids), time.perf_counter() - t0)
        return index

