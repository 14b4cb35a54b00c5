"""`selfrag compile --program NAME`: a strategy program compiled end to end through the CLI (scripted LM,
a stand-in collection), the combinations it refuses before any model is loaded, and `ask --program` answering
as the program an artifact was compiled for."""

import json

import dspy
import pytest
from typer.testing import CliRunner

from programs.artifacts import read_artifact
from selfrag.cli.app import app
from tests.cli.test_ask import workspace  # noqa: F401  (fixture)
from tests.optimize.test_compile import fake_lms
from tests.optimize.test_compile_strategy import (CRAG_PROBS, SCRIPT, FakeKB, QueryRetriever, compile_iterative,
                                                  qa_loader, relevance_loader)

runner = CliRunner()


@pytest.mark.parametrize("args, message", [
    (["--program", "iterative"], "--program iterative compiles end to end only: use --e2e --judgement none"),
    (["--program", "iterative", "--e2e", "--judgement", "support"], "compiles end to end only"),
    (["--program", "decompose-serial", "--e2e", "--calibrate"], "--calibrate is SelfRAG's and CRAG's"),
    (["--program", "crag"], "--program crag compiles end to end and / or calibrates"),
    (["--program", "crag", "--calibrate", "--judgement", "relevance"], "the judgement stages are SelfRAG's"),
    (["--program", "crag", "--calibrate", "--cal-skip", "3"], "apply to SelfRAG's calibrate stage"),
    (["--program", "crag", "--calibrate", "--cal-crag", "2"], "--cal-crag"),
    (["--program", "bogus", "--e2e"], "unknown program 'bogus'"),
])
def test_bad_combinations_are_refused_before_any_model_is_loaded(tmp_path, monkeypatch, args, message):
    def no_model(settings):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr("selfrag.wiring.build_lms", no_model)
    result = runner.invoke(app, ["compile", "--out-dir", str(tmp_path), *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert list(tmp_path.iterdir()) == []


def test_cli_compiles_iterative_end_to_end(tmp_path, monkeypatch):
    lms, engine = fake_lms(SCRIPT)
    monkeypatch.setattr("selfrag.wiring.build_lms", lambda settings: lms)
    monkeypatch.setattr("selfrag.wiring.build_knowledge_base",
                        lambda settings, collection=None, embedder=None: FakeKB(QueryRetriever()))
    monkeypatch.setattr("optimize.compile_strategy.load_split", lambda task, split, splits_dir: qa_loader(task, split))
    result = runner.invoke(app, ["compile", "--program", "iterative", "--e2e", "--e2e-train", "3", "--e2e-dev", "2",
                                 "--budget", "2", "--name", "it", "--out-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "e2e_metric" in result.output and "LM calls" in result.output
    payload = read_artifact(tmp_path / "it.json")
    assert payload["program"] == "IterativeRAG" and len(payload["state"]["next_query"]["demos"]) == 2
    manifest = json.loads((tmp_path / "it.manifest.json").read_text())
    assert manifest["program_name"] == "iterative" and manifest["cost"]["lm_calls"] == len(engine.calls)


def test_cli_calibrates_crag_and_prints_its_thresholds(tmp_path, monkeypatch):
    from tests.fakes import scripted_lm

    lm, engine = scripted_lm({"evaluate_retrieval": lambda inp: {"score": 8 if "Eco" in inp["passage"] else 3}},
                             probs=CRAG_PROBS)
    monkeypatch.setattr("selfrag.wiring.build_lms", lambda settings: (lm, None, dspy.JSONAdapter()))
    monkeypatch.setattr("selfrag.wiring.build_knowledge_base", lambda *a, **k: pytest.fail("no collection needed"))
    monkeypatch.setattr("optimize.compile_strategy.load_split",
                        lambda task, split, splits_dir: relevance_loader(task, split))
    result = runner.invoke(app, ["compile", "--program", "crag", "--calibrate", "--cal-crag", "6", "--name", "c",
                                 "--out-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "calibrate" in result.output and "5.5 / 5.5" in result.output  # the fitted upper / lower
    assert len(engine.calls) == 6
    assert read_artifact(tmp_path / "c.json")["thresholds"]["crag"]["score"] == "expected"


def test_cli_calibrates_crag_for_chinese_questions_into_their_own_set(tmp_path, monkeypatch):
    from tests.fakes import scripted_lm

    def chinese_relevance(task, split):
        assert task == "relevance_zh"  # --language zh reads the Chinese sets
        return [ex.copy(question=f"Heron {i} 型的续航是多少？") for i, ex in enumerate(relevance_loader("relevance", split))]

    lm, engine = scripted_lm({"evaluate_retrieval": lambda inp: {"score": 8 if "Eco" in inp["passage"] else 3}},
                             probs=CRAG_PROBS)
    monkeypatch.setattr("selfrag.wiring.build_lms", lambda settings: (lm, None, dspy.JSONAdapter()))
    monkeypatch.setattr("selfrag.wiring.build_knowledge_base", lambda *a, **k: pytest.fail("no collection needed"))
    monkeypatch.setattr("optimize.compile_strategy.load_split", lambda task, split, splits_dir: (
        chinese_relevance if task == "relevance_zh" else relevance_loader)(task, split))
    result = runner.invoke(app, ["compile", "--program", "crag", "--calibrate", "--cal-crag", "6", "--language", "zh",
                                 "--name", "c", "--out-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "(zh" in result.output and len(engine.calls) == 6  # the table's stage names the language
    thresholds = read_artifact(tmp_path / "c.json")["thresholds"]
    assert json.loads((tmp_path / "c.manifest.json").read_text())["calibration"]["stages"]["crag"]["language"] == "zh"
    assert "crag" not in thresholds and thresholds["crag_by_language"]["zh"]["upper"] == 5.5
    # the English fit on top (--from): one artifact carries the set for any language and the Chinese one
    both = runner.invoke(app, ["compile", "--program", "crag", "--calibrate", "--cal-crag", "6", "--from",
                               str(tmp_path / "c.json"), "--name", "both", "--out-dir", str(tmp_path)])
    assert both.exit_code == 0, both.output
    thresholds = read_artifact(tmp_path / "both.json")["thresholds"]
    assert thresholds["crag"]["upper"] == 5.5 and thresholds["crag_by_language"]["zh"]["upper"] == 5.5


def test_a_data_folder_with_a_language_is_refused_except_for_crag(tmp_path, monkeypatch):
    monkeypatch.setattr("selfrag.wiring.build_lms", lambda settings: pytest.fail("a model was loaded"))
    result = runner.invoke(app, ["compile", "--data", str(tmp_path), "--language", "zh", "--out-dir", str(tmp_path)])
    assert result.exit_code == 2 and "a --data folder is compiled as it is" in " ".join(result.output.split())
    crag = runner.invoke(app, ["compile", "--program", "crag", "--calibrate", "--data", str(tmp_path), "--language",
                               "zh", "--out-dir", str(tmp_path)])
    assert crag.exit_code == 2 and "as it is" not in crag.output  # past that check: the empty folder is refused
    e2e = runner.invoke(app, ["compile", "--program", "crag", "--e2e", "--data", str(tmp_path), "--language", "zh",
                              "--out-dir", str(tmp_path)])
    assert e2e.exit_code == 2 and "a --data folder is compiled as it is" in " ".join(e2e.output.split())
    assert "manifest" in crag.output.lower() or "derive" in crag.output.lower(), crag.output


def test_ask_answers_as_the_program_the_artifact_was_compiled_for(workspace, tmp_path):  # noqa: F811
    compiled, _ = compile_iterative(tmp_path / "artifacts")
    workspace.script.update(SCRIPT)
    result = runner.invoke(app, ["ask", "What is the range of the Heron?", "--program", str(compiled.artifact),
                                 "--json"])
    assert result.exit_code == 0, result.output
    steps = [s["step"] for s in json.loads(result.output[result.output.index("{"):])["trace"]]
    assert "retrieve_decision" not in steps and "generate_answer" in steps  # IterativeRAG, not SelfRAG
