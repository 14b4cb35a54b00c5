"""What a router and self-query need to know about a collection: its one-line description (kept in
the Chroma collection's metadata) and its filterable metadata keys (inferred from stored chunks)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import islice
from typing import TYPE_CHECKING, Any

from programs.collection_routing import Collection, CollectionsRetriever
from programs.filter_grammar import INTERNAL_KEYS, FieldSpec, infer_schema

from selfrag.kb.store import set_metadata

if TYPE_CHECKING:  # pragma: no cover
    from selfrag.kb.knowledge_base import KnowledgeBase
    from selfrag.kb.store import ChromaStore

DESCRIPTION_KEY = "description"
MAX_DESCRIPTION = 300
SCHEMA_SAMPLE = 2000
# Present on every chunk and meaningless as a condition (the source path, the chunker's language guess stay).
NOT_FILTERS = INTERNAL_KEYS | {"doc_id"}


def get_description(store: "ChromaStore") -> str:
    return str((store.collection.metadata or {}).get(DESCRIPTION_KEY, ""))


def clean_description(description: str) -> str:
    """``description`` as one line (whitespace collapsed); ValueError when longer than ``MAX_DESCRIPTION``."""
    text = " ".join(str(description).split())
    if len(text) > MAX_DESCRIPTION:
        raise ValueError(f"a collection description is one line of at most {MAX_DESCRIPTION} characters, "
                         f"got {len(text)}")
    return text


def set_description(store: "ChromaStore", description: str) -> str:
    """Store a one-line description on the collection (:func:`clean_description`)."""
    text = clean_description(description)
    set_metadata(store.collection, {DESCRIPTION_KEY: text})
    return text


@dataclass
class ListedCollection:
    """One line of ``selfrag collections``: a collection, its description and the indexes built beside it."""

    name: str
    chunks: int
    description: str = ""
    indexes: dict[str, int] = field(default_factory=dict)  # index kind -> nodes


def list_described(client: Any) -> list[ListedCollection]:
    """Every collection of ``client`` with its description; an index's sibling collection
    (``<name>.children``, ``<name>.raptor``) is listed under its parent's ``indexes``, not on its own."""
    from selfrag.kb.indexes import INDEX_SUFFIXES

    rows: dict[str, ListedCollection] = {}
    for col in client.list_collections():
        name = col if isinstance(col, str) else col.name
        got = client.get_collection(name)
        rows[name] = ListedCollection(name, int(got.count()), str((got.metadata or {}).get(DESCRIPTION_KEY, "")))
    for name in sorted(rows):
        for kind, suffix in INDEX_SUFFIXES.items():
            parent = name[: -len(suffix) - 1] if name.endswith("." + suffix) else None
            if parent in rows and name in rows:
                rows[parent].indexes[kind] = rows.pop(name).chunks
    return [rows[name] for name in sorted(rows)]


def metadata_schema(store: "ChromaStore", sample: int = SCHEMA_SAMPLE) -> dict[str, FieldSpec]:
    """The filterable metadata keys of a collection, from up to ``sample`` stored chunks."""
    metas = (meta for _id, _text, meta in store.iter_all(include_sources_only=True))
    return infer_schema(islice(metas, sample), exclude=NOT_FILTERS)


def collections_retriever(kbs: Iterable["KnowledgeBase"], mode: str | None = None,
                          retriever_of: Callable[["KnowledgeBase"], Any] | None = None) -> CollectionsRetriever:
    """One retriever over several knowledge bases, each with its description and schema (for routing),
    each searched through ``retriever_of(kb)`` (default ``kb.retriever(mode)``)."""
    search = retriever_of or (lambda kb: kb.retriever(mode))
    return CollectionsRetriever([Collection(kb.name, get_description(kb.store), search(kb),
                                            metadata_schema(kb.store)) for kb in kbs])
