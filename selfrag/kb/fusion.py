"""Weighted Reciprocal Rank Fusion: ``score(d) = sum_i w_i / (k + rank_i(d))`` with 1-based ranks;
a list that does not contain ``d`` contributes nothing."""

from __future__ import annotations

from typing import Sequence

from programs.types import Passage


def weighted_rrf(rankings: Sequence[Sequence[Passage]], weights: Sequence[float] | None = None,
                 k: int = 60, limit: int | None = None) -> list[Passage]:
    if weights is None:
        weights = [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError(f"need one weight per ranking: {len(weights)} weights for {len(rankings)} rankings")
    if any(w < 0 for w in weights):
        raise ValueError(f"RRF weights must be >= 0, got {list(weights)}")
    if k < 1:
        raise ValueError(f"RRF k must be >= 1, got {k!r}")
    scores: dict[str, float] = {}
    first: dict[str, Passage] = {}
    order: dict[str, int] = {}
    for ranking, weight in zip(rankings, weights):
        for rank, passage in enumerate(ranking, start=1):
            if passage.id not in first:
                first[passage.id] = passage
                order[passage.id] = len(order)
            scores[passage.id] = scores.get(passage.id, 0.0) + weight / (k + rank)
    ranked = sorted(scores, key=lambda pid: (-scores[pid], order[pid]))
    if limit is not None:
        ranked = ranked[:limit]
    return [first[pid].model_copy(update={"score": scores[pid]}) for pid in ranked]
