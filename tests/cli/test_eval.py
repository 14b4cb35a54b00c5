"""`selfrag eval` through typer's CliRunner on the five-example set of tests/optimize/test_evaluate.py: the
table, the report files, one-line errors for an unknown program and a missing artifact."""

import dspy
from typer.testing import CliRunner

from selfrag.cli.app import app
from tests.fakes import scripted_lm
from tests.optimize.test_evaluate import SCRIPT, fake_corpus, hash_kb_settings, write_dataset  # noqa: F401 - fixture

runner = CliRunner()


def test_cli_eval_runs_and_prints_the_table(hash_kb_settings, tmp_path, monkeypatch):
    monkeypatch.setattr("optimize.sources.corpus_documents", fake_corpus)
    lm, _ = scripted_lm(SCRIPT)
    monkeypatch.setattr("selfrag.wiring.build_lms", lambda settings: (lm, None, dspy.JSONAdapter()))
    data = write_dataset(tmp_path / "five.jsonl")
    result = runner.invoke(app, ["eval", "--dataset", str(data), "--programs", "vanilla-rag,no-retrieval",
                                 "--run-id", "cli", "--reports", str(tmp_path / "rep")])
    assert result.exit_code == 0, result.output
    assert "| vanilla-rag | 5 | 0 |" in result.output
    assert (tmp_path / "rep" / "cli" / "quality_vs_cost.png").stat().st_size > 0
    bad = runner.invoke(app, ["eval", "--programs", "bogus"])
    assert bad.exit_code == 2 and "unknown program" in bad.output
    missing = runner.invoke(app, ["eval", "--dataset", str(data), "--programs", f"compiled:{tmp_path / 'no.json'}",
                                  "--run-id", "bad", "--reports", str(tmp_path / "rep")])
    assert missing.exit_code == 2 and "compiled artifact not found" in " ".join(missing.output.split())
    assert isinstance(missing.exception, SystemExit)  # a one-line exit, not a traceback
