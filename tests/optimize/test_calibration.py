"""Threshold fitting, ECE, reliability diagrams and coverage–accuracy curves on synthetic dev sets."""

import random

import pytest

from optimize.calibration import (
    ThresholdFit,
    candidate_thresholds,
    coverage_accuracy_curve,
    ece,
    evaluate_threshold,
    fit_joint_thresholds,
    fit_min_precision,
    fit_threshold,
    plot_coverage_accuracy,
    rate_upper_bound,
    reliability_diagram,
    threshold_curve,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _separable(cut: float = 0.3, n: int = 40, seed: int = 1):
    """Negatives score below ``cut`` and positives above: the best threshold sits at the gap."""
    rng = random.Random(seed)
    neg = [rng.uniform(0.0, cut - 0.05) for _ in range(n)]
    pos = [rng.uniform(cut + 0.05, 1.0) for _ in range(n)]
    return neg + pos, [False] * n + [True] * n


def test_fit_finds_the_known_best_threshold():
    probs, labels = _separable(cut=0.3)
    fit = fit_threshold(probs, labels)
    highest_negative = max(p for p, y in zip(probs, labels) if not y)
    lowest_positive = min(p for p, y in zip(probs, labels) if y)
    assert highest_negative < fit.threshold <= lowest_positive
    assert fit.point.accuracy == 1.0 and fit.point.false_abstention == 0.0 and fit.point.false_acceptance == 0.0
    assert fit.n == 80 and fit.n_positive == 40 and fit.objective == "accuracy"
    assert 0.2 < fit.threshold < 0.4


def test_fit_with_overlap_picks_the_accuracy_maximum():
    # scores:  0.1 F, 0.2 F, 0.4 T, 0.5 F, 0.6 T, 0.7 T, 0.9 T  -> best: threshold between 0.2 and 0.4 (6/7)
    probs = [0.1, 0.2, 0.4, 0.5, 0.6, 0.7, 0.9]
    labels = [0, 0, 1, 0, 1, 1, 1]
    fit = fit_threshold(probs, labels)
    assert fit.threshold == pytest.approx(0.3)
    assert fit.point.accuracy == pytest.approx(6 / 7)


def test_false_abstention_target_lowers_the_threshold():
    probs = [0.1, 0.2, 0.3, 0.35, 0.6, 0.7, 0.8, 0.9, 0.4, 0.45]
    labels = [1, 0, 0, 0, 1, 1, 1, 1, 0, 0]  # one positive scored 0.1: only threshold <= 0.1 keeps it
    acc = fit_threshold(probs, labels)
    capped = fit_threshold(probs, labels, ("max_false_abstention", 0.0))
    assert acc.threshold == pytest.approx(0.525) and acc.point.false_abstention == pytest.approx(0.2)
    assert capped.threshold <= 0.1 and capped.point.false_abstention == 0.0
    assert capped.objective == "max_false_abstention<=0"
    loose = fit_threshold(probs, labels, ("max_false_abstention", 0.25))
    assert loose.threshold == acc.threshold


def test_rate_upper_bound_is_wilsons_and_shrinks_with_the_sample():
    z2 = 1.6448536269514722 ** 2  # the one-sided 95% normal quantile, squared
    assert rate_upper_bound(0, 10, 0.95) == pytest.approx(2 * z2 / 20 / (1 + z2 / 10))  # 0 of 10: about 0.21
    assert rate_upper_bound(0, 0, 0.9) == 1.0
    assert rate_upper_bound(5, 50, 0.9) > 0.1  # the rate itself is 0.1: its bound lies above it
    assert rate_upper_bound(50, 500, 0.9) < rate_upper_bound(5, 50, 0.9)  # same rate, more data: tighter
    assert rate_upper_bound(5, 50, 0.95) > rate_upper_bound(5, 50, 0.8)  # surer: wider
    assert rate_upper_bound(50, 50, 0.9) == 1.0


def _graded_overlap(n: int = 100):
    """n positives score i/n; 2n negatives spread over [0, 0.5) at four per 0.01: up to 0.5, raising the
    threshold loses one positive for every four negatives it rejects, so accuracy climbs with it."""
    probs = [i / n for i in range(1, n + 1)] + [j / (4 * n) + 0.001 for j in range(2 * n)]
    return probs, [True] * n + [False] * (2 * n)


def test_a_confidence_bound_leaves_a_margin_under_the_false_abstention_target():
    probs, labels = _graded_overlap()
    at_rate = fit_threshold(probs, labels, ("max_false_abstention", 0.1))
    bounded = fit_threshold(probs, labels, ("max_false_abstention", 0.1, 0.9))
    assert at_rate.point.false_abstention == pytest.approx(0.1)  # accuracy climbs with the threshold: at the bound
    assert bounded.objective == "max_false_abstention<=0.1@0.9"
    assert bounded.threshold < at_rate.threshold and bounded.point.false_abstention < 0.1
    k = round(bounded.point.false_abstention * 100)
    assert rate_upper_bound(k, 100, 0.9) <= 0.1 < rate_upper_bound(k + 1, 100, 0.9)  # the highest feasible rule
    assert k == 6
    joint = fit_joint_thresholds(probs, [1.0] * len(probs), labels, ("max_false_abstention", 0.1, 0.9))
    assert joint.point.false_abstention == pytest.approx(0.06) and joint.objective == bounded.objective
    # three positives: no error count's bound is under 0.1, so only abstaining on nothing is left
    few = fit_threshold([0.1, 0.2, 0.8, 0.9, 0.95], [0, 0, 1, 1, 1], ("max_false_abstention", 0.1, 0.8))
    assert few.threshold == 0.0 and rate_upper_bound(0, 3, 0.8) > 0.1
    few_joint = fit_joint_thresholds([0.1, 0.2, 0.8, 0.9, 0.95], [0.5] * 5, [0, 0, 1, 1, 1],
                                     ("max_false_abstention", 0.1, 0.8))
    assert (few_joint.first, few_joint.second) == (0.0, 0.0)
    with pytest.raises(ValueError, match="confidence must lie in"):
        fit_threshold(probs, labels, ("max_false_abstention", 0.1, 1.0))
    with pytest.raises(ValueError, match="confidence must lie in"):
        fit_joint_thresholds(probs, probs, labels, ("max_false_abstention", 0.1, 0.3))


def test_false_acceptance_target_raises_the_threshold():
    probs = [0.2, 0.3, 0.6, 0.7, 0.8, 0.95]
    labels = [0, 0, 1, 1, 0, 1]
    fit = fit_threshold(probs, labels, ("max_false_acceptance", 0.0))
    assert fit.threshold == pytest.approx(0.875) and fit.point.false_acceptance == 0.0


def test_curve_covers_every_distinct_decision():
    probs = [0.2, 0.2, 0.6, 1.0]
    labels = [0, 1, 1, 1]
    assert candidate_thresholds(probs) == [0.0, pytest.approx(0.4), pytest.approx(0.8)]  # top 1.0: no all-negative
    curve = threshold_curve(probs, labels)
    assert [pt.coverage for pt in curve] == [1.0, 0.5, 0.25]
    assert [pt.false_abstention for pt in curve] == [0.0, pytest.approx(1 / 3), pytest.approx(2 / 3)]
    assert evaluate_threshold([0.3], [1], 0.5).balanced_accuracy == 0.0  # only positives: recall alone


def test_fit_round_trips_as_json_for_the_artifact():
    fit = fit_threshold(*_separable())
    assert ThresholdFit.model_validate_json(fit.model_dump_json()) == fit
    assert len(fit.curve) == 81  # 80 distinct scores: 0, 79 midpoints, one above the top


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="length"):
        fit_threshold([0.1], [1, 0])
    with pytest.raises(ValueError, match="no examples"):
        fit_threshold([], [])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        fit_threshold([1.3], [1])
    with pytest.raises(ValueError, match="unknown objective"):
        fit_threshold([0.5], [1], "f1")
    with pytest.raises(ValueError, match="no threshold"):
        fit_threshold([1.0, 0.5], [0, 1], ("max_false_acceptance", 0.0))


