"""A BM25 index (bm25s) over the chunks of one collection, persisted next to the Chroma data
together with a fingerprint of the collection's ids so a stale index is detected and rebuilt."""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from selfrag.kb.text import bm25_tokens

log = logging.getLogger(__name__)

_META_FILE = "selfrag_bm25.json"
LOCK_TIMEOUT = 30.0  # seconds a save or load waits for another process's swap


def lock_path(directory: Path) -> Path:
    """The file lock guarding the swap (and the reading) of the index in ``directory``."""
    directory = Path(directory)
    return directory.with_name(f".{directory.name}.lock")


class BM25Index:
    """Chunk ids, texts and metadata plus a bm25s scorer. ``search`` scores every chunk, applies an
    optional metadata predicate and returns the top ``k`` as ``(index, score)`` pairs."""

    def __init__(self, ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[dict[str, Any]],
                 fingerprint: str, tokenizer: Callable[[str], list[str]] = bm25_tokens, _model: Any = None):
        if not (len(ids) == len(texts) == len(metadatas)):
            raise ValueError(f"ids/texts/metadatas lengths differ: {len(ids)}/{len(texts)}/{len(metadatas)}")
        self.ids = list(ids)
        self.texts = list(texts)
        self.metadatas = list(metadatas)
        self.fingerprint = fingerprint
        self.tokenizer = tokenizer
        self._model = _model if _model is not None else self._build()

    def _build(self) -> Any:
        import bm25s

        logging.getLogger("bm25s").setLevel(logging.WARNING)
        model = bm25s.BM25()
        if self.ids:
            corpus = [self.tokenizer(t) or [""] for t in self.texts]
            model.index(corpus, show_progress=False)
        return model

    def __len__(self) -> int:
        return len(self.ids)

    def scores(self, query: str) -> np.ndarray:
        if not self.ids:
            return np.zeros(0, dtype=np.float32)
        token_ids = self._model.get_tokens_ids(self.tokenizer(query))
        if not token_ids:
            return np.zeros(len(self.ids), dtype=np.float32)
        return np.asarray(self._model.get_scores_from_ids(token_ids), dtype=np.float32)

    def search(self, query: str, k: int,
               keep: Callable[[dict[str, Any]], bool] | None = None) -> list[tuple[int, float]]:
        scores = self.scores(query)
        if scores.size == 0 or k < 1:
            return []
        positive = np.flatnonzero(scores > 0)
        if positive.size == 0:
            return []
        if keep is None and positive.size > k:
            # unfiltered: only the top k matter (argpartition, then sort those)
            positive = positive[np.argpartition(-scores[positive], k - 1)[:k]]
        order = positive[np.lexsort((positive, -scores[positive]))]
        out: list[tuple[int, float]] = []
        for idx in order:
            if keep is None or keep(self.metadatas[idx]):
                out.append((int(idx), float(scores[idx])))
                if len(out) >= k:
                    break
        return out

    # -- persistence ---------------------------------------------------------------------------
    def consistent(self) -> bool:
        """Whether the scorer agrees with the chunk list (a torn or mixed index does not): as many
        documents, and a well-formed sparse score matrix pointing at those documents only."""
        if not self.ids:
            return True
        try:
            scores = self._model.scores
            n, data, indices, indptr = scores["num_docs"], scores["data"], scores["indices"], scores["indptr"]
            return (int(n) == len(self.ids) and len(data) == len(indices) and len(indptr) >= 1
                    and int(indptr[-1]) == len(indices) and bool(np.all(np.diff(indptr) >= 0))
                    and (len(indices) == 0 or (int(indices.min()) >= 0 and int(indices.max()) < len(self.ids))))
        except (AttributeError, KeyError, TypeError, ValueError, IndexError):
            return False

    def save(self, directory: Path, lock_timeout: float = LOCK_TIMEOUT) -> bool:
        """Write the index to ``directory``: built in a temporary folder of its own (concurrent saves
        never share one), then swapped in under a file lock. Returns False (the index stays in memory
        only) when the lock could not be had in ``lock_timeout`` seconds."""
        from filelock import FileLock, Timeout

        directory = Path(directory)
        directory.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=directory.parent, prefix=f".{directory.name}.tmp-"))
        try:
            if self.ids:
                self._model.save(str(tmp), show_progress=False)
            with open(tmp / "chunks.jsonl", "w", encoding="utf-8") as fh:
                for i, t, m in zip(self.ids, self.texts, self.metadatas):
                    fh.write(json.dumps({"id": i, "text": t, "metadata": m}, ensure_ascii=False) + "\n")
            # the fingerprint file is written last: its presence marks a complete index
            (tmp / _META_FILE).write_text(json.dumps({"fingerprint": self.fingerprint, "n": len(self.ids)}))
            try:
                with FileLock(str(lock_path(directory)), timeout=lock_timeout):
                    old = None
                    if directory.exists():
                        old = directory.with_name(f".{directory.name}.old-{os.getpid()}-{uuid.uuid4().hex}")
                        directory.rename(old)
                    tmp.rename(directory)
                    tmp = old if old is not None else tmp
            except Timeout:
                log.warning("BM25 index %s is locked by another process; keeping this index in memory", directory)
                return False
            return True
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    @classmethod
    def load(cls, directory: Path, tokenizer: Callable[[str], list[str]] = bm25_tokens,
             lock_timeout: float = LOCK_TIMEOUT) -> "BM25Index | None":
        """The index saved in ``directory``, or None when there is none, it is damaged (torn files, a
        scorer that disagrees with its chunks) or it is locked for longer than ``lock_timeout``."""
        from filelock import FileLock, Timeout

        directory = Path(directory)
        try:
            with FileLock(str(lock_path(directory)), timeout=lock_timeout):
                index = cls._read(directory, tokenizer)
        except Timeout:
            log.warning("BM25 index %s is locked by another process; rebuilding in memory", directory)
            return None
        except Exception as exc:  # noqa: BLE001 - any damage means "rebuild from Chroma"
            log.warning("BM25 index at %s is damaged (%s: %s); it will be rebuilt", directory,
                        type(exc).__name__, exc)
            return None
        if index is not None and not index.consistent():
            log.warning("BM25 index at %s is inconsistent (torn or mixed files); it will be rebuilt", directory)
            return None
        return index

    @classmethod
    def _read(cls, directory: Path, tokenizer: Callable[[str], list[str]]) -> "BM25Index | None":
        try:
            meta = json.loads((directory / _META_FILE).read_text())
        except FileNotFoundError:
            log.info("no BM25 index at %s", directory)
            return None
        ids, texts, metas = [], [], []
        with open(directory / "chunks.jsonl", encoding="utf-8") as fh:
            for line in fh:
                row = json.loads(line)
                ids.append(row["id"])
                texts.append(row["text"])
                metas.append(row["metadata"])
        if len(ids) != int(meta.get("n", len(ids))):
            raise ValueError(f"{len(ids)} chunks listed, {meta.get('n')} expected")
        model = None
        if ids:
            import bm25s

            model = bm25s.BM25.load(str(directory), show_progress=False)
        return cls(ids, texts, metas, meta["fingerprint"], tokenizer=tokenizer, _model=model)

    @staticmethod
    def stored_fingerprint(directory: Path) -> str | None:
        try:
            return json.loads((Path(directory) / _META_FILE).read_text())["fingerprint"]
        except (OSError, ValueError, KeyError):
            return None
