"""bench/bench_language.py: which questions it asks, how it scores the language, and the variant it runs."""

import dspy
import pytest

from programs.selfrag import SelfRAG
from tests.bench.conftest import import_bench
from tests.fakes import ListRetriever, scripted_lm


@pytest.fixture(scope="module")
def bench():
    return import_bench("bench_language")


def test_no_retrieval_questions_leave_out_translation_requests(bench, tmp_path):
    import json
    folder = tmp_path / "retrieve_zh"
    folder.mkdir()
    rows = {"train": [("你好，今天怎么样？", "no"), ("把这句话翻译成英文：早上好", "no"), ("他哪年出生？", "yes")],
            "dev": [("计算 8 除以 2。", "no")]}
    for split, items in rows.items():
        (folder / f"{split}.jsonl").write_text("".join(
            json.dumps({"id": f"{split}{i}", "question": q, "decision": d, "answer_so_far": ""}) + "\n"
            for i, (q, d) in enumerate(items)), encoding="utf-8")
    assert bench.no_retrieval_questions("retrieve_zh", tmp_path) == ["你好，今天怎么样？", "计算 8 除以 2。"]


def test_share_in_language_counts_a_failed_call_as_wrong_and_a_bare_number_as_right(bench):
    assert bench.share_in_language(["八", "eight", None, "十二加三十五等于四十七"], "zh") == 0.5
    assert bench.share_in_language(["47", "8.5 %", "I'm sorry"], "zh") == pytest.approx(2 / 3)
    assert bench.share_in_language(["eight"], "en") == 1.0
    assert bench.share_in_language([], "zh") == 0.0


def test_the_signature_variant_sends_the_current_docstring_and_the_artifact_one_what_was_loaded(bench):
    lm, _ = scripted_lm({"answer_directly": {"answer": "四十七"}})
    program = SelfRAG(ListRetriever([]), generator_lm=lm, adapter=dspy.JSONAdapter())
    program.answer_directly.signature = program.answer_directly.signature.with_instructions("Old words.")
    history_start = len(lm.history)
    stale = program.answer_directly
    fresh = bench.with_instructions(stale, SelfRAG.PREDICTORS["answer_directly"].instructions)
    calls = [{"question": "12加上35等于多少？"}]
    outputs, n_calls, tokens = bench.run(program, "answer_directly", stale, calls, "answer")
    assert outputs == ["四十七"] and n_calls == 1 and tokens == 10
    outputs, n_calls, _ = bench.run(program, "answer_directly", fresh, calls, "answer")
    assert outputs == ["四十七"] and n_calls == 1
    systems = [str(entry["messages"][0]["content"]) for entry in lm.history[history_start:]]
    assert "Old words." in systems[0] and "language of the question" not in systems[0]
    assert "language of the question" in systems[1]
    assert stale.signature.instructions == "Old words."  # the loaded predictor is left as it was


def test_a_failed_call_is_a_none_output_not_a_crash(bench):
    lm, _ = scripted_lm({"answer_directly": "no json here at all"})
    program = SelfRAG(ListRetriever([]), generator_lm=lm, adapter=dspy.JSONAdapter())
    outputs, n_calls, _ = bench.run(program, "answer_directly", program.answer_directly,
                                    [{"question": "你好"}], "answer")
    assert outputs == [None] and n_calls >= 1
