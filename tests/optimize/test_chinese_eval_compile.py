"""Compile and eval in Chinese on the CMRC-derived sets, with the scripted engine: eval --dataset cmrc
takes a third unanswerable questions and answers them from the cmrc-qa corpus (their paragraphs held
out); compile --language zh reads relevance_zh (and the other *_zh sets)."""

import dspy
import pytest

from optimize import eval_examples
from optimize.compile import compile_program
from optimize.evaluate import evaluate
from optimize.metrics import token_f1
from optimize.records_zh import held_out
from optimize.splits import load_split
from programs.registry import parse_programs
from selfrag import paths
from selfrag.settings import Settings, resolve
from tests.fakes import scripted_lm
from tests.optimize.test_compile import fake_lms

SPLITS = paths.splits_dir()
needs_zh = pytest.mark.skipif(not (SPLITS / "relevance_zh").is_dir(), reason="data/splits without the zh sets")


def test_balanced_takes_the_asked_share_of_unanswerable():
    ex = [dspy.Example(id=f"a{i}", answerable=True) for i in range(20)] + \
         [dspy.Example(id=f"u{i}", answerable=False) for i in range(20)]
    third = eval_examples.balanced(ex, 30, 1 / 3)
    assert sum(not e.answerable for e in third) == 10 and [e.answerable for e in third[:3]] == [True, True, False]
    assert [e.id for e in eval_examples.balanced(ex, 4)] == ["a0", "u0", "a1", "u1"]  # half: alternating
    assert eval_examples.unanswerable_share("cmrc") == pytest.approx(1 / 3)
    assert eval_examples.unanswerable_share("clapnq") == 0.5


def test_chinese_f1_is_character_level():
    assert token_f1("光荣和ω-force", "光荣和ω-force") == 1.0
    assert token_f1("一九九八年", "一九九八") == pytest.approx(2 * 0.8 * 1 / 1.8)


@needs_zh
def test_eval_on_cmrc_includes_unanswerable_questions_answered_from_the_qa_corpus(tmp_path, monkeypatch):
    from selfrag.wiring import build_knowledge_base

    monkeypatch.setenv("SELFRAG_KB__EMBEDDING_MODEL", "hash")
    monkeypatch.setenv("SELFRAG_KB__PATH", str(tmp_path / "kb"))
    monkeypatch.chdir(tmp_path)
    settings = resolve()
    examples = eval_examples.load_examples("cmrc", SPLITS, limit=9)
    corpus_ids = {e.related_doc_ids[0] for e in examples}
    monkeypatch.setattr("optimize.sources.corpus_documents", lambda name, d: [
        (f"段落 {i}", {"doc_id": i, "title": "", "source": "cmrc2018"}) for i in sorted(corpus_ids) if not held_out(i)]
        if name == "cmrc-qa" else pytest.fail(f"corpus {name}"))
    lm, _ = scripted_lm({"generate_answer": {"answer": "不知道", "citations": [1], "answerable": True}})
    out, summary = evaluate(settings, "cmrc", parse_programs("vanilla-rag"), lms=(lm, None, dspy.JSONAdapter()),
                            knowledge_base=lambda name: build_knowledge_base(settings, collection=name),
                            datasets_dir=tmp_path, splits_dir=SPLITS, limit=9, run_id="zh",
                            reports_dir=tmp_path / "reports")
    s = summary["programs"]["vanilla-rag"]
    assert (s["questions"], s["unanswerable"]) == (9, 3)
    assert summary["meta"]["collection"] == "eval-cmrc-qa"
    assert "character-level" in (out / "summary.md").read_text(encoding="utf-8")


def test_chinese_questions_from_a_qa_file_are_answered_from_the_corpus_cmrc_is(tmp_path, monkeypatch):
    """A zh QA file (or derived folder) was answered from the whole ``cmrc`` corpus, held-out paragraphs
    included: qa_zh's unanswerable questions became answerable. It takes --dataset cmrc's ``cmrc-qa``."""
    import json

    from selfrag.wiring import build_knowledge_base

    monkeypatch.setenv("SELFRAG_KB__EMBEDDING_MODEL", "hash")
    monkeypatch.setenv("SELFRAG_KB__PATH", str(tmp_path / "kb"))
    monkeypatch.chdir(tmp_path)
    settings = resolve()
    qa = tmp_path / "qa_zh.jsonl"
    qa.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in [
        {"question": "光荣公司成立于哪一年？", "answers": ["1978年"], "language": "zh"},
        {"question": "光荣公司的总部在哪里？", "answers": [], "language": "zh"}]) + "\n", encoding="utf-8")
    monkeypatch.setattr("optimize.sources.corpus_documents", lambda name, d: [
        ("光荣公司成立于1978年。", {"doc_id": "cmrc:1", "title": "", "source": "cmrc2018"})]
        if name == "cmrc-qa" else pytest.fail(f"corpus {name}"))
    lm, _ = scripted_lm({"generate_answer": {"answer": "1978年", "citations": [1], "answerable": True}})
    _, summary = evaluate(settings, str(qa), parse_programs("vanilla-rag"), lms=(lm, None, dspy.JSONAdapter()),
                          knowledge_base=lambda name: build_knowledge_base(settings, collection=name),
                          datasets_dir=tmp_path, splits_dir=SPLITS, run_id="zh-file",
                          reports_dir=tmp_path / "reports")
    assert summary["meta"]["collection"] == "eval-cmrc-qa"
    assert eval_examples.corpus_name(str(qa), [dspy.Example(language="zh")]) == eval_examples.corpus_name("cmrc")
    assert eval_examples.corpus_name(str(qa), [dspy.Example(language="en")]) == "clapnq"


@needs_zh
def test_compile_in_chinese_reads_the_zh_sets(tmp_path):
    lms, engine = fake_lms()
    with dspy.context(lm=None, adapter=None, callbacks=[]):
        result = compile_program(Settings(), splits_dir=SPLITS, optimizer="bootstrap", judgements="relevance",
                                 train=4, dev=4, budget=1, name="zh", out_dir=tmp_path, lms=lms, language="zh")
    zh = {e.question for e in load_split("relevance_zh", "train", SPLITS) + load_split("relevance_zh", "dev", SPLITS)}
    asked = [inp for role, inp in engine.calls if role == "grade_relevance"]
    assert asked and all(inp["question"] in zh for inp in asked)
    assert result.manifest["language"] == "zh"
