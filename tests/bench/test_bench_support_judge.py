"""bench/bench_support_judge.py: the support judge's separation and the replay with the check standing in."""

import json

import pytest

from tests.bench.conftest import import_bench


@pytest.fixture(scope="module")
def bench():
    return import_bench("bench_support_judge")


def _step(name, output="", tokens=0, calls=0, probs=None):
    return {"step": name, "output": output, "prompt_tokens": tokens, "lm_calls": calls, "probs": probs}


def _judged(qid, answerable, p_stated, p_support, answer, abstained, f1, regenerated=False):
    steps = [_step("retrieve"), _step("check_answer", "yes", 500, 1, {"yes": p_stated, "no": 1 - p_stated}),
             _step("generate_answer", "first draft", 550, 1, {"true": 1.0}),
             _step("judge_support", "x", 1100, 1, p_support)]
    if regenerated:
        steps.append(_step("generate_answer", answer, 600, 1))
    tokens = sum(s["prompt_tokens"] for s in steps)
    return {"id": qid, "answerable": answerable, "abstained": abstained, "answer": answer, "scores": {"f1": f1},
            "usage": {"prompt_tokens": tokens, "lm_calls": len([s for s in steps if s["lm_calls"]])},
            "result": {"trace": steps}}


def _rows():
    gated = {"id": "g", "answerable": True, "abstained": True, "answer": "", "scores": {"f1": 0.0},
             "usage": {"prompt_tokens": 140, "lm_calls": 1}, "result": {"trace": [_step("similarity_gate")]}}
    return [
        # answerable, the judge said no (uniform-ish) and the program abstained: the replay answers "first draft"
        _judged("a", True, 0.8, {"fully": 0.1, "partially": 0.2, "no": 0.7}, "", True, 0.0, regenerated=True),
        # unanswerable, the judge said fully: answered either way
        _judged("u", False, 0.7, {"fully": 0.9, "partially": 0.1, "no": 0.0}, "first draft", False, 0.0),
        # unanswerable, P(stated) under the answer threshold: the replay abstains
        _judged("v", False, 0.3, {"fully": 0.5, "partially": 0.5, "no": 0.0}, "first draft", False, 0.0),
        gated,
    ]


def test_the_replay_keeps_the_first_draft_and_drops_the_calls_from_the_judge_on(bench):
    r = bench.replay(_rows(), 0.44, {"a": ["the first draft it was"]})
    assert r["judged"] == 3
    # the judge rated the answerable question lowest: it separates them the wrong way round
    assert r["auc_answerable"] == 0.0
    actual, replayed = r["actual"], r["replayed"]
    assert actual["false_abstention"] == 1.0 and actual["abstention"] == 0.0
    assert replayed["false_abstention"] == 0.5  # "a" answered now, the gated one still abstains
    assert replayed["abstention"] == 0.5  # "v" abstains on its P(stated) 0.3 < 0.44
    assert replayed["f1"] == pytest.approx((bench_f1("first draft", "the first draft it was") + 0.0) / 2)
    assert replayed["tokens"] == pytest.approx((1050 * 3 + 140) / 4) and replayed["calls"] == pytest.approx(2 * 3 / 4 + 0.25)
    assert r["support_token_share"] == pytest.approx(3300 / sum(row["usage"]["prompt_tokens"] for row in _rows()))


def bench_f1(prediction, gold):
    from optimize.metrics import token_f1

    return token_f1(prediction, gold)


def test_a_changed_answer_without_its_gold_is_left_out_of_f1_and_counted(bench):
    r = bench.replay(_rows(), 0.44, {})
    assert r["f1_unknown"] == 1


def test_runs_are_read_from_their_folders(bench, tmp_path, monkeypatch, capsys):
    run = tmp_path / "r1"
    run.mkdir()
    (run / "results.jsonl").write_text("".join(json.dumps(row) + "\n" for row in _rows()))
    (run / "config.json").write_text(json.dumps({"programs": ["selfrag"], "program_settings": {"answer_threshold": 0.44}}))
    qa = tmp_path / "qa.jsonl"
    qa.write_text(json.dumps({"id": "a", "question": "q", "answers": ["first draft"]}) + "\n")
    monkeypatch.setattr("sys.argv", ["bench_support_judge.py", "r1", "--reports", str(tmp_path), "--qa", str(qa)])
    bench.main()
    out = capsys.readouterr().out
    assert "| r1 | 4 | 3 | 0.000 |" in out
    assert "0.50 / 0.50 / 0.500 / 822 / 1.75" in out  # replayed: abstention, false abstention, F1, tokens, calls