def test_ece_zero_when_calibrated_and_large_when_overconfident():
    probs, labels = [], []
    for b in range(10):  # each bin: confidence p, exactly p of its examples positive
        p = (b + 0.5) / 10
        positives = round(p * 100)
        probs += [p] * 100
        labels += [1] * positives + [0] * (100 - positives)
    assert ece(probs, labels) == pytest.approx(0.0, abs=1e-9)
    overconfident = [0.95] * 100
    truth = [1] * 60 + [0] * 40
    assert ece(overconfident, truth) == pytest.approx(0.35)
    assert ece([1.0, 1.0], [1, 0], n_bins=5) == pytest.approx(0.5)  # 1.0 lands in the last bin
    with pytest.raises(ValueError, match="n_bins"):
        ece([0.5], [1], n_bins=0)


def test_coverage_accuracy_curve():
    conf = [0.9, 0.8, 0.8, 0.4, 0.1]
    correct = [1, 1, 0, 1, 0]
    curve = coverage_accuracy_curve(conf, correct)
    assert [(pt.threshold, pt.coverage) for pt in curve] == [(0.9, 0.2), (0.8, 0.6), (0.4, 0.8), (0.1, 1.0)]
    assert [pt.accuracy for pt in curve] == [1.0, pytest.approx(2 / 3), 0.75, 0.6]


