from __future__ import annotations

import pytest

from selfrag.kb.fusion import weighted_rrf
from programs.types import Passage


def P(i: str) -> Passage:
    return Passage(id=i, text=i, score=99.0, metadata={"source": i})


def test_weighted_rrf_hand_computed():
    dense = [P("a"), P("b"), P("c")]
    bm25 = [P("c"), P("a"), P("d")]
    fused = weighted_rrf([dense, bm25], [1.0, 0.5], k=60)
    expected = {
        "a": 1 / 61 + 0.5 / 62,  # 0.0244611...
        "b": 1 / 62,             # 0.0161290...
        "c": 1 / 63 + 0.5 / 61,  # 0.0240701...
        "d": 0.5 / 63,           # 0.0079365...
    }
    assert [p.id for p in fused] == ["a", "c", "b", "d"]
    for p in fused:
        assert p.score == pytest.approx(expected[p.id], rel=1e-12)
    assert fused[0].metadata == {"source": "a"}


def test_weight_zero_ignores_a_ranking_and_limit_applies():
    fused = weighted_rrf([[P("a"), P("b")], [P("b"), P("z")]], [1.0, 0.0], k=60, limit=1)
    assert [p.id for p in fused] == ["a"] and fused[0].score == pytest.approx(1 / 61)


def test_ties_keep_first_seen_order():
    fused = weighted_rrf([[P("x")], [P("y")]], [1.0, 1.0], k=10)
    assert [p.id for p in fused] == ["x", "y"]


def test_bad_weights_rejected():
    with pytest.raises(ValueError, match="one weight per ranking"):
        weighted_rrf([[P("a")]], [1.0, 2.0])
    with pytest.raises(ValueError, match=">= 0"):
        weighted_rrf([[P("a")]], [-1.0])
