"""Retrievers over one collection, all satisfying :class:`programs.types.Retriever`:
dense (Chroma nearest neighbours), BM25 (bm25s) and hybrid (weighted RRF of the two, with the one
RRF implementation in :mod:`programs.fusion`). The hybrid retriever also takes ``dense_query``
(:class:`programs.retriever_calls.DenseQueryRetriever`): HyDE's hypothetical passage is embedded for
the dense search while BM25 keeps the question's own words."""

from __future__ import annotations

from typing import Any, Callable

from selfrag.kb.embedder import Embedder
from selfrag.kb.filters import matches, validate_where
from selfrag.kb.bm25 import BM25Index
from selfrag.kb.store import ChromaStore
from programs.fusion import weighted_rrf
from programs.types import Passage


LANGUAGE_NAMES = {"zh": "Chinese", "ja": "Japanese", "ko": "Korean", "en": "English"}


def _check_k(k: int) -> None:
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")


class DenseRetriever:
    def __init__(self, store: ChromaStore, embedder: Embedder):
        self.store = store
        self.embedder = embedder

    @property
    def embedder_name(self) -> str:
        """The embedder whose cosine scale the passages' ``similarity`` is on."""
        return str(self.embedder.name)

    def query_warning(self, query: str) -> str | None:
        """A warning when ``query``'s language is not one the embedder serves (dense search is then
        near random); None otherwise. BM25 still matches its words."""
        from selfrag.kb.auto_embedder import serves
        from selfrag.kb.text import detect_language

        language = detect_language(query)
        if serves(self.embedder, language):
            return None
        return (f"the query looks {LANGUAGE_NAMES.get(language, language)}, which the embedder "
                f"{self.embedder.name!r} of collection {self.store.name!r} does not serve: dense search is "
                f"unreliable (keyword search still works); re-embed it with "
                f"`selfrag reindex --collection {self.store.name} --embedder use-m3`")

    def retrieve(self, query: str, k: int = 5, filters: dict[str, Any] | None = None) -> list[Passage]:
        _check_k(k)
        validate_where(filters)
        embed_queries = getattr(self.embedder, "embed_queries", None)  # e5 embeds queries with their prefix
        vector = (embed_queries([query]) if embed_queries is not None else self.embedder.embed([query]))[0]
        return self.store.query(vector, k, where=filters)


class BM25Retriever:
    """BM25 over an index kept consistent with the collection; ``index_provider`` returns the
    current index (rebuilding it when the collection changed). A search that fails on a damaged index
    (``IndexError``/``ValueError`` from the scorer) calls ``repair`` — which rebuilds the index from the
    collection — and is tried once more."""

    def __init__(self, index_provider: Callable[[], BM25Index], repair: Callable[[], BM25Index] | None = None):
        self._index = index_provider
        self._repair = repair

    def retrieve(self, query: str, k: int = 5, filters: dict[str, Any] | None = None) -> list[Passage]:
        _check_k(k)
        validate_where(filters)
        keep = (lambda meta: matches(filters, meta)) if filters else None
        try:
            return self._search(self._index(), query, k, keep)
        except (IndexError, ValueError):
            if self._repair is None:
                raise
            return self._search(self._repair(), query, k, keep)

    @staticmethod
    def _search(index: BM25Index, query: str, k: int, keep) -> list[Passage]:
        return [Passage(id=index.ids[i], text=index.texts[i], score=score, metadata=dict(index.metadatas[i]))
                for i, score in index.search(query, k, keep)]


class HybridRetriever:
    """Weighted RRF of a dense and a BM25 retriever, each asked for ``candidates`` passages.

    ``retrieve(..., dense_query=TEXT)`` embeds ``TEXT`` for the dense search (HyDE) while BM25 searches
    ``query``; without it both search ``query``."""

    def __init__(self, dense: DenseRetriever, bm25: BM25Retriever, dense_weight: float = 1.0,
                 bm25_weight: float = 1.0, rrf_k: int = 60, candidates: int = 20):
        if dense_weight < 0 or bm25_weight < 0 or dense_weight + bm25_weight == 0:
            raise ValueError(f"hybrid weights must be >= 0 and not both 0, got dense={dense_weight}, bm25={bm25_weight}")
        if rrf_k < 1:
            raise ValueError(f"rrf_k must be >= 1, got {rrf_k!r}")
        if candidates < 1:
            raise ValueError(f"candidates must be >= 1, got {candidates!r}")
        self.dense = dense
        self.bm25 = bm25
        self.weights = (float(dense_weight), float(bm25_weight))
        self.rrf_k = rrf_k
        self.candidates = candidates

    def query_warning(self, query: str) -> str | None:
        return self.dense.query_warning(query) if self.weights[0] > 0 else None

    @property
    def embedder_name(self) -> str | None:
        return self.dense.embedder_name if self.weights[0] > 0 else None

    def retrieve(self, query: str, k: int = 5, filters: dict[str, Any] | None = None, *,
                 dense_query: str | None = None) -> list[Passage]:
        _check_k(k)
        depth = max(k, self.candidates)
        dense = self.dense.retrieve(dense_query or query, depth, filters) if self.weights[0] > 0 else []
        sparse = self.bm25.retrieve(query, depth, filters) if self.weights[1] > 0 else []
        return weighted_rrf([dense, sparse], self.weights, k=self.rrf_k, limit=k)
