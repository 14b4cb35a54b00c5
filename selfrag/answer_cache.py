"""An on-disk answer cache: a repeated question costs 0 LM calls until the collection, the compiled
artifact or the settings change.

Entries are keyed by (normalised question, collection fingerprint, artifact hash, settings hash) and
hold the serialised :class:`programs.types.RAGResult`. Storage is one sqlite3 file (stdlib; each
write is a transaction, so a crash never leaves half an entry), shared by threads through one
connection under a lock, bounded to ``max_entries`` with least-recently-used eviction. A file that
is not a readable cache is moved aside with a warning and the cache starts empty; an entry that no
longer parses as a ``RAGResult`` is dropped and counts as a miss.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
import time
import unicodedata
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ValidationError

from programs.types import RAGResult, TraceStep, Usage

logger = logging.getLogger(__name__)

CACHE_FILENAME = "answer_cache.sqlite3"
_FORMAT = "1"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS answers (
    key TEXT PRIMARY KEY, question TEXT NOT NULL, collection TEXT NOT NULL, artifact TEXT NOT NULL,
    settings TEXT NOT NULL, result TEXT NOT NULL, created REAL NOT NULL, used INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS answers_used ON answers (used);
"""


def normalise_question(question: str) -> str:
    """NFKC, case-folded, single-spaced, without trailing sentence punctuation: "What is X?" = "what is x"."""
    text = " ".join(unicodedata.normalize("NFKC", question).casefold().split())
    return text.rstrip(" ?!.。？！")


def fingerprint(value: Any) -> str:
    """A short stable hash of a settings object, dict or string (canonical JSON, sha256, 16 hex)."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class CacheKey(NamedTuple):
    question: str  # as asked; normalised in :meth:`digest`
    collection: str  # the collection's version / content fingerprint
    artifact: str  # hash of the compiled artifact ("" when none)
    settings: str  # :func:`fingerprint` of the settings that shape the answer

    def digest(self) -> str:
        parts = [normalise_question(self.question), self.collection, self.artifact, self.settings]
        return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode("utf-8")).hexdigest()


def cacheable(result: RAGResult) -> bool:
    """Only clean runs are cached: a result with a failed step (LM timeout, web error, store error)
    may come out differently next time, so caching it would make a transient failure permanent."""
    return all(step.ok for step in result.trace)


class AnswerCache:
    """``get`` / ``put`` / ``invalidate`` over one sqlite file (e.g. ``<kb folder>/answer_cache.sqlite3``)."""

    def __init__(self, path: str | Path, max_entries: int = 1000):
        if max_entries < 1:
            raise ValueError(f"max_entries must be >= 1, got {max_entries}")
        self.path = Path(path)
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._conn = self._open()

    # ------------------------------------------------------------------ storage
    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=10.0, check_same_thread=False, isolation_level=None)
        try:
            conn.executescript(_SCHEMA)
            row = conn.execute("SELECT value FROM meta WHERE name = 'format'").fetchone()
            if row is None:
                conn.execute("INSERT INTO meta (name, value) VALUES ('format', ?)", (_FORMAT,))
            elif row[0] != _FORMAT:
                raise sqlite3.DatabaseError(f"cache format {row[0]!r}, expected {_FORMAT!r}")
        except BaseException:
            conn.close()
            raise
        return conn

    def _open(self) -> sqlite3.Connection:
        try:
            return self._connect()
        except sqlite3.DatabaseError as exc:
            aside = self.path.with_name(self.path.name + ".corrupt")
            logger.warning("answer cache %s is unreadable (%s); moved to %s, starting empty", self.path, exc, aside)
            self.path.replace(aside)
            return self._connect()

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    # ------------------------------------------------------------------ API
    def get(self, key: CacheKey) -> RAGResult | None:
        """The cached result for ``key`` (usage zeroed, trace = one ``answer_cache`` hit step), or None.
        A storage error is logged and reads as a miss: the cache never fails a question."""
        try:
            return self._get(key)
        except sqlite3.DatabaseError as exc:
            logger.warning("answer cache %s read failed (%s); treated as a miss", self.path, exc)
            return None

    def _get(self, key: CacheKey) -> RAGResult | None:
        digest = key.digest()
        start = time.perf_counter()
        with self._lock:
            row = self._conn.execute("SELECT result, created FROM answers WHERE key = ?", (digest,)).fetchone()
            if row is None:
                return None
            try:
                cached = RAGResult.model_validate_json(row[0])
            except ValidationError as exc:
                logger.warning("answer cache entry %s no longer parses (%s); dropped", digest[:12], exc.errors()[0])
                self._conn.execute("DELETE FROM answers WHERE key = ?", (digest,))
                return None
            self._conn.execute("UPDATE answers SET used = (SELECT COALESCE(MAX(used), 0) + 1 FROM answers) "
                               "WHERE key = ?", (digest,))
        hit = TraceStep(
            step="answer_cache",
            inputs={"question": normalise_question(key.question)[:120], "collection": key.collection,
                    "artifact": key.artifact, "settings": key.settings},
            output={"hit": True, "cached_at": round(row[1], 3), "original_lm_calls": cached.usage.lm_calls,
                    "original_prompt_tokens": cached.usage.prompt_tokens},
            seconds=round(time.perf_counter() - start, 4),
        )
        return cached.model_copy(update={"usage": Usage(), "trace": [hit], "seconds": hit.seconds})

    def put(self, key: CacheKey, result: RAGResult) -> bool:
        """Store ``result`` under ``key`` (replacing any entry), evicting the least recently used beyond
        ``max_entries``. Returns False (nothing stored) when the result is not :func:`cacheable`."""
        if not cacheable(result):
            return False
        try:
            self._put(key, result.model_dump_json())
        except sqlite3.DatabaseError as exc:
            logger.warning("answer cache %s write failed (%s); not cached", self.path, exc)
            return False
        return True

    def _put(self, key: CacheKey, payload: str) -> None:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.execute(
                    "INSERT OR REPLACE INTO answers "
                    "(key, question, collection, artifact, settings, result, created, used) VALUES (?, ?, ?, ?, ?, ?, ?, (SELECT COALESCE(MAX(used), 0) + 1 FROM answers))",
                    (key.digest(), normalise_question(key.question), key.collection, key.artifact, key.settings,
                     payload, time.time()),
                )
                self._conn.execute(
                    "DELETE FROM answers WHERE key IN "
                    "(SELECT key FROM answers ORDER BY used DESC LIMIT -1 OFFSET ?)",
                    (self.max_entries,),
                )
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def invalidate(self, collection: str | None = None, artifact: str | None = None) -> int:
        """Delete the entries of one collection fingerprint and/or artifact hash (neither: all).
        Returns how many were deleted. Stale entries never hit anyway (their key differs); this frees them."""
        clauses, params = [], []
        if collection is not None:
            clauses.append("collection = ?")
            params.append(collection)
        if artifact is not None:
            clauses.append("artifact = ?")
            params.append(artifact)
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        with self._lock:
            return self._conn.execute(f"DELETE FROM answers{where}", params).rowcount

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM answers").fetchone()[0])
