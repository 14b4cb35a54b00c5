"""The knowledge-base objects a program's retrieval strategies need, from its settings — for the
composition root (``selfrag.wiring``) to pass to a ``StrategyRetrieval`` program's constructor."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from programs.settings import ProgramSettings
from selfrag.kb.collection_info import collections_retriever, metadata_schema
from selfrag.kb.retriever import HybridRetriever
from selfrag.kb.split_query import SplitQueryHybridRetriever

if TYPE_CHECKING:  # pragma: no cover
    from selfrag.kb.knowledge_base import KnowledgeBase


def strategy_components(kb: "KnowledgeBase", program: ProgramSettings,
                        others: Sequence["KnowledgeBase"] = (), mode: str | None = None) -> dict[str, Any]:
    """``retriever`` (and ``metadata_schema`` for self-query) for ``program``'s strategies over ``kb``.

    - ``route_collections``: a ``CollectionsRetriever`` over ``kb`` and ``others`` (their descriptions
      and schemas; the router's choices), which supplies the self-query schema itself;
    - ``hyde`` over hybrid retrieval: the split retriever (dense embeds the hypothetical passage, BM25
      keeps the question);
    - ``self_query``: the collection's metadata schema.
    """
    if program.route_collections:
        return {"retriever": collections_retriever([kb, *others], mode)}
    retriever = kb.retriever(mode)
    if "hyde" in program.transforms and isinstance(retriever, HybridRetriever):
        retriever = SplitQueryHybridRetriever.of(retriever)
    out: dict[str, Any] = {"retriever": retriever}
    if program.self_query:
        out["metadata_schema"] = metadata_schema(kb.store)
    return out
