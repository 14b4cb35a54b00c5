"""bench/bench_crag_evaluator.py: argmax and expected evaluator scores against gold relevance."""

import json

import pytest

from optimize.calibrate_crag import fit_crag_thresholds
from tests.bench.conftest import import_bench


@pytest.fixture(scope="module")
def bench():
    return import_bench("bench_crag_evaluator")


def _row(relevant, probs, language="en"):
    return {"language": language, "id": "x", "relevant": relevant, "probs": probs, "seconds": 1.0}


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


def test_fitted_thresholds_route_the_other_split(bench, tmp_path, monkeypatch, capsys):
    train = [_row(True, {"8": 0.6, "6": 0.4}), _row(True, {"9": 0.5, "5": 0.5}),
             _row(False, {"3": 0.7, "6": 0.3}), _row(False, {"4": 0.5, "2": 0.5})]
    dev = [_row(True, {"10": 0.3, "6": 0.7}), _row(False, {"10": 0.4, "2": 0.6})]
    (tmp_path / "train.json").write_text(json.dumps(train))
    (tmp_path / "dev.json").write_text(json.dumps(dev))
    fitted = fit_crag_thresholds(train)
    (line,) = bench.summarize(dev, 7, 4, fitted)
    assert line["expected_fitted"]["upper"] == fitted[0] and line["expected_fitted"]["relevant_correct"] == 1.0
    monkeypatch.setattr("sys.argv", ["bench_crag_evaluator.py", "--from-rows", str(tmp_path / "dev.json"),
                                     "--fit-rows", str(tmp_path / "train.json")])
    bench.main()
    assert f"crag_upper = {fitted[0]:g}" in capsys.readouterr().out


def test_each_language_is_routed_at_its_own_default_and_languages_filter_the_files(bench, tmp_path, monkeypatch,
                                                                                 capsys):
    from programs.thresholds import default_crag

    rows = [_row(True, {"9": 1.0}), _row(False, {"2": 1.0}), _row(True, {"8": 1.0}, "zh"), _row(False, {"8": 1.0}, "zh")]
    lines = {line["language"]: line for line in bench.summarize(rows)}
    for language in ("en", "zh"):
        default = default_crag(language)
        assert (lines[language]["expected"]["upper"], lines[language]["expected"]["lower"]) == (default.upper,
                                                                                                default.lower)
    assert lines["zh"]["expected"]["upper"] != lines["en"]["expected"]["upper"]
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows))
    monkeypatch.setattr("sys.argv", ["bench_crag_evaluator.py", "--from-rows", str(path), "--fit-rows", str(path),
                                     "--languages", "zh"])
    bench.main()
    out = capsys.readouterr().out
    assert "│ zh" in out and "│ en" not in out and "(2 passages)" in out  # the fit read the Chinese rows only
