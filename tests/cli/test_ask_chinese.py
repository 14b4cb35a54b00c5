"""`selfrag ask` in Chinese: the default ("auto") knowledge base gets the demo corpus with the
multilingual embedder (it is mixed), a Chinese question finds the Chinese documents, and the labels,
the abstention and its reason are in Chinese."""

import os

import dspy
import pytest
from typer.testing import CliRunner

from programs.language import ABSTAIN_ANSWERS, ABSTAIN_REASONS_ZH
from selfrag.cli.app import app
from tests.fakes import scripted_lm
from tests.kb.test_auto_embedder import fake_make

runner = CliRunner()


def script(word):
    return {
        "retrieve_decision": {"decision": "yes"},
        "grade_relevance": lambda inp: {"relevance": "relevant" if word in inp["passage"] else "irrelevant"},
        "grade_relevance_batch": lambda inp: {"verdicts": [
            {"number": n, "reason": "-", "relevance": "relevant" if word in part else "irrelevant"}
            for n, part in enumerate(inp["passages"].split("\n[")[0:], start=1)]},
        "generate_answer": {"answer": "2022 年 9 月，在上海徐汇区。", "citations": [1], "answerable": True},
        "judge_support": {"support": "fully"},
        "judge_usefulness": {"usefulness": 5},
        "rewrite_query": {"query": "门店"},
    }


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("SELFRAG_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setattr("selfrag.kb.embedder.make_embedder", fake_make)  # auto, without loading models
    monkeypatch.setattr("selfrag.paths.default_artifact", lambda: tmp_path / "no-default-artifact.json")

    def use(word):
        lm, engine = scripted_lm(script(word))
        monkeypatch.setattr("selfrag.wiring.build_lms", lambda settings: (lm, None, dspy.JSONAdapter()))
        return engine
    return use


def test_a_chinese_question_on_the_demo_corpus_is_answered_with_chinese_labels(workspace):
    workspace("上海")
    r = runner.invoke(app, ["ask", "红隼工坊在上海的门店是哪一年开的？", "--retrieve", "always"])
    assert r.exit_code == 0, r.output
    assert "ingested the demo corpus" in r.output and "2022 年 9 月" in r.output
    assert "回答" in r.output and "引用" in r.output and "zh-china.md" in r.output and "Citations" not in r.output
    r = runner.invoke(app, ["stats"])
    assert "use-m3" in r.output  # the demo corpus is mixed: auto chose the multilingual embedder


def test_a_chinese_question_abstains_in_chinese(workspace):
    workspace("没有这个词")
    r = runner.invoke(app, ["ask", "红隼工坊有几个员工在北京？", "--retrieve", "always"])
    assert r.exit_code == 0, r.output
    assert ABSTAIN_ANSWERS["zh"] in r.output and "未作答" in r.output
    assert ABSTAIN_REASONS_ZH["no_relevant_passage"][:12] in r.output
    r = runner.invoke(app, ["ask", "How many people work in Beijing?", "--retrieve", "always"])
    assert ABSTAIN_ANSWERS["en"] in r.output and "abstained" in r.output and "未作答" not in r.output
