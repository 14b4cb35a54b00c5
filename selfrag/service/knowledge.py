"""The collections one service process serves, and the retriever that routes each question to one.

One program is wired per process; its retriever is a :class:`CollectionRetriever`, which reads the
collection of the question being answered — and that collection's retriever, resolved once per
question by ``retriever_of`` (``selfrag.wiring.build_retriever``: the chunks, or the index in
``retrieval.index``; ``/v1/search`` goes through it too) — from a context variable (set around the program run, and followed by the
program's worker threads). Knowledge bases are opened once per collection and share one embedder.

Several workers may share one Chroma server. Each keeps its own BM25 index of a collection, so before
every question or search the worker re-checks the index against the collection's ids
(:meth:`Collections.refresh`): a document another worker added, replaced or removed makes it rebuild.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from programs.retriever_calls import call_retriever
from programs.types import Passage
from selfrag.kb.knowledge_base import KnowledgeBase
from selfrag.kb.store import EmbedderMismatch, list_collections, validate_collection_name
from selfrag.service.errors import ServiceError
from selfrag.settings import AUTO_EMBEDDER, KBSettings, RetrievalSettings

log = logging.getLogger(__name__)

# (collection, its retriever) of the question being answered
_current: contextvars.ContextVar[tuple[str, Any] | None] = contextvars.ContextVar("selfrag_service_collection",
                                                                                 default=None)


class Collections:
    """Opens and caches one :class:`KnowledgeBase` per collection (same location, one embedder)."""

    def __init__(self, kb: KBSettings, retrieval: RetrievalSettings, embedder: Any = None,
                 retriever_of: Callable[[KnowledgeBase, str | None], Any] | None = None):
        """``retriever_of(kb, mode)``: the retriever questions and searches over a knowledge base use
        (``mode``: dense | bm25 | hybrid, None for ``retrieval.mode``; default: the KB's own; raises
        ValueError, e.g. :class:`~selfrag.errors.InputError`, when it cannot be built)."""
        from selfrag.kb.embedder import make_embedder

        self.kb_settings = kb
        self.retrieval = retrieval
        self.default = kb.collection
        if embedder is None and kb.embedding_model != AUTO_EMBEDDER:  # auto: each collection its own
            embedder = make_embedder(kb.embedding_model, kb.embed_batch_size)
        self.embedder = embedder
        self.retriever_of = retriever_of or (lambda kb, mode=None: kb.retriever(mode))
        self._kbs: dict[str, KnowledgeBase] = {}
        self._locks: dict[str, threading.RLock] = {}
        self._guard = threading.Lock()

    def _open(self, name: str) -> KnowledgeBase:
        from selfrag.kb.factory import build_knowledge_base

        return build_knowledge_base(self.kb_settings.model_copy(update={"collection": name}), self.retrieval,
                                    embedder=self.embedder)

    def get(self, name: str | None = None, create: bool = False) -> KnowledgeBase:
        """The knowledge base of ``name`` (the default collection when None). Unknown names are
        ``collection_not_found`` unless ``create``; malformed ones ``invalid_request``."""
        name = name or self.default
        try:
            validate_collection_name(name)
        except ValueError as exc:
            raise ServiceError("invalid_request", str(exc)) from None
        with self._guard:
            kb = self._kbs.get(name)
        if kb is not None:
            return kb
        if not create and name not in self.names():
            raise ServiceError("collection_not_found", f"no collection named {name!r}")
        kb = self._open(name)
        with self._guard:
            return self._kbs.setdefault(name, kb)

    def lock(self, name: str | None = None) -> threading.RLock:
        """Serialises the BM25 check/rebuild and writes of one collection inside this process."""
        with self._guard:
            return self._locks.setdefault(name or self.default, threading.RLock())

    def client(self) -> Any:
        return self.get(self.default, create=True).store.client

    def names(self) -> list[str]:
        return [name for name, _ in self.list()]

    def list(self) -> list[tuple[str, int]]:
        return list_collections(self.client())

    def ping(self) -> None:
        """Raise if the store cannot be reached."""
        self.client().heartbeat()

    def refresh(self, name: str | None = None) -> None:
        """Re-check the BM25 index of ``name`` against the collection's current ids on next use (a write
        by another worker leaves the chunk count unchanged when it replaces a document)."""
        kb = self.get(name)
        kb._invalidate()  # KnowledgeBase's own consistency check: a fingerprint of every id, rebuilt if stale

    def answering_retriever(self, name: str | None = None, mode: str | None = None) -> Any:
        """The retriever questions and searches over ``name`` use (``retriever_of``, in ``mode``):
        ``collection_not_found`` for an unknown collection, ``embedder_mismatch`` for one built with another
        embedder than ``kb.embedding_model`` forces, ``index_not_found`` when ``retrieval.index`` names an
        index it lacks."""
        kb = self.get(name)
        try:
            kb.store.collection  # opened now: a collection of another embedder is refused before any question runs
            return self.retriever_of(kb, mode)
        except EmbedderMismatch:
            raise  # answered as embedder_mismatch (service.errors), not as a missing index
        except ValueError as exc:
            raise ServiceError("index_not_found", str(exc)) from None

    @contextlib.contextmanager
    def using(self, name: str | None) -> Iterator[None]:
        """Route the retrieval of the code inside the block (and its worker threads) to ``name``, over
        its :meth:`answering_retriever` (resolved once, here)."""
        name = name or self.default
        token = _current.set((name, self.answering_retriever(name)))
        try:
            yield
        finally:
            _current.reset(token)

    def retriever(self) -> "CollectionRetriever":
        return CollectionRetriever(self)


class CollectionRetriever:
    """A :class:`programs.types.Retriever` over the collection the current question names."""

    def __init__(self, collections: Collections):
        self.collections = collections

    def __deepcopy__(self, memo):  # a handle on shared stores, not program state: copies share it
        return self

    def schema(self, collections: Any = None) -> dict[str, Any]:
        """The filterable metadata keys of the current question's collection (self-query), read now: a
        collection filled after start-up (the demo corpus, an upload) is seen as it is."""
        from selfrag.kb.collection_info import metadata_schema

        held = _current.get()
        return metadata_schema(self.collections.get(held[0] if held is not None else None).store)

    def retrieve(self, query: str, k: int = 5, filters: dict[str, Any] | None = None, *,
                 dense_query: str | None = None) -> list[Passage]:
        """``dense_query`` (HyDE's passage): embedded for the dense search while BM25 keeps ``query``, when
        the collection's retriever can split them (else the two searches are fused)."""
        held = _current.get()
        if held is None:  # outside a question: the default collection
            held = (self.collections.default, self.collections.answering_retriever())
        name, retriever = held
        with self.collections.lock(name):
            return call_retriever(retriever, query, k, filters, dense_query=dense_query)
