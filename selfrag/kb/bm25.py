"""A BM25 index (bm25s) over the chunks of one collection, persisted next to the Chroma data
together with a fingerprint of the collection's ids so a stale index is detected and rebuilt."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from selfrag.kb.text import bm25_tokens

log = logging.getLogger(__name__)

_META_FILE = "selfrag_bm25.json"


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
    def save(self, directory: Path) -> None:
        directory = Path(directory)
        tmp = directory.with_name(directory.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        if self.ids:
            self._model.save(str(tmp), show_progress=False)
        with open(tmp / "chunks.jsonl", "w", encoding="utf-8") as fh:
            for i, t, m in zip(self.ids, self.texts, self.metadatas):
                fh.write(json.dumps({"id": i, "text": t, "metadata": m}, ensure_ascii=False) + "\n")
        # the fingerprint file is written last: its presence marks a complete index
        (tmp / _META_FILE).write_text(json.dumps({"fingerprint": self.fingerprint, "n": len(self.ids)}))
        shutil.rmtree(directory, ignore_errors=True)
        tmp.rename(directory)

    @classmethod
    def load(cls, directory: Path, tokenizer: Callable[[str], list[str]] = bm25_tokens) -> "BM25Index | None":
        directory = Path(directory)
        try:
            meta = json.loads((directory / _META_FILE).read_text())
            ids, texts, metas = [], [], []
            with open(directory / "chunks.jsonl", encoding="utf-8") as fh:
                for line in fh:
                    row = json.loads(line)
                    ids.append(row["id"])
                    texts.append(row["text"])
                    metas.append(row["metadata"])
            if ids:
                import bm25s

                model = bm25s.BM25.load(str(directory), show_progress=False)
            else:
                model = None
            return cls(ids, texts, metas, meta["fingerprint"], tokenizer=tokenizer, _model=model)
        except (OSError, ValueError, KeyError) as exc:
            log.info("no usable BM25 index at %s (%s)", directory, exc)
            return None

    @staticmethod
    def stored_fingerprint(directory: Path) -> str | None:
        try:
            return json.loads((Path(directory) / _META_FILE).read_text())["fingerprint"]
        except (OSError, ValueError, KeyError):
            return None
