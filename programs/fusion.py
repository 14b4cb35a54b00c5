"""Reciprocal rank fusion (Cormack et al. 2009): ``score(d) = sum_i w_i / (k + rank_i(d))``.

Ranks are 1-based; a ranking that does not contain ``d`` contributes nothing; ties keep the order in
which passages were first seen. The query transforms fuse the original question's ranking with the
ranking of each paraphrase, sub-question or step-back question here (k = 60 as in the paper).
The one implementation: the runtime's hybrid retriever (``selfrag.kb.retriever``) fuses its dense
and BM25 rankings with it too (``selfrag`` may import ``programs``, never the other way round).
"""

from __future__ import annotations

from collections.abc import Sequence

from programs.types import Passage

RRF_K = 60


def weighted_rrf(rankings: Sequence[Sequence[Passage]], weights: Sequence[float] | None = None,
                 k: int = RRF_K, limit: int | None = None) -> list[Passage]:
    """Fuse ``rankings`` (best first) into one, each passage carrying its fused score."""
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
    for ranking, weight in zip(rankings, weights):
        for rank, passage in enumerate(ranking, start=1):
            first.setdefault(passage.id, passage)
            scores[passage.id] = scores.get(passage.id, 0.0) + weight / (k + rank)
    order = {pid: n for n, pid in enumerate(first)}
    ranked = sorted(scores, key=lambda pid: (-scores[pid], order[pid]))
    if limit is not None:
        ranked = ranked[:limit]
    return [first[pid].model_copy(update={"score": scores[pid]}) for pid in ranked]
