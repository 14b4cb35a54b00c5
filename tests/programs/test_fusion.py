"""programs.fusion: the RRF arithmetic the query transforms fuse with (k = 60)."""

import pytest

from programs.fusion import RRF_K, weighted_rrf
from programs.types import Passage


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


def test_weighted_hand_computed_as_the_hybrid_retriever_fuses():
    """The knowledge base's hybrid retriever fuses dense and BM25 with this same function."""
    dense, bm25 = [P("a"), P("b"), P("c")], [P("c"), P("a"), P("d")]
    fused = weighted_rrf([dense, bm25], [1.0, 0.5], k=60)
    expected = {"a": 1 / 61 + 0.5 / 62, "b": 1 / 62, "c": 1 / 63 + 0.5 / 61, "d": 0.5 / 63}
    assert [p.id for p in fused] == ["a", "c", "b", "d"]
    assert all(p.score == pytest.approx(expected[p.id], rel=1e-12) for p in fused)


def test_weight_zero_ignores_a_ranking_and_negative_weights_are_refused():
    fused = weighted_rrf([[P("a"), P("b")], [P("b"), P("z")]], [1.0, 0.0], k=60, limit=1)
    assert [p.id for p in fused] == ["a"] and fused[0].score == pytest.approx(1 / 61)
    with pytest.raises(ValueError, match=">= 0"):
        weighted_rrf([[P("a")]], [-1.0])


def test_the_knowledge_base_has_no_fusion_of_its_own():
    from selfrag.kb import retriever

    assert retriever.weighted_rrf is weighted_rrf
