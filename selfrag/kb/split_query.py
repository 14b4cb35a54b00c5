"""Hybrid retrieval whose dense search can embed a different text than its keyword search (HyDE).

Implements :class:`programs.retriever_calls.DenseQueryRetriever`: ``retrieve(query, k, filters,
dense_query=...)`` embeds ``dense_query`` (e.g. a hypothetical answer passage) for Chroma while BM25
keeps ``query`` (the question's own words), then fuses the two as the hybrid retriever does.
Without ``dense_query`` it is exactly :class:`~selfrag.kb.retriever.HybridRetriever`.
"""

from __future__ import annotations

from typing import Any

from programs.types import Passage
from selfrag.kb.fusion import weighted_rrf
from selfrag.kb.retriever import HybridRetriever, _check_k


class SplitQueryHybridRetriever(HybridRetriever):
    def retrieve(self, query: str, k: int = 5, filters: dict[str, Any] | None = None, *,
                 dense_query: str | None = None) -> list[Passage]:
        _check_k(k)
        depth = max(k, self.candidates)
        dense = self.dense.retrieve(dense_query or query, depth, filters) if self.weights[0] > 0 else []
        sparse = self.bm25.retrieve(query, depth, filters) if self.weights[1] > 0 else []
        return weighted_rrf([dense, sparse], self.weights, k=self.rrf_k, limit=k)

    @classmethod
    def of(cls, hybrid: HybridRetriever) -> "SplitQueryHybridRetriever":
        """The same retriever (same parts, weights and depth) with the split dense query."""
        return cls(hybrid.dense, hybrid.bm25, *hybrid.weights, rrf_k=hybrid.rrf_k, candidates=hybrid.candidates)
