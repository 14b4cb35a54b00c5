"""`selfrag ask` through typer's CliRunner: demo ingest on first run, rendering, JSON, bad input."""

import json

import dspy
import pytest
from typer.testing import CliRunner

from selfrag.cli.app import app
from tests.fakes import scripted_lm

runner = CliRunner()

SCRIPT = {
    "retrieve_decision": {"decision": "yes"},
    "grade_relevance": lambda inp: {"relevance": "relevant" if "Heron" in inp["passage"] else "irrelevant"},
    "generate_answer": {"answer": "About 80 km on the Eco setting.", "citations": [1], "answerable": True},
    "judge_support": {"support": "fully"},
    "judge_usefulness": {"usefulness": 5},
}


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """A fresh knowledge base (hash embedder: no model) and a scripted LM behind the wiring."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SELFRAG_KB__PATH", str(tmp_path / "kb"))
    monkeypatch.setenv("SELFRAG_KB__EMBEDDING_MODEL", "hash")
    monkeypatch.setattr("selfrag.paths.default_artifact", lambda: tmp_path / "no-default-artifact.json")
    lm, engine = scripted_lm(SCRIPT)
    monkeypatch.setattr("selfrag.wiring.build_lms", lambda settings: (lm, None, dspy.JSONAdapter()))
    return engine


def test_first_ask_ingests_the_demo_corpus_and_answers_with_citations(workspace):
    result = runner.invoke(app, ["ask", "What is the range of the Heron cargo bike?"])
    assert result.exit_code == 0, result.output
    assert "ingested the demo corpus" in result.output
    assert "About 80 km" in result.output
    assert "heron.md" in result.output  # citation source
    assert "Trace" in result.output and "grade_relevance" in result.output
    again = runner.invoke(app, ["ask", "What is the range of the Heron cargo bike?"])
    assert again.exit_code == 0 and "ingested the demo corpus" not in again.output


def test_json_output_is_the_typed_result(workspace):
    result = runner.invoke(app, ["ask", "What is the range of the Heron cargo bike?", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output[result.output.index("{"):])
    assert payload["answer"] == "About 80 km on the Eco setting."
    assert payload["retrieved"] is True and payload["abstained"] is False
    assert payload["citations"][0]["source"].endswith("heron.md")
    assert payload["usage"]["lm_calls"] == len(workspace.calls)
    assert [s["step"] for s in payload["trace"]][0] == "retrieve_decision"


def test_empty_question_exits_non_zero(workspace):
    result = runner.invoke(app, ["ask", "   "])
    assert result.exit_code == 2
    assert "question is empty" in result.output
    assert workspace.calls == []


def test_invalid_setting_names_the_problem(workspace):
    result = runner.invoke(app, ["ask", "q?", "--retrieve", "sometimes"])
    assert result.exit_code == 2
    assert "program.retrieve_mode" in result.output


def test_missing_config_file_exits_non_zero(workspace, tmp_path):
    result = runner.invoke(app, ["ask", "q?", "--config", str(tmp_path / "nope.toml")])
    assert result.exit_code == 2 and "config file not found" in result.output


def test_missing_artifact_is_refused(workspace, tmp_path):
    result = runner.invoke(app, ["ask", "q?", "--program", str(tmp_path / "missing.json")])
    assert result.exit_code == 2 and "artifact not found" in result.output


def test_crag_strategy_is_selected_by_setting(workspace):
    workspace.script.update({
        "evaluate_retrieval": lambda inp: {"score": 9 if "Heron" in inp["passage"] else 1},
        "filter_strip": lambda inp: {"keep": "range" in inp["strip"]},
    })
    result = runner.invoke(app, ["ask", "What is the range of the Heron cargo bike?", "--strategy", "crag", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output[result.output.index("{"):])
    steps = [s["step"] for s in payload["trace"]]
    assert "evaluate_retrieval" in steps and "retrieve_decision" not in steps
    assert payload["answer"] == "About 80 km on the Eco setting."


def test_a_bug_while_answering_keeps_its_traceback(workspace, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the wiring")

    monkeypatch.setattr("selfrag.wiring.build_runtime", broken)
    result = runner.invoke(app, ["ask", "What is the range of the Heron cargo bike?"])
    assert result.exit_code == 1 and isinstance(result.exception, RuntimeError)
    assert "error:" not in result.output


def test_config_file_via_short_option(workspace, tmp_path):
    cfg = tmp_path / "strategy.toml"
    cfg.write_text('[program]\nretrieve_mode = "sometimes"\n')
    result = runner.invoke(app, ["ask", "q?", "-c", str(cfg)])
    assert result.exit_code == 2 and "program.retrieve_mode" in result.output
