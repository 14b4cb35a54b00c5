"""bench/bench_crag_evaluator.py: argmax and expected evaluator scores against gold relevance."""

import json

import pytest

from tests.bench.conftest import import_bench


@pytest.fixture(scope="module")
def bench():
    return import_bench("bench_crag_evaluator")


def _row(relevant, probs, language="en"):
    return {"language": language, "id": "x", "relevant": relevant, "probs": probs, "seconds": 1.0}


def test_scores_are_the_argmax_and_the_expectation(bench):
    assert bench.scores_of(_row(True, {"10": 0.4, "2": 0.35, "0": 0.25})) == (10.0, pytest.approx(4.7))
    assert bench.scores_of(_row(True, {"3": 0.5, "8": 0.5})) == (3.0, 5.5)  # a tie goes to the lower score
    assert bench.scores_of(_row(True, None)) is None


def test_the_expectation_separates_what_the_argmax_ties(bench):
    # every passage's argmax is 10; only the mass below it tells the relevant ones apart
    rows = [_row(True, {"10": 0.6, "9": 0.4}), _row(True, {"10": 0.55, "8": 0.45}),
            _row(False, {"10": 0.4, "1": 0.3, "0": 0.3}), _row(False, {"10": 0.45, "2": 0.3, "3": 0.25}),
            _row(False, None)]
    (line,) = bench.summarize(rows, upper=7, lower=4)
    assert line["n"] == 5 and line["failed"] == 1
    assert line["argmax"]["auc"] == 0.5 and line["expected"]["auc"] == 1.0
    assert line["argmax"]["relevant_correct"] == 1.0 and line["argmax"]["irrelevant_incorrect"] == 0.0
    assert line["argmax"]["irrelevant_correct"] == 1.0  # every irrelevant passage trusted
    assert line["expected"]["irrelevant_incorrect"] == 0.0  # 4.3 and 5.85 are not < 4
    assert line["expected"]["irrelevant_correct"] == 0.0 and line["expected"]["relevant_incorrect"] == 0.0
    assert line["expected"]["best_accuracy"] == 1.0 and 5.85 < line["expected"]["best_cut"] <= 9.1


def test_the_table_reprints_from_kept_rows_without_a_model(bench, tmp_path, monkeypatch, capsys):
    rows = [_row(True, {"9": 1.0}), _row(False, {"2": 1.0}), _row(True, {"8": 1.0}, "zh"), _row(False, {"8": 1.0}, "zh")]
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows))
    monkeypatch.setattr(bench, "record_rows", lambda args: pytest.fail("--from-rows must not ask the model"))
    monkeypatch.setattr("sys.argv", ["bench_crag_evaluator.py", "--from-rows", str(path)])
    bench.main()
    out = capsys.readouterr().out
    assert "CRAG evaluator" in out and out.count("expected") >= 2 and "zh" in out


def test_thresholds_are_fitted_on_the_expected_score_to_stated_error_shares(bench):
    # expected scores: relevant 6, 7, 8, 9, 9 and irrelevant 2, 3, 4, 5, 8, each twice
    rel = [_row(True, {str(v): 1.0}) for v in (6, 7, 8, 9, 9)] * 2
    irr = [_row(False, {str(v): 1.0}) for v in (2, 3, 4, 5, 8)] * 2
    upper, lower = bench.fit_thresholds(rel + irr, max_trusted=0.2, max_dropped=0.2)
    assert upper == 5.5  # the irrelevant 8s are 20% and may be trusted; the 5s may not
    assert lower == 5.5  # under 6.5 only the relevant 6s (20%) would be dropped, but lower never exceeds upper
    upper, lower = bench.fit_thresholds(rel + irr, max_trusted=0.0, max_dropped=0.0)
    assert (upper, lower) == (8.5, 5.5)  # trust nothing irrelevant: above 8; drop nothing relevant: under 6
    with pytest.raises(ValueError, match="relevant and irrelevant"):
        bench.fit_thresholds(rel)


def test_fitted_thresholds_route_the_other_split(bench, tmp_path, monkeypatch, capsys):
    train = [_row(True, {"8": 0.6, "6": 0.4}), _row(True, {"9": 0.5, "5": 0.5}),
             _row(False, {"3": 0.7, "6": 0.3}), _row(False, {"4": 0.5, "2": 0.5})]
    dev = [_row(True, {"10": 0.3, "6": 0.7}), _row(False, {"10": 0.4, "2": 0.6})]
    (tmp_path / "train.json").write_text(json.dumps(train))
    (tmp_path / "dev.json").write_text(json.dumps(dev))
    fitted = bench.fit_thresholds(train)
    (line,) = bench.summarize(dev, 7, 4, fitted)
    assert line["expected_fitted"]["upper"] == fitted[0] and line["expected_fitted"]["relevant_correct"] == 1.0
    monkeypatch.setattr("sys.argv", ["bench_crag_evaluator.py", "--from-rows", str(tmp_path / "dev.json"),
                                     "--fit-rows", str(tmp_path / "train.json")])
    bench.main()
    assert f"crag_upper = {fitted[0]:g}" in capsys.readouterr().out