def test_plots_are_written_as_png(tmp_path):
    probs, labels = _separable()
    rel = reliability_diagram(probs, labels, tmp_path / "plots" / "relevance.png", title="relevance")
    cov = plot_coverage_accuracy({"selfrag": coverage_accuracy_curve(probs, labels),
                                  "vanilla": coverage_accuracy_curve([0.5] * len(labels), labels)},
                                 tmp_path / "coverage.png")
    for path in (rel, cov):
        assert path.read_bytes()[:8] == PNG_MAGIC and path.stat().st_size > 1000
    with pytest.raises(ValueError, match="no curves"):
        plot_coverage_accuracy({}, tmp_path / "x.png")


def test_min_precision_picks_the_lowest_threshold_meeting_the_target_on_enough_examples():
    probs = [0.2, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9]
    labels = [False, False, True, False, True, True, True]
    t, curve = fit_min_precision(probs, labels, 0.9)
    # >= 0.4: 4 of 5 positive (0.8); >= 0.55: 3 of 4 (0.75); >= 0.65: 3 of 3
    assert t == pytest.approx(0.65)
    assert curve[0] == {"threshold": 0.0, "selected": 1.0, "precision": round(4 / 7, 4)}
    assert fit_min_precision(probs, labels, 0.8)[0] == pytest.approx(0.4)


def test_min_precision_needs_enough_examples_and_refuses_a_bad_target():
    assert fit_min_precision([0.1, 0.9], [False, True], 0.9)[0] is None  # one example above: too few
    assert fit_min_precision([0.1, 0.5, 0.9], [True, False, False], 0.5)[0] is None
    with pytest.raises(ValueError, match="precision target"):
        fit_min_precision([0.5], [True], 1.5)


def _two_signals():
    """Answerable rows score high on both signals; each unanswerable row is low on exactly one of them, so
    neither threshold alone can reject them all without rejecting answerable rows, but the pair can."""
    rng = random.Random(3)
    pos = [(rng.uniform(0.5, 0.9), rng.uniform(0.6, 1.0), True) for _ in range(30)]
    low_a = [(rng.uniform(0.1, 0.4), rng.uniform(0.6, 1.0), False) for _ in range(15)]
    low_b = [(rng.uniform(0.5, 0.9), rng.uniform(0.0, 0.5), False) for _ in range(15)]
    rows = pos + low_a + low_b
    return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]


def test_joint_fit_finds_the_pair_no_single_threshold_finds():
    a, b, y = _two_signals()
    fit = fit_joint_thresholds(a, b, y, ("max_false_abstention", 0.0))
    assert 0.4 < fit.first < 0.5 and 0.5 < fit.second < 0.6  # in the gaps of both signals
    assert fit.point.accuracy == 1.0 and fit.point.false_acceptance == 0.0 and fit.point.false_abstention == 0.0
    assert fit.rules == len(candidate_thresholds(a)) * len(candidate_thresholds(b))
    alone_a = fit_threshold(a, y, ("max_false_abstention", 0.0)).point
    alone_b = fit_threshold(b, y, ("max_false_abstention", 0.0)).point
    assert alone_a.accuracy < 1.0 and alone_b.accuracy < 1.0
    assert fit_joint_thresholds(a, b, y, "accuracy").point.accuracy == 1.0


def test_joint_fit_respects_the_false_abstention_bound_and_breaks_ties_towards_the_first_test():
    # one answerable row is low on a: rejecting every unanswerable row costs 1/4 false abstention
    a = [0.9, 0.8, 0.7, 0.2, 0.1, 0.3, 0.35]
    b = [0.9] * 7  # b decides nothing: the tie goes to the highest a-threshold ...
    y = [True, True, True, True, False, False, False]
    fit = fit_joint_thresholds(a, b, y, ("max_false_abstention", 0.0))
    assert fit.point.false_abstention == 0.0 and fit.first < 0.2 and fit.second == 0.0  # ... and lowest t
    assert fit.first == pytest.approx(0.15)  # rejects 0.1 (unanswerable) and keeps 0.2 (answerable)
    loose = fit_joint_thresholds(a, b, y, ("max_false_abstention", 0.25))
    assert loose.point.false_abstention == 0.25 and loose.point.false_acceptance == 0.0
    assert 0.35 < loose.first < 0.7


def test_joint_fit_refuses_bad_input():
    with pytest.raises(ValueError, match="differ in length"):
        fit_joint_thresholds([0.1, 0.2], [0.1], [True, False])
    with pytest.raises(ValueError, match="lie in"):
        fit_joint_thresholds([0.1, 1.2], [0.1, 0.2], [True, False])
    with pytest.raises(ValueError, match="unknown objective"):
        fit_joint_thresholds([0.1, 0.2], [0.1, 0.2], [True, False], "recall")
