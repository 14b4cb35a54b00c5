"""`selfrag compile` through typer's CliRunner (a scripted LM behind the wiring): the artifact and the table,
one-line errors for bad values, a bug keeps its traceback."""

import pytest
from typer.testing import CliRunner

from programs.artifacts import read_artifact
from selfrag.cli.app import app
from tests.optimize.test_compile import fake_lms

runner = CliRunner()


@pytest.fixture
def cli_lm(monkeypatch):
    lms, engine = fake_lms()
    monkeypatch.setattr("selfrag.wiring.build_lms", lambda settings: lms)
    return engine


def test_cli_compile_writes_the_artifact_and_prints_the_table(cli_lm, tmp_path):
    # a path is untrusted text: shown as written, after all the LM work (issue 15, 1)
    tmp_path = tmp_path / "art [/b]"
    result = runner.invoke(app, ["compile", "--optimizer", "bootstrap", "--judgement", "support", "--train", "8",
                                 "--dev", "4", "--budget", "2", "--name", "cli", "--out-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "Dev scores" in result.output and "support_accuracy" in result.output and "LM calls" in result.output
    assert f"Wrote {tmp_path / 'cli.json'}" in " ".join(result.output.split())
    payload = read_artifact(tmp_path / "cli.json")
    assert len(payload["state"]["judge_support"]["demos"]) == 2
    assert (tmp_path / "cli.manifest.json").is_file()
    assert payload["manifest"]["cost"]["lm_calls"] == len(cli_lm.calls)


@pytest.mark.parametrize("args, message", [
    (["--optimizer", "sgd"], "--optimizer must be one of"),
    (["--judgement", "honesty"], "unknown judgement"),
    (["--train", "0"], "--train must be >= 1"),
    (["--dev", "-1"], "--dev must be >= 0"),
    (["--budget", "0"], "--budget must be >= 1"),
    (["--name", "a/b"], "invalid artifact name"),
    (["--answer-objective", "max-false-abstention=0.1@1.5"], "--answer-objective must be"),
    (["--answer-objective", "max-false-abstention=x@0.9"], "--answer-objective must be"),
    (["--calibrate", "--cal-split", "test"], "--cal-split must be train or dev, got 'test'"),
    (["--cal-skip", "160"], "--cal-skip applies to the calibrate stage: add --calibrate"),
    (["--calibrate", "--cal-skip", "-1"], "Invalid value for '--cal-skip'"),
    (["--stated-rows", "x.manifest.json"], "--stated-rows refits the calibrate stage: add --calibrate"),
    (["--check-prior"], "--check-prior / --no-check-prior apply to the calibrate stage: add --calibrate"),
    (["--calibrate", "--judgement", "none", "--stated-rows", "nowhere.manifest.json"],
     "--stated-rows nowhere.manifest.json: cannot read a compile manifest"),
])
def test_cli_bad_values_exit_non_zero(cli_lm, tmp_path, args, message):
    result = runner.invoke(app, ["compile", "--out-dir", str(tmp_path), *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert cli_lm.calls == []


@pytest.mark.parametrize("text, objective", [
    ("accuracy", "accuracy"),
    ("max-false-abstention=0.1", ("max_false_abstention", 0.1)),
    (" Max-False-Abstention=0.05@0.9 ", ("max_false_abstention", 0.05, 0.9)),
])
def test_answer_objective_text_becomes_the_calibrate_objective(text, objective):
    from selfrag.cli.compile import parse_objective
    assert parse_objective(text) == objective


def test_cli_lets_a_bug_keep_its_traceback(cli_lm, tmp_path, monkeypatch):
    """Only user errors become one-line exits; an unexpected exception is not swallowed as one."""
    def broken(*args, **kwargs):
        raise KeyError("a bug")

    monkeypatch.setattr("optimize.compile.compile_program", broken)
    result = runner.invoke(app, ["compile", "--judgement", "support", "--out-dir", str(tmp_path)])
    assert isinstance(result.exception, KeyError) and result.exit_code == 1


def test_cli_missing_splits_is_a_one_line_error(cli_lm, tmp_path, monkeypatch):
    monkeypatch.setattr("selfrag.paths.splits_dir", lambda: tmp_path / "no-splits")
    result = runner.invoke(app, ["compile", "--judgement", "support", "--out-dir", str(tmp_path)])
    assert result.exit_code == 2 and "selfrag data build" in " ".join(result.output.split())
    assert cli_lm.calls == []


@pytest.mark.parametrize("calibration, problem", [
    ({"stages": {"stated": None}}, "'stated': not a stage report (an object), got None"),
    ({"stages": {"stated": []}}, "'stated': not a stage report (an object), got []"),
    ({"stages": {"stated": {"rows": [{"p_stated": 0.5, "answerable": True}]}}}, "'stated': row 1 is not"),
    ({"thresholds": [1], "stages": {"stated": {"rows": []}}}, "its calibration thresholds are not an object: [1]"),
])
def test_cli_a_malformed_stated_rows_manifest_is_one_line_before_any_model_is_built(tmp_path, monkeypatch,
                                                                                   calibration, problem):
    import json

    built = []
    monkeypatch.setattr("selfrag.wiring.build_lms", lambda settings: built.append(settings))
    bad = tmp_path / "bad.manifest.json"
    bad.write_text(json.dumps({"calibration": calibration}), encoding="utf-8")
    result = runner.invoke(app, ["compile", "--judgement", "none", "--calibrate", "--stated-rows", str(bad),
                                 "--out-dir", str(tmp_path)])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit)  # no traceback
    assert " ".join(result.stderr.split()).startswith(f"error: --stated-rows {bad}")
    assert len(result.stderr.strip().splitlines()) == 1
    assert problem in " ".join(result.stderr.split()) and built == []


def test_cli_the_same_stated_rows_twice_is_refused_before_any_model_is_built(tmp_path, monkeypatch):
    from tests.optimize.test_gate_check import manifest, noisy_rows

    built = []
    monkeypatch.setattr("selfrag.wiring.build_lms", lambda settings: built.append(settings))
    rows = manifest(tmp_path / "rows.manifest.json", {"stated": {"rows": noisy_rows(10)}})
    result = runner.invoke(app, ["compile", "--judgement", "none", "--calibrate", "--stated-rows", str(rows),
                                 "--stated-rows", str(rows), "--out-dir", str(tmp_path)])
    assert result.exit_code == 2 and built == []
    assert "the same manifest as" in " ".join(result.stderr.split())
