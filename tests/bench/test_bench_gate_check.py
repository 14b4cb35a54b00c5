"""bench/bench_gate_check.py: the gate and the check fitted alone, in sequence and jointly, on known rows."""

import json

import pytest

from tests.bench.conftest import import_bench


@pytest.fixture(scope="module")
def bench():
    return import_bench("bench_gate_check")


def rows(*triples):
    """gate_check rows from (P(stated), top similarity, answerable)."""
    return [{"p_stated": p, "top_similarity": sim, "answerable": a} for p, sim, a in triples]


# 10 answerable, 10 unanswerable: the gate (similarity) catches unanswerable u0-u3, the check u4-u7;
# one answerable question is low on each signal, so a 0.1 false-abstention budget allows one of each.
ANS = rows(*[(0.9, 0.8, True)] * 8, (0.2, 0.8, True), (0.9, 0.2, True))
UNANS = rows(*[(0.9, 0.1, False)] * 4, *[(0.1, 0.8, False)] * 4, *[(0.9, 0.8, False)] * 2)


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
    with pytest.raises(SystemExit, match="m.json 'stated': no rows recorded"):
        manifest_rows([path])
    recorded = [{"p_stated": None, "top_similarity": 0.4, "answerable": True}]
    path.write_text(json.dumps({"thresholds": {"similarity": 0.3},
                                "calibration": {"stages": {"stated": {"rows": recorded}}}}))
    assert manifest_rows([path]) == (recorded, 0.3)  # read as calibrate reads it: None stays None
    other = tmp_path / "n.json"
    other.write_text(json.dumps({"calibration": {"stages": {"stated": {"rows": recorded * 2}}}}))
    assert manifest_rows([path, other]) == (recorded * 3, 0.3)  # pooled
    with pytest.raises(SystemExit, match="the same manifest"):  # as calibrate: its rows would count twice
        manifest_rows([path, path])


def test_rows_are_read_and_decided_as_calibrate_decides_them(bench, tmp_path):
    unchecked = {"p_stated": None, "top_similarity": 0.9, "answerable": False}  # the check's call failed
    no_similarity = {"p_stated": 0.9, "top_similarity": None, "answerable": True}
    assert bench._point([unchecked], 0.5, 0.5) == (0.0, 0.0)  # answered unless the gate stops it
    assert bench._point([{**unchecked, "top_similarity": 0.1}], 0.5, 0.5) == (1.0, 0.0)
    assert bench._point([no_similarity], 0.95, 0.5) == (0.0, 0.0)  # never gated
    prior = {"p_stated": 0.7, "p_prior": 0.6, "top_similarity": 0.9, "answerable": False}  # contrast 0.55
    assert bench._point([prior], 0.0, 0.6) == (1.0, 0.0) and bench._point([prior], 0.0, 0.5) == (0.0, 0.0)


def test_the_weighted_rule_is_calibrates_fit_on_a_recorded_manifest(bench):
    from pathlib import Path

    from optimize.gate_check import RecordedRows, fit_gate_and_check

    path = Path(__file__).parents[2] / "bench/results/en-prior-train300-rows.manifest.json"
    stage = "stated@e5-small@en"
    recorded, _ = bench.manifest_rows([path], stage)  # rows recorded with the check's prior
    assert recorded == RecordedRows([path])(stage, "", check_prior=True)
    recorded = recorded[:80]  # (the brute-force rules on all 300 take ~20 s)
    fit = fit_gate_and_check(recorded, ("max_false_abstention", 0.1))
    rule = bench.fit_rules(recorded, gate=0.0, bound=0.1)["weighted (calibrate)"]
    assert rule == (fit["similarity"], fit["stated"], fit["stated_similarity_weight"])
    assert bench._point(recorded, *rule) == pytest.approx(
        (fit["abstention_unanswerable"], fit["false_abstention"]), abs=1e-4)


def test_a_confidence_level_refits_the_weighted_rule_with_a_margin(bench):
    # 40 answerable questions whose P(stated) climbs by 1/40, 80 unanswerable below 0.5 at four per 1/40:
    # the accuracy fit spends the whole false-abstention budget, the confidence bound leaves a margin
    fit_rows = rows(*[(i / 40, 0.9, True) for i in range(1, 41)],
                    *[(j / 160 + 0.001, 0.9, False) for j in range(80)])
    rules = bench.fit_rules(fit_rows, gate=0.0, bound=0.1, confidences=(0.9,))
    plain = bench._point(fit_rows, *rules["weighted (calibrate)"])
    margin = bench._point(fit_rows, *rules["weighted, upper bound at 0.9"])
    assert plain[1] == pytest.approx(0.1)
    assert margin[1] == pytest.approx(1 / 40) and margin[0] < plain[0]  # 2 of 40 would put the bound over 0.1
