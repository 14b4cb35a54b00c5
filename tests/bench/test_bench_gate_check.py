"""bench/bench_gate_check.py: the gate and the check fitted alone, in sequence and jointly, on known rows."""

import json

import pytest

from tests.bench.conftest import import_bench


@pytest.fixture(scope="module")
def bench():
    return import_bench("bench_gate_check")


# 10 answerable, 10 unanswerable: the gate (similarity) catches unanswerable u0-u3, the check u4-u7;
# one answerable question is low on each signal, so a 0.1 false-abstention budget allows one of each.
ANS = [(0.9, 0.8, True)] * 8 + [(0.2, 0.8, True), (0.9, 0.2, True)]
UNANS = [(0.9, 0.1, False)] * 4 + [(0.1, 0.8, False)] * 4 + [(0.9, 0.8, False)] * 2


def test_the_joint_rule_combines_what_each_signal_catches_within_the_budget(bench):
    fit_rules, _point = bench.fit_rules, bench._point
    rules = fit_rules(ANS + UNANS, gate=0.15, bound=0.1)
    assert _point(ANS + UNANS, *rules["check alone"]) == (0.4, 0.0)
    assert _point(ANS + UNANS, *rules["gate alone"]) == (0.4, 0.0)
    assert _point(ANS + UNANS, *rules["gate, then check"]) == (0.8, 0.0)
    assert _point(ANS + UNANS, *rules["joint"]) == (0.8, 0.0)
    s, t, w = rules["weighted (calibrate)"]  # what calibrate fits: a weight, a gate, a threshold on the score
    assert 0.0 <= w < 1.0 and _point(ANS + UNANS, s, t, w)[1] <= 0.1
    rules = fit_rules(ANS + UNANS, gate=0.15, bound=0.0)
    assert all(_point(ANS + UNANS, *stw)[1] == 0.0 for stw in rules.values())


def test_a_manifest_without_rows_is_refused_with_its_path(bench, tmp_path):
    manifest_rows = bench.manifest_rows
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"thresholds": {}, "calibration": {"stages": {"stated": {}}}}))
    with pytest.raises(SystemExit, match="m.json: its stated calibration stage recorded no rows"):
        manifest_rows([path])
    rows = [{"p_stated": None, "top_similarity": 0.4, "answerable": True}]
    path.write_text(json.dumps({"thresholds": {"similarity": 0.3},
                                "calibration": {"stages": {"stated": {"rows": rows}}}}))
    assert manifest_rows([path]) == ([(0.0, 0.4, True)], 0.3)
    assert manifest_rows([path, path]) == ([(0.0, 0.4, True)] * 2, 0.3)  # pooled


def test_a_confidence_level_refits_the_weighted_rule_with_a_margin(bench):
    # 40 answerable questions whose P(stated) climbs by 1/40, 80 unanswerable below 0.5 at four per 1/40:
    # the accuracy fit spends the whole false-abstention budget, the confidence bound leaves a margin
    rows = ([(i / 40, 0.9, True) for i in range(1, 41)]
            + [(j / 160 + 0.001, 0.9, False) for j in range(80)])
    rules = bench.fit_rules(rows, gate=0.0, bound=0.1, confidences=(0.9,))
    plain = bench._point(rows, *rules["weighted (calibrate)"])
    margin = bench._point(rows, *rules["weighted, upper bound at 0.9"])
    assert plain[1] == pytest.approx(0.1)
    assert margin[1] == pytest.approx(1 / 40) and margin[0] < plain[0]  # 2 of 40 would put the bound over 0.1
