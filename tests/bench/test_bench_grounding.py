"""bench/bench_grounding.py: the drafted questions of a run, the teacher-forced scorer, the abstention table."""

import math

import numpy as np
import pytest

from tests.bench.conftest import import_bench

VOCAB = 128
Z = math.exp(2.0) + VOCAB - 1  # every position: logit 2 for the next code point, 0 for the rest


@pytest.fixture(scope="module")
def bench():
    return import_bench("bench_grounding")


class FakeLlama:
    """Characters are tokens; after character c the model prefers chr(c + 1). Records what it evaluates."""

    def __init__(self):
        self.scores = np.zeros((256, VOCAB), dtype=np.float32)
        self._input_ids = np.zeros(256, dtype=np.int64)
        self.n_tokens = 0
        self.evaluated = []

    def tokenize(self, text, add_bos=False, special=True):
        return list(text)

    def eval(self, tokens):
        for t in tokens:
            row = np.zeros(VOCAB, dtype=np.float32)
            row[(t + 1) % VOCAB] = 2.0
            self.scores[self.n_tokens] = row
            self._input_ids[self.n_tokens] = t
            self.n_tokens += 1
        self.evaluated.append(len(tokens))


class Prompt:
    def __init__(self, prompt):
        self.prompt = prompt


def _scorer(bench):
    return bench.Scorer(FakeLlama(), lambda messages: Prompt("P:" + messages[0]["content"]))


def test_the_scorer_averages_the_answer_tokens_log_probabilities_only(bench):
    scorer = _scorer(bench)
    # answer "ab" after the prefix '"': 'a' is not '"' + 1, 'b' is 'a' + 1
    got = scorer.mean_logprob([{"content": "xy"}], '"', "ab")
    assert got == pytest.approx(((0 - math.log(Z)) + (2 - math.log(Z))) / 2, rel=1e-6)


def test_the_scorer_reuses_the_prefix_it_shares_with_the_last_prompt(bench):
    scorer = _scorer(bench)
    scorer.mean_logprob([{"content": "xy"}], '"', "ab")
    got = scorer.mean_logprob([{"content": "xz"}], '"', "bc")  # shares "P:x" with the last prompt
    assert scorer.llama.evaluated == [len('P:xy"ab'), len('z"bc')]
    assert got == pytest.approx(((0 - math.log(Z)) + (2 - math.log(Z))) / 2, rel=1e-6)
    # the same prompt again: only the last token is evaluated anew (its logits are needed)
    scorer.mean_logprob([{"content": "xz"}], '"', "bc")
    assert scorer.llama.evaluated[-1] == 1


def _row(qid, answerable, draft="an answer", abstained=False, stated=0.9, drafted=True):
    steps = [{"step": "retrieve", "output": ["p1", "p2"], "inputs": {}},
             {"step": "route", "inputs": {"stated_score": str(stated)}, "output": "generate"}]
    if drafted:
        steps.append({"step": "generate_answer", "ok": True, "output": draft, "inputs": {"passages": "[1] «x»"},
                      "text_logprob": {"mean": -0.1}})
    return {"id": qid, "question": f"q {qid}", "answerable": answerable, "abstained": abstained,
            "result": {"trace": steps}}


def test_only_the_drafted_questions_are_scored_with_the_passages_they_read(bench):
    rows = [_row("a", True), _row("g", False, drafted=False), _row("e", True, draft="  ")]
    got = bench.drafted(rows)
    assert [g["id"] for g in got] == ["a"]
    assert got[0]["ids"] == ["p1", "p2"] and got[0]["stated_score"] == 0.9 and got[0]["shown"] == "[1] «x»"


def test_the_abstention_table_keeps_within_the_added_false_abstention(bench, capsys):
    # 4 answerable, 4 unanswerable; pmi low for 3 unanswerable and for one answerable
    rows = []
    for i, (answerable, pmi) in enumerate([(True, 3.0), (True, 2.5), (True, 2.0), (True, 0.1),
                                           (False, 0.0), (False, 0.2), (False, 0.3), (False, 2.9)]):
        rows.append({"answerable": answerable, "abstained": False, "stated_score": 0.5,
                     **{s: pmi for s in bench.SIGNALS}})
    bench._abstention_table(rows, 0.0)
    line = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| pmi |")][0]
    # no false abstention allowed: t = 0.1 (the answerable 0.1 stays) catches only the 0.0
    assert "| 1 of 4 | 0 of 4 |" in line
    bench._abstention_table(rows, 0.25)
    line = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| pmi |")][0]
    assert "| 3 of 4 | 1 of 4 |" in line
