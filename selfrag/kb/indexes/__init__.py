"""Extra indexes stored beside a collection, each in a sibling collection ``<collection>.<suffix>``:

- ``multi-representation`` (``.children``): sentences, an LM summary and hypothetical questions per
  chunk, pointing to the chunk; retrieved by :class:`ParentDocumentRetriever` (children → parents);
- ``raptor`` (``.raptor``): the chunks plus a tree of LM summaries of clustered chunks; retrieved
  as a collapsed tree by that collection's own hybrid retriever (:class:`RaptorRetriever`: a filter
  lets a summary through only when every chunk under it passes).

Both builds are idempotent and cache their LM output by content (see each module).
``selfrag ingest --index KIND`` builds one (through ``selfrag.wiring.build_indexes``, which supplies
the LM steps); ``retrieval.index = KIND`` makes ``ask``, ``search``, ``eval`` and the service retrieve over it
(:func:`index_retriever`, through ``selfrag.wiring.build_retriever``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from selfrag.kb.indexes.common import IndexReport, sibling
from selfrag.kb.indexes.multi_representation import (LM_REPRESENTATIONS, REPRESENTATIONS, ParentDocumentRetriever,
                                                     build_multi_representation)
from selfrag.kb.indexes.raptor import RaptorRetriever, build_raptor, cluster_embeddings
from selfrag.kb.store import set_metadata

if TYPE_CHECKING:  # pragma: no cover
    from programs.types import Retriever
    from selfrag.kb.knowledge_base import KnowledgeBase

log = logging.getLogger(__name__)

INDEX_KINDS = ("multi-representation", "raptor")
INDEX_SUFFIXES = {"multi-representation": "children", "raptor": "raptor"}  # kind -> sibling collection suffix
BUILT_FROM = "built_from"  # an index collection's metadata: its parent collection's version when it was built

__all__ = ["INDEX_KINDS", "INDEX_SUFFIXES", "REPRESENTATIONS", "IndexReport", "ParentDocumentRetriever",
           "RaptorRetriever", "build_index", "build_multi_representation", "build_raptor", "cluster_embeddings",
           "delete_indexes", "index_fingerprint", "index_retriever", "needs_lm", "present_indexes", "stale_index",
           "stale_indexes"]


def _check(kind: str) -> None:
    if kind not in INDEX_KINDS:
        raise ValueError(f"unknown index {kind!r}; choose one of: {', '.join(INDEX_KINDS)}")


def needs_lm(kind: str, representations: "tuple[str, ...] | list[str]" = REPRESENTATIONS) -> bool:
    """Whether building index ``kind`` calls an LM (raptor always; multi-representation for a summary
    or questions)."""
    _check(kind)
    return kind == "raptor" or any(r in LM_REPRESENTATIONS for r in representations)


def index_fingerprint(kb: "KnowledgeBase", kind: str) -> str:
    """The version of index ``kind`` of ``kb`` (changes with any node added or removed)."""
    _check(kind)
    return sibling(kb, INDEX_SUFFIXES[kind]).fingerprint()


def build_index(kb: "KnowledgeBase", kind: str, *, summarise: Callable[[list[str]], str] | None = None,
                questions: Callable[[str], list[str]] | None = None, progress: bool = True,
                **options: Any) -> IndexReport:
    """Build or update index ``kind`` of ``kb``. ``summarise(texts) -> str`` and ``questions(text) ->
    list[str]`` are the LM steps (``programs.summaries.LMSummariser`` / ``LMQuestionWriter``);
    ``options`` go to the builder (raptor: ``max_levels``, ``max_clusters``, ``max_cluster_size``;
    multi-representation: ``representations``, ``max_questions``). ValueError for an unknown kind or
    a missing LM step."""
    _check(kind)
    if kb.is_empty():
        raise ValueError(f"collection {kb.name!r} is empty: ingest documents before building an index")
    if kind == "raptor" and summarise is None:
        raise ValueError("the raptor index needs a summariser")
    version = kb.fingerprint()  # what the index is built over (recorded once it is complete)
    if kind == "raptor":
        report = build_raptor(kb, summarise, progress=progress, **options)
    else:
        report = build_multi_representation(kb, summarise=summarise, questions=questions, progress=progress,
                                            **options)
    set_metadata(sibling(kb, INDEX_SUFFIXES[kind]).store.collection, {BUILT_FROM: version})
    return report


def stale_index(kb: "KnowledgeBase", kind: str) -> str | None:
    """Why index ``kind`` no longer matches ``kb`` — chunks were added, changed or removed since it was
    built (a RAPTOR index still holds copies of removed chunks; neither index holds new ones) —, as one
    line naming the command that rebuilds it; None when it matches."""
    _check(kind)
    built = (sibling(kb, INDEX_SUFFIXES[kind]).store.collection.metadata or {}).get(BUILT_FROM)
    if built == kb.fingerprint():
        return None
    return (f"the {kind} index of collection {kb.name!r} was built over other chunks than the collection holds now "
            f"(chunks were added, changed or removed since): rebuild it with "
            f"`selfrag ingest --index {kind} --collection {kb.name}`")


def stale_indexes(kb: "KnowledgeBase") -> list[str]:
    """:func:`stale_index` for each index built beside ``kb`` (none is created)."""
    from selfrag.kb.store import list_collections

    present = present_indexes(kb.name, dict(list_collections(kb.store.client)))
    return [why for kind in present if (why := stale_index(kb, kind))]


def present_indexes(name: str, collections: dict[str, int]) -> dict[str, int]:
    """The indexes of collection ``name`` among ``collections`` (name → chunk count): kind → nodes."""
    return {kind: collections[f"{name}.{suffix}"] for kind, suffix in INDEX_SUFFIXES.items()
            if f"{name}.{suffix}" in collections}


def delete_indexes(kb: "KnowledgeBase", kinds: "list[str] | dict[str, int]") -> None:
    """Drop indexes ``kinds`` of ``kb`` (their sibling collections and BM25 indexes): a deleted collection
    takes its indexes with it (a RAPTOR index holds copies of its chunks)."""
    for kind in kinds:
        _check(kind)
        sibling(kb, INDEX_SUFFIXES[kind]).delete_collection()


def index_retriever(kb: "KnowledgeBase", kind: str, mode: str | None = None) -> "Retriever":
    """The retriever over index ``kind`` of ``kb`` (``mode``: dense | bm25 | hybrid, default the KB's);
    ValueError when the index has not been built."""
    _check(kind)
    index = sibling(kb, INDEX_SUFFIXES[kind])
    if not index.store.exists() or index.is_empty():  # a read: an index never built is not created
        raise ValueError(f"no {kind} index for collection {kb.name!r}: "
                         f"run selfrag ingest --index {kind} --collection {kb.name} first")
    if why := stale_index(kb, kind):
        log.warning(why)
    if kind == "raptor":
        return RaptorRetriever(index.retriever(mode), index.store.count)
    return ParentDocumentRetriever(index.retriever(mode), kb.store)
