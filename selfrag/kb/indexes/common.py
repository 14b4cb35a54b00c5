"""What the index builders share: the sibling collection an index lives in, node ids, the report."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from selfrag.kb.store import PAGE, ChromaStore

if TYPE_CHECKING:  # pragma: no cover
    from selfrag.kb.knowledge_base import KnowledgeBase


@dataclass
class IndexReport:
    """What one build did. ``lm_calls`` counts summariser / question-writer calls made (cached ones excluded)."""

    kind: str
    collection: str
    nodes_total: int = 0
    nodes_added: int = 0
    nodes_unchanged: int = 0
    nodes_removed: int = 0
    lm_calls: int = 0
    lm_failures: int = 0
    levels: list[int] = field(default_factory=list)  # RAPTOR: nodes per level, leaves first
    seconds: float = 0.0


def sibling(kb: "KnowledgeBase", suffix: str) -> "KnowledgeBase":
    """The knowledge base ``<collection>.<suffix>`` next to ``kb``: same client, embedder, chunker,
    retrieval settings; its BM25 index beside ``kb``'s."""
    from selfrag.kb.knowledge_base import KnowledgeBase

    name = f"{kb.name}.{suffix}"
    store = ChromaStore(kb.store.client, name, kb.embedder.name)
    bm25_dir = kb.bm25_dir.with_name(name) if kb.bm25_dir is not None else None
    return KnowledgeBase(store, kb.embedder, kb.chunker, kb.retrieval, bm25_dir=bm25_dir, write_batch=kb.write_batch)


def node_id(kind: str, *parts: str) -> str:
    return hashlib.sha256("\x1f".join((kind, *parts)).encode("utf-8")).hexdigest()[:32]


def iter_with_embeddings(store: ChromaStore) -> Iterator[tuple[str, str, dict[str, Any], np.ndarray]]:
    """``(id, text, metadata, embedding)`` of every stored chunk, paged."""
    offset = 0
    while True:
        got = store.collection.get(include=["documents", "metadatas", "embeddings"], limit=PAGE, offset=offset)
        ids = got["ids"]
        for i, cid in enumerate(ids):
            yield cid, got["documents"][i] or "", dict(got["metadatas"][i] or {}), np.asarray(got["embeddings"][i],
                                                                                                dtype=np.float32)
        if len(ids) < PAGE:
            return
        offset += len(ids)


def remove_stale(store: ChromaStore, keep: set[str]) -> int:
    """Delete every stored id not in ``keep``; how many were deleted."""
    stale = [i for i in store.all_ids() if i not in keep]
    if stale:
        store.delete(stale)
    return len(stale)
