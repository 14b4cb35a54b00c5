"""The knowledge base: load, chunk, embed, store in Chroma, retrieve (dense, BM25, hybrid).

Heavy dependencies (chromadb, sentence-transformers, torch) are imported lazily inside the
modules that need them, so ``import selfrag.kb`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["KnowledgeBase", "IngestReport", "build_knowledge_base", "HashEmbedder", "SentenceTransformerEmbedder"]

if TYPE_CHECKING:  # pragma: no cover
    from selfrag.kb.embedder import HashEmbedder, SentenceTransformerEmbedder
    from selfrag.kb.factory import build_knowledge_base
    from selfrag.kb.ingest import IngestReport
    from selfrag.kb.knowledge_base import KnowledgeBase

_LAZY = {
    "KnowledgeBase": "selfrag.kb.knowledge_base",
    "IngestReport": "selfrag.kb.ingest",
    "build_knowledge_base": "selfrag.kb.factory",
    "HashEmbedder": "selfrag.kb.embedder",
    "SentenceTransformerEmbedder": "selfrag.kb.embedder",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'selfrag.kb' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
