"""Chroma storage: a persistent client by default, an HTTP client for a Chroma server.

Embeddings are always computed by our own embedder and passed in; Chroma's default embedding
function (which downloads a model) is never used.
"""

from __future__ import annotations

import hashlib
import math
import re
import uuid
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from programs.types import Passage
from selfrag.errors import InputError, SelfRAGError
from selfrag.settings import AUTO_EMBEDDER, PACKAGED_EMBEDDER

_NAME_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]{1,510}[a-zA-Z0-9]$")
PAGE = 5000
# A collection's metadata: a token replaced whenever stored chunks get new metadata under the same ids
# (a re-ingested file whose title or fields changed), so a version built from the ids alone changes too.
REVISION = "chunks_revision"


def validate_collection_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name) or ".." in name:
        raise InputError(
            f"invalid collection name {name!r}: use 3-512 characters from [a-zA-Z0-9._-], "
            "starting and ending with a letter or digit"
        )
    return name


def make_client(server: str = "persistent", path: str | Path = ".selfrag/chroma",
                host: str = "127.0.0.1", port: int = 8000) -> Any:
    """A Chroma client with anonymised telemetry off."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    settings = ChromaSettings(anonymized_telemetry=False)
    if server == "persistent":
        Path(path).mkdir(parents=True, exist_ok=True)
        return chromadb.PersistentClient(path=str(path), settings=settings)
    if server == "http":
        try:
            return chromadb.HttpClient(host=host, port=int(port), settings=settings)
        except ValueError as exc:  # chromadb's way of saying the server does not answer
            raise SelfRAGError(f"cannot reach the Chroma server at {host}:{port} (kb.host, kb.port): {exc}") from exc
    raise ValueError(f"kb.server must be 'persistent' or 'http', got {server!r}")


class LazyClient:
    """A persistent Chroma client made on its first use, so that assembling a knowledge base creates no
    folder or database: a command refused later (a bad artifact, a missing model) leaves no store behind."""

    def __init__(self, path: str | Path):
        self._path, self._client = path, None

    def __getattr__(self, name: str) -> Any:
        if self._client is None:
            self._client = make_client("persistent", self._path)
        return getattr(self._client, name)

    def list_collections(self) -> Any:
        """No collections while the folder does not exist (listing them creates none)."""
        if self._client is None and not Path(self._path).exists():
            return []
        return self.__getattr__("list_collections")()


def _valid_text(text: str) -> str:
    """``text`` with lone surrogates (which Chroma cannot store) replaced by U+FFFD."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def clean_metadata(meta: dict[str, Any]) -> dict[str, Any]:
    """Chroma accepts str/int/float/bool values under non-empty keys not starting with ``$``, ``#`` or
    ``chroma:``: drop None values and refused keys, stringify the rest, and replace lone surrogates — and
    give numbers the form Chroma keeps (a NaN is dropped, an int beyond 64 bits is a float), so stored
    metadata compares equal to the metadata it was written from."""
    import json

    from selfrag.kb.loaders import bad_metadata_key

    out: dict[str, Any] = {}
    for key, value in meta.items():
        key = _valid_text(str(key))
        if value is None or bad_metadata_key(key) or (isinstance(value, float) and math.isnan(value)):
            continue
        if isinstance(value, str):
            out[key] = _valid_text(value)
        elif isinstance(value, int) and not isinstance(value, bool) and not -2**63 <= value < 2**63:
            out[key] = float(value)
        elif isinstance(value, (int, float, bool)):
            out[key] = value
        else:
            out[key] = _valid_text(json.dumps(value, ensure_ascii=False, default=str))
    return out


def versioned(ids: Sequence[str], revision: str) -> str:
    """The version of chunks ``ids`` at store revision ``revision`` (the ids' hash alone before any)."""
    return f"{ids_fingerprint(ids)}:{revision}" if revision else ids_fingerprint(ids)


def collection_names(client: Any) -> set[str]:
    return {c if isinstance(c, str) else c.name for c in client.list_collections()}


def collection_version(client: Any, name: str) -> str:
    """What a cached answer read from collection ``name``: its recorded embedder and :meth:`ChromaStore.version`;
    "" when there is no such collection (none is created)."""
    if name not in collection_names(client):
        return ""
    store = ChromaStore(client, name, AUTO_EMBEDDER)
    return f"{store.recorded_embedder()}:{store.version()}"


