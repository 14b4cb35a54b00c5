"""Re-embed a collection with another embedder (``selfrag reindex``), losing nothing if interrupted.

Every chunk (id, text, metadata unchanged) is embedded again into a new collection ``<name>.reindex-new``;
only when it holds every chunk is it swapped in: ``<name>`` is renamed ``<name>.reindex-old``, the new
one renamed ``<name>``, the old one deleted. A run that finds a leftover new collection deletes it and
starts over; one that finds ``<name>`` missing but ``<name>.reindex-old`` present (killed between the two
renames) renames it back first. The BM25 index depends only on the ids and texts, which do not change:
its fingerprint still matches, so it stays valid without a rebuild.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from selfrag.errors import InputError
from selfrag.kb.store import ChromaStore, ids_fingerprint, set_metadata, validate_collection_name

if TYPE_CHECKING:  # pragma: no cover
    from selfrag.kb.embedder import Embedder

log = logging.getLogger(__name__)

NEW_SUFFIX = ".reindex-new"
OLD_SUFFIX = ".reindex-old"


@dataclass
class ReindexReport:
    collection: str
    old_embedder: str
    new_embedder: str
    chunks: int = 0
    seconds: float = 0.0
    recovered: bool = False  # a previous run had been stopped between its two renames


def _names(client: Any) -> set[str]:
    return {c if isinstance(c, str) else c.name for c in client.list_collections()}


def recover(client: Any, name: str) -> bool:
    """Undo what an interrupted reindex of ``name`` left: rename ``<name>.reindex-old`` back when ``name``
    is missing, delete it when ``name`` is there (killed after the swap, before the delete: ``name`` is the
    new, complete collection), delete a leftover ``<name>.reindex-new``. True when renamed back."""
    names = _names(client)
    recovered = False
    if name + OLD_SUFFIX in names:
        if name in names and client.get_collection(name).count() == 0 < client.get_collection(name + OLD_SUFFIX).count():
            # killed between the renames, then ``name`` re-created empty by a read: the old copy is the data
            client.delete_collection(name)
            names.discard(name)
        if name not in names:
            client.get_collection(name + OLD_SUFFIX).modify(name=name)
            recovered = True
            log.warning("collection %s restored from an interrupted reindex", name)
        else:  # killed after the swap: ``name`` is the new, complete collection
            client.delete_collection(name + OLD_SUFFIX)
            log.warning("collection %s: the old copy an interrupted reindex left was deleted", name)
    if name + NEW_SUFFIX in names:
        client.delete_collection(name + NEW_SUFFIX)
    return recovered


def reindex(client: Any, name: str, embedder: "Embedder", batch_size: int = 256,
            progress: Callable[[int, int], None] | None = None) -> ReindexReport:
    """Re-embed collection ``name`` with ``embedder`` and swap it in (see the module). InputError for a
    missing collection or a name too long for the temporary names."""
    validate_collection_name(name + NEW_SUFFIX)
    t0 = time.perf_counter()
    recovered = recover(client, name)
    if name not in _names(client):
        raise InputError(f"no collection named {name!r}; nothing to reindex")
    old = ChromaStore(client, name, "auto")
    report = ReindexReport(name, old.recorded_embedder() or "none (empty)", embedder.name, recovered=recovered)
    keep = {k: v for k, v in (old.collection.metadata or {}).items() if not k.startswith("hnsw:") and k != "embedder"}
    new = ChromaStore(client, name + NEW_SUFFIX, embedder.name)
    if keep:
        set_metadata(new.collection, keep)  # the description and any other collection metadata
    total = old.count()
    batch: list[tuple[str, str, dict]] = []

    def flush() -> None:
        new.add([b[0] for b in batch], [b[1] for b in batch], embedder.embed([b[1] for b in batch]),
                [b[2] for b in batch])
        report.chunks += len(batch)
        batch.clear()
        if progress is not None:
            progress(report.chunks, total)

    for cid, text, meta in old.iter_all():
        batch.append((cid, text, meta))
        if len(batch) >= batch_size:
            flush()
    if batch:
        flush()
    if ids_fingerprint(new.all_ids()) != ids_fingerprint(old.all_ids()):
        client.delete_collection(name + NEW_SUFFIX)
        raise InputError(f"collection {name!r} changed while it was being re-embedded; run reindex again")
    client.get_collection(name).modify(name=name + OLD_SUFFIX)
    client.get_collection(name + NEW_SUFFIX).modify(name=name)
    client.delete_collection(name + OLD_SUFFIX)
    report.seconds = time.perf_counter() - t0
    log.info("re-embedded %s: %d chunks, %s → %s, %.1fs", name, report.chunks, report.old_embedder,
             embedder.name, report.seconds)
    return report
