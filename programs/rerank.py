"""Reranking fused candidates before grading: by a relevance probability, or by an LM's listwise order.

``program.rerank``: ``none``; ``judge`` — order by P(relevant): an injected :data:`RelevanceScorer`, or
the program's own relevance judgement read from token log-probabilities (``lm.logprobs``); ``listwise``
— one ``RerankPassages`` call orders the numbered candidates; ``auto`` — ``judge`` when a scorer is
given or the LM gives log-probabilities, else ``listwise``. The LM steps are the program's
(:mod:`programs.retrieval_pipeline`); here are the pure parts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Literal

from programs.types import Passage

RerankMode = Literal["none", "auto", "judge", "listwise"]

RelevanceScorer = Callable[[str, Sequence[Passage]], Sequence[float | None]]
"""``scorer(question, passages)`` → one probability of relevance per passage (None: not scored)."""


def rerank_method(mode: RerankMode, has_scorer: bool) -> Literal["none", "judge", "listwise"]:
    """The method ``mode`` resolves to (``has_scorer``: a scorer is injected or log-probabilities
    make the program's own judgement one); ValueError for ``judge`` without a scorer."""
    if mode == "auto":
        return "judge" if has_scorer else "listwise"
    if mode == "judge" and not has_scorer:
        raise ValueError("program.rerank = 'judge' needs a relevance scorer (log-probabilities: lm.logprobs = true); "
                         "use 'listwise' or 'auto' for a backend without them")
    return mode


def order_by_scores(passages: Sequence[Passage], scores: Sequence[float | None]) -> list[Passage]:
    """Highest score first; unscored passages after the scored ones; ties keep the fused order.
    Each passage's ``score`` becomes its relevance score (unscored keep theirs)."""
    if len(scores) != len(passages):
        raise ValueError(f"scorer returned {len(scores)} scores for {len(passages)} passages")
    keyed = sorted(range(len(passages)), key=lambda i: (scores[i] is None, -(scores[i] or 0.0), i))
    return [passages[i] if scores[i] is None else passages[i].model_copy(update={"score": float(scores[i])})
            for i in keyed]


def parse_ranking(ranking: Iterable[object] | None, n: int) -> tuple[list[int], int]:
    """A full order of ``n`` candidates (0-based) from an LM's 1-based ranking: valid numbers first
    in the given order (duplicates and out-of-range numbers ignored), the unranked ones after in
    their fused order. Also returns how many of the LM's numbers were usable."""
    order: list[int] = []
    for item in list(ranking or []):
        if isinstance(item, bool) or not isinstance(item, int) or not 1 <= item <= n or item - 1 in order:
            continue
        order.append(item - 1)
    used = len(order)
    return order + [i for i in range(n) if i not in order], used