def ids_fingerprint(ids: Sequence[str]) -> str:
    h = hashlib.sha256()
    for i in sorted(ids):
        h.update(i.encode("utf-8"))
        h.update(b"\n")
    return f"{len(ids)}:{h.hexdigest()}"


class EmbedderMismatch(InputError):
    """A collection opened with another embedder than the one its chunks were embedded with."""


class ChromaStore:
    """One Chroma collection holding chunks (ids, texts, embeddings, metadata). The collection records
    the embedder its chunks were embedded with (``embedder`` in its metadata, set with the first
    chunks); opening it with another one is refused (``embedder_name`` ``"auto"`` accepts the record)."""

    def __init__(self, client: Any, collection: str, embedder_name: str):
        self.client = client
        self.name = validate_collection_name(collection)
        self.embedder_name = embedder_name
        self._collection: Any = None
        self._recorded = False

    @property
    def collection(self) -> Any:
        if self._collection is None:
            meta = {"hnsw:space": "cosine"}
            if self.embedder_name != AUTO_EMBEDDER:
                meta["embedder"] = self.embedder_name
            col = self.client.get_or_create_collection(self.name, embedding_function=None, metadata=meta)
            stored = (col.metadata or {}).get("embedder")
            if stored and self.embedder_name != AUTO_EMBEDDER and stored != self.embedder_name and col.count() > 0:
                raise EmbedderMismatch(mismatch_message(self.name, stored, self.embedder_name))
            self._collection = col
        return self._collection

    def recorded_embedder(self) -> str | None:
        """The embedder the stored chunks were embedded with; None while the collection is empty.
        Chunks stored before collections recorded it were embedded by the packaged MiniLM."""
        col = self.collection
        if col.count() == 0:
            return None
        return str((col.metadata or {}).get("embedder") or PACKAGED_EMBEDDER)

    def _record_embedder(self) -> None:
        """With the first chunks of an empty collection, record ``embedder_name`` (an empty collection may
        have been created by a read, or emptied, under another name)."""
        if self._recorded:
            return
        col = self.collection
        if col.count() == 0 and (col.metadata or {}).get("embedder") != self.embedder_name:
            if self.embedder_name == AUTO_EMBEDDER:
                raise ValueError("an 'auto' store must be given its embedder before chunks are written")
            set_metadata(col, {"embedder": self.embedder_name})
        self._recorded = True

    def count(self) -> int:
        return int(self.collection.count())

    def exists(self) -> bool:
        """Whether the collection exists (asking creates nothing; every other access creates it)."""
        return self._collection is not None or self.name in collection_names(self.client)

    def add(self, ids: Sequence[str], texts: Sequence[str], embeddings: np.ndarray,
            metadatas: Sequence[dict[str, Any]]) -> None:
        if not ids:
            return
        self._record_embedder()
        self.collection.upsert(ids=list(ids), documents=[_valid_text(t) for t in texts],
                               embeddings=np.asarray(embeddings),
                               metadatas=[clean_metadata(m) for m in metadatas])

    def existing(self, ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        ids = list(ids)
        for s in range(0, len(ids), PAGE):
            found.update(self.collection.get(ids=ids[s:s + PAGE], include=[])["ids"])
        return found

    def ids_where(self, where: dict[str, Any] | None) -> list[str]:
        out: list[str] = []
        offset = 0
        while True:
            got = self.collection.get(where=where or None, include=[], limit=PAGE * 4, offset=offset)["ids"]
            out.extend(got)
            if len(got) < PAGE * 4:
                return out
            offset += len(got)

    def get(self, ids: Sequence[str]) -> dict[str, tuple[str, dict[str, Any]]]:
        """Text and metadata of the chunks with these ids (missing ids are left out); the service opens
        a cited passage with it."""
        if not ids:
            return {}
        got = self.collection.get(ids=list(ids), include=["documents", "metadatas"])
        return {i: (t or "", dict(m or {})) for i, t, m in zip(got["ids"], got["documents"], got["metadatas"])}

    def metadatas(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The stored metadata of the chunks with these ids (missing ids are left out), paged."""
        out: dict[str, dict[str, Any]] = {}
        ids = list(ids)
        for s in range(0, len(ids), PAGE):
            got = self.collection.get(ids=ids[s:s + PAGE], include=["metadatas"])
            out.update((i, dict(m or {})) for i, m in zip(got["ids"], got["metadatas"] or [{}] * len(got["ids"])))
        return out

    def replace_metadata(self, ids: Sequence[str], metadatas: Sequence[dict[str, Any]]) -> None:
        """Give stored chunks new metadata (whole: a field it lacks is removed), keeping their texts and
        embeddings (nothing is re-embedded); then renew the collection's :data:`REVISION`."""
        ids = list(ids)
        if not ids:
            return
        new = {i: clean_metadata(m) for i, m in zip(ids, metadatas)}
        for s in range(0, len(ids), PAGE):
            stored = self.metadatas(ids[s:s + PAGE])
            # Chroma merges an update into the stored metadata; a None value removes a key
            self.collection.update(ids=list(stored), metadatas=[
                {**{k: None for k in old if k not in new[i]}, **new[i]} for i, old in stored.items()])
        set_metadata(self.client.get_collection(self.name), {REVISION: uuid.uuid4().hex})
        self._collection = None  # its cached metadata lacks the new revision

    def version(self) -> str:
        """The chunks' version: a hash of their ids (content-derived) with the :data:`REVISION`, read first
        (a write landing between the two readings makes the version stale, never newer than the chunks)."""
        revision = self.revision()
        return versioned(self.all_ids(), revision)

    def revision(self) -> str:
        """The collection's :data:`REVISION` as stored now ("" until chunk metadata was ever replaced)."""
        self.collection  # noqa: B018 - created (and the embedder checked) as every access does
        return str((self.client.get_collection(self.name).metadata or {}).get(REVISION, ""))

    def all_ids(self) -> list[str]:
        return self.ids_where(None)

    def iter_all(self, include_sources_only: bool = False) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """Yield ``(id, text, metadata)`` for every chunk, paged."""
        offset = 0
        include = ["metadatas"] if include_sources_only else ["documents", "metadatas"]
        while True:
            got = self.collection.get(include=include, limit=PAGE, offset=offset)
            docs = got.get("documents") or [""] * len(got["ids"])
            for i, t, m in zip(got["ids"], docs, got["metadatas"] or [{}] * len(got["ids"])):
                yield i, t or "", dict(m or {})
            if len(got["ids"]) < PAGE:
                return
            offset += len(got["ids"])

    def delete(self, ids: Sequence[str]) -> None:
        ids = list(ids)
        for s in range(0, len(ids), PAGE):
            self.collection.delete(ids=ids[s:s + PAGE])

    def drop(self) -> None:
        """Delete the whole collection (the next access creates it again, empty)."""
        self.client.delete_collection(self.name)
        self._collection = None
        self._recorded = False

    def query(self, embedding: np.ndarray, k: int, where: dict[str, Any] | None = None) -> list[Passage]:
        if k < 1:
            return []
        res = self.collection.query(
            query_embeddings=np.asarray(embedding, dtype=np.float32).reshape(1, -1), n_results=k,
            where=where or None, include=["documents", "metadatas", "distances"],
        )
        ids = res["ids"][0] if res["ids"] else []
        return [
            Passage(id=i, text=t or "", score=sim, metadata=dict(m or {}), similarity=sim)
            for i, t, m, sim in zip(ids, res["documents"][0], res["metadatas"][0],
                                    (1.0 - float(d) for d in res["distances"][0]))
        ]


def mismatch_message(collection: str, stored: str, configured: str) -> str:
    return (f"collection {collection!r} was built with embedder {stored!r}, but the configured embedder is "
            f"{configured!r}; re-embed it with `selfrag reindex --collection {collection} --embedder {configured}`, "
            f"or use it as it is with kb.embedding_model = \"auto\" (or {stored!r})")


def set_metadata(col: Any, update: dict[str, Any]) -> None:
    """Merge ``update`` into a Chroma collection's metadata (Chroma refuses ``hnsw:*`` keys in a modify:
    the distance function is fixed at creation)."""
    meta = {k: v for k, v in (col.metadata or {}).items() if not k.startswith("hnsw:")}
    meta.update(update)
    col.modify(metadata=meta)


def list_collections(client: Any) -> list[tuple[str, int]]:
    out = []
    for col in client.list_collections():
        name = col if isinstance(col, str) else col.name
        out.append((name, int(client.get_collection(name).count())))
    return sorted(out)
