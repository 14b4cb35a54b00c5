"""The knowledge-base objects a program's retrieval strategies need, from its settings — for the
composition root (``selfrag.wiring``) to pass to a ``StrategyRetrieval`` program's constructor."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from programs.collection_routing import Collection, CollectionsRetriever
from programs.filter_grammar import FieldSpec
from programs.settings import ProgramSettings
from programs.types import Retriever
from selfrag.kb.collection_info import collections_retriever, metadata_schema

if TYPE_CHECKING:  # pragma: no cover
    from selfrag.kb.knowledge_base import KnowledgeBase


def strategy_components(kb: "KnowledgeBase", program: ProgramSettings,
                        others: Sequence["KnowledgeBase"] = (), mode: str | None = None,
                        retriever: Retriever | None = None,
                        retriever_of: Callable[["KnowledgeBase"], Retriever] | None = None) -> dict[str, Any]:
    """``retriever`` (and ``metadata_schema`` for self-query) for ``program``'s strategies over ``kb``;
    ``retriever``: the one to use for ``kb`` (e.g. over an index, re-scored; default ``kb.retriever(mode)``).

    - ``route_collections``: a ``CollectionsRetriever`` over ``kb`` (through ``retriever``) and ``others``
      (each through ``retriever_of(other)``, the same kind of retriever — index, re-scoring — as ``kb``'s;
      default ``other.retriever(mode)``), with their descriptions and schemas (the router's choices); it
      supplies the self-query schema itself;
    - ``self_query``: the collection's metadata schema.
    """
    retriever = retriever if retriever is not None else kb.retriever(mode)  # hybrid takes HyDE's dense_query
    if program.route_collections:
        other_retriever = retriever_of or (lambda other: other.retriever(mode))
        return {"retriever": collections_retriever(
            [kb, *others], mode, retriever_of=lambda c: retriever if c is kb else other_retriever(c))}
    out: dict[str, Any] = {"retriever": retriever}
    if program.self_query:
        out["metadata_schema"] = metadata_schema(kb.store)
    return out


def strategy_settings_set(program: ProgramSettings) -> list[str]:
    """The retrieval-strategy settings of ``program`` that differ from their defaults, by name."""
    default = ProgramSettings()
    return [f"program.{name}" for name in ("transforms", "route_collections", "self_query", "rerank")
            if getattr(program, name) != getattr(default, name)]


def reads_collection(program: ProgramSettings) -> bool:
    """Whether the components of ``program``'s strategies are read from the stored chunks and descriptions."""
    return program.route_collections or program.self_query


def standin_components(kb: "KnowledgeBase", program: ProgramSettings, retriever: Retriever) -> dict[str, Any]:
    """Components of the shape :func:`strategy_components` gives, read from nothing: for checking a program
    (its settings, its artifact) before the collection they describe is filled (the demo corpus on a first
    ``ask``); the real ones replace them once it is."""
    if program.route_collections:
        return {"retriever": CollectionsRetriever([Collection(kb.name, "", retriever)])}
    out: dict[str, Any] = {"retriever": retriever}
    if program.self_query:
        out["metadata_schema"] = {"source": FieldSpec("source", "str", ())}  # every stored chunk has a source
    return out
