"""The one place a KnowledgeBase is assembled from settings."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from selfrag.settings import AUTO_EMBEDDER, KBSettings, RetrievalSettings

if TYPE_CHECKING:  # pragma: no cover
    from selfrag.kb.collection_info import ListedCollection
    from selfrag.kb.embedder import Embedder
    from selfrag.kb.knowledge_base import KnowledgeBase


def kb_folder(kb: KBSettings) -> Path:
    """``kb.path`` as an absolute path (chromadb caches one client per path string: a relative path would
    reach the first working directory's store after a ``chdir``)."""
    return Path(kb.path).expanduser().resolve()


def bm25_directory(kb: KBSettings) -> Path:
    """Where the BM25 index of ``kb.collection`` is persisted: next to the Chroma data (for a
    server, under the local kb.path keyed by host and port)."""
    base = kb_folder(kb) / "bm25"
    if kb.server == "http":
        base = base / re.sub(r"[^A-Za-z0-9._-]", "_", f"http-{kb.host}-{kb.port}")
    return base / kb.collection


def build_knowledge_base(kb: KBSettings, retrieval: RetrievalSettings,
                         embedder: "Embedder | None" = None) -> "KnowledgeBase":
    """Build the knowledge base described by ``kb`` and ``retrieval``. ``embedder`` overrides
    ``kb.embedding_model`` (tests pass a HashEmbedder); ``"auto"`` gives an
    :class:`~selfrag.kb.auto_embedder.AutoEmbedder` over the collection."""
    from selfrag.kb.auto_embedder import AutoEmbedder
    from selfrag.kb.chunking import RecursiveChunker, SemanticChunker
    from selfrag.kb.embedder import make_embedder
    from selfrag.kb.knowledge_base import KnowledgeBase
    from selfrag.kb.store import ChromaStore, LazyClient, make_client, validate_collection_name

    validate_collection_name(kb.collection)
    auto = embedder is None and kb.embedding_model == AUTO_EMBEDDER
    if embedder is None and not auto:
        embedder = make_embedder(kb.embedding_model, kb.embed_batch_size)
    # A persistent store is created on first use (nothing is written while a command can still be refused);
    # a server is reached now, so that an unreachable one is an error, not an empty retrieval.
    client = LazyClient(kb_folder(kb)) if kb.server == "persistent" else \
        make_client(kb.server, kb_folder(kb), kb.host, kb.port)
    store = ChromaStore(client, kb.collection, AUTO_EMBEDDER if auto else embedder.name)
    if auto:  # the collection's recorded embedder, or the one its first ingest's language asks for
        embedder = AutoEmbedder(store, kb.embed_batch_size)
    if kb.chunker == "semantic":
        chunker = SemanticChunker(embedder, kb.semantic_threshold, kb.chunk_size, 0)
    else:
        chunker = RecursiveChunker(kb.chunk_size, kb.chunk_overlap)
    return KnowledgeBase(store, embedder, chunker, retrieval, bm25_dir=bm25_directory(kb),
                         write_batch=kb.write_batch_size, home=kb_folder(kb))


def list_collections(kb: KBSettings) -> list[tuple[str, int]]:
    """``(name, chunk count)`` of every collection at the configured Chroma location. A persistent
    location that does not exist yet has none (and is not created)."""
    from selfrag.kb.store import list_collections as _list, make_client

    if kb.server == "persistent" and not kb_folder(kb).exists():
        return []
    return _list(make_client(kb.server, kb_folder(kb), kb.host, kb.port))


def has_chunks(kb: KBSettings) -> bool:
    """Whether ``kb.collection`` exists and holds chunks. Reads only (a missing store is not created)."""
    return dict(list_collections(kb)).get(kb.collection, 0) > 0


def describe_collections(kb: KBSettings) -> "list[ListedCollection]":
    """Every collection at the configured location with its description and indexes
    (:func:`selfrag.kb.collection_info.list_described`); none when a persistent location does not exist."""
    from selfrag.kb.collection_info import list_described
    from selfrag.kb.store import make_client

    if kb.server == "persistent" and not kb_folder(kb).exists():
        return []
    return list_described(make_client(kb.server, kb_folder(kb), kb.host, kb.port))


def location(kb: KBSettings) -> str:
    """Where the collections live, for messages: the folder, or the server's host:port."""
    return str(kb.path) if kb.server == "persistent" else f"{kb.host}:{kb.port}"


def is_default_knowledge_base(kb: KBSettings) -> bool:
    """Whether ``kb`` is the default collection at the default (persistent) path: the only knowledge
    base the demo corpus is ever ingested into on its own."""
    default = KBSettings()
    if kb.server != "persistent" or kb.collection != default.collection:
        return False
    return kb_folder(kb) == kb_folder(default)


def require_collection(kb: KBSettings) -> int:
    """The chunk count of ``kb.collection``; :class:`~selfrag.errors.InputError` (naming the existing
    collections) when it does not exist. Reads only: a missing collection is never created."""
    from selfrag.errors import InputError
    from selfrag.kb.store import validate_collection_name

    validate_collection_name(kb.collection)
    existing = dict(list_collections(kb))
    if kb.collection not in existing:
        names = ", ".join(sorted(existing)) or "none"
        raise InputError(f"no collection named {kb.collection!r} at {location(kb)} (existing: {names}); "
                         "create it with `selfrag ingest PATH --collection NAME`")
    return existing[kb.collection]
