"""programs.fusion: the RRF arithmetic the query transforms fuse with (k = 60)."""

import random

import pytest

from programs.fusion import RRF_K, weighted_rrf
from programs.types import Passage
from selfrag.kb.fusion import weighted_rrf as kb_rrf


def P(i: str) -> Passage:
    return Passage(id=i, text=i, score=9.0)


def test_three_rankings_hand_computed_with_k_60():
    original, para, step_back = [P("a"), P("b"), P("c")], [P("b"), P("d")], [P("d"), P("a"), P("e")]
    fused = weighted_rrf([original, para, step_back])
    expected = {"a": 1 / 61 + 1 / 62, "b": 1 / 62 + 1 / 61, "c": 1 / 63, "d": 1 / 62 + 1 / 61, "e": 1 / 63}
    assert RRF_K == 60
    assert [p.id for p in fused] == ["a", "b", "d", "c", "e"]  # a, b, d tie: first seen first
    assert all(p.score == pytest.approx(expected[p.id], rel=1e-12) for p in fused)


def test_limit_and_validation():
    assert [p.id for p in weighted_rrf([[P("a"), P("b")]], limit=1)] == ["a"]
    with pytest.raises(ValueError, match="one weight per ranking"):
        weighted_rrf([[P("a")]], [1.0, 1.0])
    with pytest.raises(ValueError, match="k must be >= 1"):
        weighted_rrf([[P("a")]], k=0)


def test_same_arithmetic_as_the_knowledge_base_fusion():
    rng = random.Random(7)
    for _ in range(50):
        rankings = [[P(str(i)) for i in rng.sample(range(12), rng.randint(0, 8))] for _ in range(rng.randint(1, 4))]
        weights = [rng.choice([0.0, 0.5, 1.0, 2.0]) for _ in rankings]
        if sum(weights) == 0:
            weights[0] = 1.0
        ours, theirs = weighted_rrf(rankings, weights, k=60, limit=6), kb_rrf(rankings, weights, k=60, limit=6)
        assert [(p.id, p.score) for p in ours] == [(p.id, p.score) for p in theirs]
