"""The one place a KnowledgeBase is assembled from settings."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from selfrag.settings import KBSettings, RetrievalSettings

if TYPE_CHECKING:  # pragma: no cover
    from selfrag.kb.embedder import Embedder
    from selfrag.kb.knowledge_base import KnowledgeBase


def bm25_directory(kb: KBSettings) -> Path:
    """Where the BM25 index of ``kb.collection`` is persisted: next to the Chroma data (for a
    server, under the local kb.path keyed by host and port)."""
    base = Path(kb.path).expanduser() / "bm25"
    if kb.server == "http":
        base = base / re.sub(r"[^A-Za-z0-9._-]", "_", f"http-{kb.host}-{kb.port}")
    return base / kb.collection


def build_knowledge_base(kb: KBSettings, retrieval: RetrievalSettings,
                         embedder: "Embedder | None" = None) -> "KnowledgeBase":
    """Build the knowledge base described by ``kb`` and ``retrieval``. ``embedder`` overrides
    ``kb.embedding_model`` (tests pass a HashEmbedder)."""
    from selfrag.kb.chunking import RecursiveChunker, SemanticChunker
    from selfrag.kb.embedder import make_embedder
    from selfrag.kb.knowledge_base import KnowledgeBase
    from selfrag.kb.store import ChromaStore, make_client, validate_collection_name

    validate_collection_name(kb.collection)
    embedder = embedder if embedder is not None else make_embedder(kb.embedding_model, kb.embed_batch_size)
    if kb.chunker == "semantic":
        chunker = SemanticChunker(embedder, kb.semantic_threshold, kb.chunk_size, 0)
    else:
        chunker = RecursiveChunker(kb.chunk_size, kb.chunk_overlap)
    client = make_client(kb.server, Path(kb.path).expanduser(), kb.host, kb.port)
    store = ChromaStore(client, kb.collection, embedder.name)
    return KnowledgeBase(store, embedder, chunker, retrieval, bm25_dir=bm25_directory(kb),
                         write_batch=kb.write_batch_size)


def list_collections(kb: KBSettings) -> list[tuple[str, int]]:
    """``(name, chunk count)`` of every collection at the configured Chroma location."""
    from selfrag.kb.store import list_collections as _list, make_client

    return _list(make_client(kb.server, Path(kb.path).expanduser(), kb.host, kb.port))
