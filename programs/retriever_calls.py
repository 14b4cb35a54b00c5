"""Optional retriever capabilities beyond ``retrieve(query, k, filters)``, and the one call that uses them.

Two keyword arguments extend the :class:`~programs.types.Retriever` protocol; a retriever declares
support simply by accepting them:

- ``dense_query``: the text to embed for dense search while keyword (BM25) search keeps ``query`` —
  what HyDE needs (``selfrag.kb.retriever.HybridRetriever`` and the parent-document retriever take it);
- ``collections``: the collection names to search (:class:`programs.collection_routing.CollectionsRetriever`).

one optional method, ``query_warning(query) -> str | None`` (:func:`query_warning`): what is wrong
with searching ``query`` there (a language the collection's embedder does not serve), for the trace;
and one optional attribute, ``embedder_name`` (:func:`retriever_embedder`): the embedder whose cosine
scale the passages' ``similarity`` is on (a compiled similarity threshold holds only on that scale).

:func:`call_retriever` passes each only to a retriever that accepts it, so every strategy works over
any retriever (a plain one ignores routing; HyDE then fuses a search for the question with one for
the hypothetical passage).
"""

from __future__ import annotations

import inspect
from typing import Any, Protocol, runtime_checkable

from programs.fusion import weighted_rrf
from programs.types import Passage


@runtime_checkable
class DenseQueryRetriever(Protocol):
    """A retriever whose dense search can embed a different text than its keyword search."""

    def retrieve(self, query: str, k: int = 5, filters: dict[str, Any] | None = None, *,
                 dense_query: str | None = None) -> list[Passage]: ...


def accepts(retriever: Any, keyword: str) -> bool:
    """Whether ``retriever.retrieve`` takes the keyword argument ``keyword`` (or ``**kwargs``)."""
    try:
        params = inspect.signature(retriever.retrieve).parameters.values()
    except (TypeError, ValueError, AttributeError):
        return False
    return any(p.name == keyword or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def call_retriever(retriever: Any, query: str, k: int, filters: dict[str, Any] | None = None, *,
                   dense_query: str | None = None, collections: list[str] | None = None) -> list[Passage]:
    """``retriever.retrieve(query, k, filters)`` plus the optional arguments it accepts; at most ``k``
    passages. A ``dense_query`` the retriever cannot take is searched on its own and fused (RRF)
    with the search for ``query``."""
    kwargs: dict[str, Any] = {}
    if collections is not None and accepts(retriever, "collections"):
        kwargs["collections"] = collections
    if filters is not None:
        kwargs["filters"] = filters
    if dense_query is None:
        return list(retriever.retrieve(query, k=k, **kwargs))[:k]
    if accepts(retriever, "dense_query"):
        return list(retriever.retrieve(query, k=k, dense_query=dense_query, **kwargs))[:k]
    both = [list(retriever.retrieve(text, k=k, **kwargs))[:k] for text in (query, dense_query)]
    return weighted_rrf(both, limit=k)


def query_warning(retriever: Any, query: str) -> str | None:
    """What ``retriever`` says is wrong with searching ``query`` (its optional ``query_warning(query)``,
    e.g. a language its embedder does not serve); None when it says nothing or cannot say."""
    check = getattr(retriever, "query_warning", None)
    if not callable(check):
        return None
    try:
        warning = check(query)
    except Exception:  # noqa: BLE001 - a warning never costs the answer
        return None
    return str(warning) if warning else None


def retriever_embedder(retriever: Any) -> str | None:
    """``retriever.embedder_name`` when it declares one (None: unknown, e.g. a wrapper or a fake)."""
    name = getattr(retriever, "embedder_name", None)
    return name if isinstance(name, str) and name else None
