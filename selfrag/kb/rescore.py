"""A retriever whose passages' ``similarity`` is re-scored by another embedder.

The similarity gate and the answer check's score read each retrieved passage's cosine with the question
(:attr:`programs.types.Passage.similarity`) on the scale of one embedder. The embedder that retrieves best
or fastest need not be the one whose cosine best tells a passage that answers from one that is only on
topic: on ClapNQ, the three passages MiniLM retrieves, re-scored by multilingual-e5-small, separate
answerable from unanswerable questions better than MiniLM's own cosine (``bench/bench_retrieval_signals.py``).
:class:`RescoredRetriever` keeps the inner retriever's passages and order and replaces only their
``similarity``; it declares the re-scoring embedder as its ``embedder_name``, so a compiled threshold holds
only on that scale (:func:`programs.thresholds.similarity_gate`). Passage vectors are cached by id and text.
With ``over`` (a set of embedder names) it re-scores only when the inner retriever's embedder is one of them
and otherwise passes the inner passages and ``embedder_name`` through: ``retrieval.similarity_embedder =
"auto"`` re-scores the collections of the bundled embedders (MiniLM, use-m3) only.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable

import numpy as np

from selfrag.kb.embedder import Embedder
from selfrag.kb.embedder_support import query_vectors
from programs.retriever_calls import call_retriever, query_warning, retriever_embedder
from programs.types import Passage


class RescoredRetriever:
    def __init__(self, inner: Any, embedder: Embedder | Callable[[], Embedder], cache_size: int = 4096,
                 over: frozenset[str] | None = None, name: str | None = None):
        if cache_size < 0:
            raise ValueError(f"cache_size must be >= 0, got {cache_size!r}")
        self.inner = inner
        self._embedder = embedder  # or a factory, called at the first re-scoring (a model load takes seconds)
        self._name = name  # the factory's embedder name, so declaring the scale does not load the model
        self.cache_size = cache_size
        self.over = over
        self._cache: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()

    @property
    def embedder(self) -> Embedder:
        if callable(self._embedder) and not hasattr(self._embedder, "embed"):
            self._embedder = self._embedder()
        return self._embedder

    @property
    def active(self) -> bool:
        """Whether this retriever re-scores (always without ``over``; else over an inner embedder in it)."""
        return self.over is None or retriever_embedder(self.inner) in self.over

    @property
    def embedder_name(self) -> str | None:
        if not self.active:
            return retriever_embedder(self.inner)
        loaded = hasattr(self._embedder, "embed")
        return str(self.embedder.name) if loaded or not self._name else self._name  # no load just for the name

    def query_warning(self, query: str) -> str | None:
        return query_warning(self.inner, query)

    def retrieve(self, query: str, k: int = 5, filters: dict[str, Any] | None = None,
                 **kwargs: Any) -> list[Passage]:
        passages = call_retriever(self.inner, query, k, filters, **kwargs)
        if not passages or not self.active:
            return passages
        q = np.asarray(query_vectors(self.embedder, [query])[0], dtype=float)
        vectors = self._vectors(passages)
        q = q / (np.linalg.norm(q) or 1.0)
        return [p.model_copy(update={"similarity": float(v @ q / (np.linalg.norm(v) or 1.0))})
                for p, v in zip(passages, vectors)]

    def _vectors(self, passages: list[Passage]) -> list[np.ndarray]:
        keys = [(p.id, p.text) for p in passages]
        missing = list(dict.fromkeys(key for key in keys if key not in self._cache))
        if missing:
            for key, vector in zip(missing, self.embedder.embed([text for _, text in missing])):
                self._cache[key] = np.asarray(vector, dtype=float)
        out = []
        for key in keys:
            self._cache.move_to_end(key)
            out.append(self._cache[key])
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return out
