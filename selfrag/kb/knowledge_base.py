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
from selfrag.kb.loaders import Document, load_paths
from selfrag.kb.retriever import BM25Retriever, DenseRetriever, HybridRetriever
from selfrag.kb.store import ChromaStore, ids_fingerprint
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
                 write_batch: int = 256):
        if write_batch < 1:
            raise ValueError(f"write_batch must be >= 1, got {write_batch!r}")
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
    def ingest(self, paths: Sequence[str | os.PathLike[str]], progress: bool = True) -> IngestReport:
        """Load, chunk, embed and store files/folders. Raises FileNotFoundError for a missing path;
        bad files are skipped and listed in ``report.skipped``."""
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        t0 = time.perf_counter()
        docs, skipped, loaded = load_paths(paths)
        report = IngestReport(files_loaded=loaded, documents=len(docs), skipped=skipped)
        records = chunk_documents(docs, self.chunker)
        write_chunks(self.store, self.embedder, records, replace_sources=sorted({d.source for d in docs}),
                     batch_size=self.write_batch, progress=progress, report=report)
        self._invalidate()
        report.seconds = time.perf_counter() - t0
        log.info("ingested %d file(s): %d chunks added, %d unchanged, %d removed, %d skipped",
                 loaded, report.chunks_added, report.chunks_unchanged, report.chunks_removed, len(skipped))
        return report

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
        records = chunk_documents(docs, self.chunker)
        write_chunks(self.store, self.embedder, records, batch_size=self.write_batch, progress=progress,
                     report=report)
        self._invalidate()
        report.seconds = time.perf_counter() - t0
        return report

    def delete_source(self, path: str | os.PathLike[str]) -> int:
        """Delete the chunks of a source (a file path, or every file under a folder path, or a
        non-file source string). Returns how many chunks were removed."""
        raw = str(path)
        candidates = {raw}
        try:
            candidates.add(str(Path(raw).expanduser().resolve()))
        except OSError:
            pass
        ids: list[str] = []
        for src in candidates:
            ids.extend(self.store.ids_where({"source": src}))
        prefixes = tuple(c.rstrip(os.sep) + os.sep for c in candidates if c)
        if not ids or Path(raw).is_dir():
            for cid, _text, meta in self.store.iter_all(include_sources_only=True):
                if str(meta.get("source", "")).startswith(prefixes):
                    ids.append(cid)
        ids = sorted(set(ids))
        if ids:
            self.store.delete(ids)
            self._invalidate()
        log.info("removed %d chunk(s) of %s", len(ids), raw)
        return len(ids)

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
        bm25 = BM25Retriever(self.bm25_index)
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
        """The collection's version: a hash of its chunk ids (content-derived), so any added, changed
        or removed chunk changes it."""
        return f"{self.name}:{ids_fingerprint(self.store.all_ids())}"

    def bm25_index(self) -> BM25Index:
        """The BM25 index matching the collection's current ids: from memory, from disk, or
        rebuilt from Chroma (and saved) when stale. A cheap count check catches writes made by
        other processes after the index was verified."""
        if self._bm25 is not None and self._bm25_checked:
            if len(self._bm25) == self.store.count():
                return self._bm25
        ids = self.store.all_ids()
        fingerprint = ids_fingerprint(ids)
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

    def _rebuild_bm25(self) -> BM25Index:
        t0 = time.perf_counter()
        ids, texts, metas = [], [], []
        for cid, text, meta in self.store.iter_all():
            ids.append(cid)
            texts.append(text)
            metas.append(meta)
        index = BM25Index(ids, texts, metas, ids_fingerprint(ids))
        if self.bm25_dir is not None:
            index.save(self.bm25_dir)
        log.info("rebuilt BM25 index for %s: %d chunks in %.2fs", self.name, len(ids), time.perf_counter() - t0)
        return index

