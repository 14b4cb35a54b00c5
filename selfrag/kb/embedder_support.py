"""Shared pieces of the packaged embedders: a thread-safe once-per-process model loader,
batched encoding into L2-normalised float32 rows, and query/passage dispatch.

Embedders whose model embeds queries and passages differently (e5 with its ``query: `` /
``passage: `` prefixes) implement ``embed_queries`` next to the protocol's ``embed`` (which embeds
documents); :func:`query_vectors` picks the right one for any :class:`Embedder`.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Hashable, Sequence

import numpy as np

log = logging.getLogger(__name__)

_models: dict[Hashable, Any] = {}
_models_lock = threading.Lock()


def load_once(key: Hashable, factory: Callable[[], Any]) -> Any:
    """The model stored under ``key``, built by ``factory`` the first time only; concurrent first
    calls wait for one build instead of loading the model twice."""
    model = _models.get(key)
    if model is not None:
        return model
    with _models_lock:
        model = _models.get(key)
        if model is None:
            log.info("loading embedding model %s", key)
            model = factory()
            _models[key] = model
    return model


def normalise_rows(vectors: np.ndarray) -> np.ndarray:
    """Float32 copy of ``vectors`` with unit L2 rows; a zero row becomes the first basis vector
    (as in HashEmbedder) so every row stays a valid cosine operand."""
    out = np.array(vectors, dtype=np.float32, copy=True)
    if out.ndim != 2:
        raise ValueError(f"expected a 2-D array of embeddings, got shape {out.shape}")
    if not np.all(np.isfinite(out)):
        raise ValueError("the embedding model returned non-finite values")
    norms = np.linalg.norm(out, axis=1)
    zero = norms == 0
    out[~zero] /= norms[~zero, None]
    if zero.any():
        out[zero] = 0.0
        out[zero, 0] = 1.0
    return out


def encode_in_batches(encode: Callable[[list[str]], np.ndarray], texts: Sequence[str], batch_size: int,
                      dim: int, lock: threading.Lock | None = None) -> np.ndarray:
    """``encode`` over ``texts`` in batches of ``batch_size`` (under ``lock`` when given),
    checked to be ``(n, dim)`` and L2-normalised."""
    if isinstance(texts, str):
        raise TypeError("embed takes a sequence of texts, not a single string")
    items = [t if isinstance(t, str) else str(t) for t in texts]
    if not items:
        return np.zeros((0, dim), dtype=np.float32)
    parts = []
    for start in range(0, len(items), batch_size):
        batch = items[start:start + batch_size]
        if lock is None:
            vecs = encode(batch)
        else:
            with lock:
                vecs = encode(batch)
        vecs = np.asarray(vecs).reshape(len(batch), -1)
        if vecs.shape[1] != dim:
            raise ValueError(f"the embedding model returned {vecs.shape[1]}-d vectors, expected {dim}")
        parts.append(vecs)
    return normalise_rows(np.concatenate(parts))


def check_batch_size(batch_size: int) -> int:
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ValueError(f"embedding batch_size must be a positive int, got {batch_size!r}")
    return batch_size


def check_threads(threads: int | None) -> int | None:
    if threads is not None and (not isinstance(threads, int) or isinstance(threads, bool) or threads < 1):
        raise ValueError(f"embedding threads must be a positive int or None, got {threads!r}")
    return threads


def query_vectors(embedder: Any, queries: Sequence[str]) -> np.ndarray:
    """Query embeddings: ``embedder.embed_queries`` when it has one (asymmetric models such as
    e5), else ``embedder.embed``."""
    embed_queries = getattr(embedder, "embed_queries", None)
    return embed_queries(queries) if callable(embed_queries) else embedder.embed(queries)
