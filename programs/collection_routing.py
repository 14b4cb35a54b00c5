"""Several collections behind one retriever, each with a one-line description a router can read.

:class:`CollectionsRetriever` searches the named collections (all by default) and fuses their
rankings (RRF); :func:`parse_route` checks an LM's choice of collections against the known names
(unknown names dropped and reported, never an error). The routing LM step itself is the program's
(``RouteCollections`` in :mod:`programs.retrieval_pipeline`), so it is compiled with the program.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from programs.filter_grammar import FieldSpec
from programs.fusion import RRF_K, weighted_rrf
from programs.passages import quote_safe
from programs.retriever_calls import call_retriever
from programs.types import Passage, Retriever


@dataclass(frozen=True)
class Collection:
    """One searchable collection: its name, a one-line description and its retriever."""

    name: str
    description: str
    retriever: Retriever
    schema: Mapping[str, FieldSpec] = field(default_factory=dict)  # filterable metadata keys (self-query)


class CollectionsRetriever:
    """Retrieval over several collections: ``retrieve(query, k, filters, collections=None, dense_query=None)``.

    Every passage gets ``metadata["collection"]`` (its collection's name, unless it already has one).
    """

    def __init__(self, collections: Sequence[Collection], rrf_k: int = RRF_K):
        if not collections:
            raise ValueError("CollectionsRetriever needs at least one collection")
        names = [c.name for c in collections]
        if len(set(names)) != len(names):
            raise ValueError(f"collection names must be unique, got {names}")
        for c in collections:
            if not isinstance(c.retriever, Retriever):
                raise TypeError(f"collection {c.name!r}: retriever must implement retrieve(query, k, filters)")
        self.collections = {c.name: c for c in collections}
        self.rrf_k = rrf_k

    @property
    def names(self) -> list[str]:
        return list(self.collections)

    def describe(self) -> str:
        """``name: «description»``, one per line, as the router sees them (a description is quoted data)."""
        return "\n".join(f"{c.name}: «{quote_safe(c.description)}»" if c.description else f"{c.name}: (no description)"
                         for c in self.collections.values())

    def schema(self, names: Iterable[str] | None = None) -> dict[str, FieldSpec]:
        """The filterable keys of the named collections (all by default); a key typed differently in
        two collections is left out."""
        merged: dict[str, FieldSpec] = {}
        clash: set[str] = set()
        for name in (self.names if names is None else names):
            for key, spec in self.collections[name].schema.items():
                if key in merged and merged[key].type != spec.type:
                    clash.add(key)
                merged.setdefault(key, spec)
        return {k: v for k, v in merged.items() if k not in clash}

    def retrieve(self, query: str, k: int = 5, filters: dict[str, Any] | None = None, *,
                 collections: list[str] | None = None, dense_query: str | None = None) -> list[Passage]:
        chosen = self.names if collections is None else [n for n in collections if n in self.collections]
        rankings = []
        for name in chosen:
            got = call_retriever(self.collections[name].retriever, query, k, filters, dense_query=dense_query)
            rankings.append([p if "collection" in p.metadata
                             else p.model_copy(update={"metadata": {**p.metadata, "collection": name}})
                             for p in got])
        if len(rankings) == 1:
            return rankings[0][:k]
        return weighted_rrf(rankings, k=self.rrf_k, limit=k)


NO_COLLECTION = frozenset({"none", "no collection", ""})


def parse_route(chosen: Iterable[Any] | None, known: Sequence[str], max_routes: int) -> tuple[list[str], list[str]]:
    """The known collection names in ``chosen`` (order kept, duplicates and case differences folded,
    at most ``max_routes``) and the unknown ones; "none" (the signature's word for no collection) is
    neither."""
    by_lower = {name.lower(): name for name in known}
    kept: list[str] = []
    unknown: list[str] = []
    for item in list(chosen or []):
        said = str(item).strip().lower()
        if said in NO_COLLECTION and said not in by_lower:  # "none": the router's way to choose no collection
            continue
        name = by_lower.get(said)
        if name is None:
            unknown.append(str(item)[:80])
        elif name not in kept and len(kept) < max_routes:
            kept.append(name)
    return kept, unknown
