"""Thresholds, the routing functions on soft scores, and Self-RAG's expected candidate score."""

import pytest
from pydantic import ValidationError

from programs.scoring import candidate_score
from programs.thresholds import (
    ABSTAIN_REASONS,
    AbstainReason,
    Thresholds,
    candidate_confidence,
    expected_score,
    expected_usefulness,
    final_abstain_reason,
    keep_passage,
    should_answer,
    should_retrieve,
    support_expectation,
    usefulness_value,
)

TH = Thresholds()


def test_defaults_are_the_two_way_argmax_and_validated():
    assert (TH.retrieve, TH.relevance, TH.answer) == (0.5, 0.5, 0.5)
    with pytest.raises(ValidationError):
        Thresholds(retrieve=1.5)
    with pytest.raises(ValidationError):
        Thresholds(relvance=0.3)  # typo: extra fields are refused
    assert Thresholds.model_validate_json(Thresholds(answer=0.7).model_dump_json()) == Thresholds(answer=0.7)


def test_routing_is_inclusive_at_the_threshold():
    th = Thresholds(retrieve=0.2, relevance=0.6, answer=0.4)
    assert should_retrieve(0.2, th) and not should_retrieve(0.19, th)
    assert keep_passage(0.6, th) and not keep_passage(0.59, th)
    assert should_answer(0.4, th) and not should_answer(0.39, th)
    with pytest.raises(ValueError, match="p_retrieve"):
        should_retrieve(1.2, th)


def test_hard_labels_reproduce_todays_routes():
    # probability 1 on the decoded label: same decisions as the hard-label program
    assert should_retrieve(1.0, TH) and not should_retrieve(0.0, TH)
    assert keep_passage(1.0, TH) and not keep_passage(0.0, TH)
    for label, answered in (("fully", True), ("partially", True), ("no", False)):
        assert should_answer(candidate_confidence(1.0, {label: 1.0}), TH) is answered


def test_expected_score_matches_the_hard_score_on_hard_labels():
    for rel in (True, False):
        for sup in ("fully", "partially", "no"):
            for use in (1, 2, 3, 4, 5):
                soft = expected_score(float(rel), {sup: 1.0}, float(use), 1.0, 1.0, 0.5)
                assert soft == pytest.approx(candidate_score(rel, sup, use, 1.0, 1.0, 0.5))


def test_expected_score_uses_expectations():
    p_sup = {"fully": 0.6, "partially": 0.2, "no": 0.2}
    e_use = expected_usefulness({4: 0.5, 5: 0.5})  # 4.5 → 0.75 on −1..1
    assert support_expectation(p_sup) == pytest.approx(0.7)
    assert e_use == pytest.approx(4.5) and usefulness_value(e_use) == pytest.approx(0.75)
    assert expected_score(0.8, p_sup, e_use, w_rel=1.0, w_sup=2.0, w_use=0.5) == pytest.approx(0.8 + 1.4 + 0.375)
    assert expected_score(0.8, p_sup, None) == pytest.approx(0.8 + 0.7)  # failed usefulness: neutral


def test_support_expectation_normalises_and_checks_labels():
    assert support_expectation({"fully": 0.3, "partially": 0.3}) == pytest.approx(0.75)  # mass elsewhere dropped
    assert support_expectation({}) == 0.0
    with pytest.raises(ValueError, match="unknown support label"):
        support_expectation({"yes": 1.0})
    with pytest.raises(ValueError):
        usefulness_value(6.0)
    with pytest.raises(ValueError, match="1..5"):
        expected_usefulness({0: 1.0})


def test_confidence_is_relevance_times_support():
    assert candidate_confidence(0.8, {"fully": 0.5, "partially": 0.5}) == pytest.approx(0.6)
    assert candidate_confidence(0.0, {"fully": 1.0}) == 0.0


def test_final_abstain_reason_per_branch():
    th = Thresholds(answer=0.6)
    assert final_abstain_reason("fully", 0.9, th) is None
    assert final_abstain_reason("partially", 0.5, th) == "low_confidence"
    assert final_abstain_reason("fully", 0.3, th) == "low_confidence"
    assert final_abstain_reason("no", 0.1, th) == "unsupported"
    assert final_abstain_reason(None, 0.0, th) == "unsupported"


def test_every_abstain_reason_is_documented():
    assert set(ABSTAIN_REASONS) == set(AbstainReason.__args__)
    assert all(text.strip() for text in ABSTAIN_REASONS.values())
