"""bench/bench_answerability.py: the signals read from a recorded trace, and the best abstention at a bound."""

import pytest

from tests.bench.conftest import import_bench


@pytest.fixture(scope="module")
def bench():
    return import_bench("bench_answerability")


ROW = {"result": {"trace": [
    {"step": "route", "output": "retrieve", "inputs": {"p_retrieve": "0.9"}},
    {"step": "retrieve", "inputs": {"query": "q", "top_similarity": "0.41"}},
    {"step": "check_answer", "probs": {"yes": 0.7, "no": 0.3}, "inputs": {}},
    {"step": "route", "output": "generate", "inputs": {"p_stated": "0.7", "stated_score": "0.5322"}},
    {"step": "route", "output": "abstain", "inputs": {"p_stated": "0.2", "stated_score": "0.1"}},
    {"step": "generate_answer", "probs": {"true": 0.9, "false": 0.1}, "text_logprob": {"mean": -0.4, "min": -2.5, "n": 4}},
    {"step": "generate_answer", "probs": {"true": 0.9, "false": 0.1}, "text_logprob": {"mean": -0.1, "min": -0.2, "n": 3}},
]}}


def test_the_first_round_signals_are_read_from_the_trace(bench):
    assert bench.SIGNALS["top dense similarity"](ROW) == 0.41
    assert bench.SIGNALS["answer check P(stated)"](ROW) == 0.7
    assert bench.SIGNALS["answer check score"](ROW) == 0.5322  # the first round's, as routed
    assert bench.SIGNALS["answer check score"]({"result": {"trace": []}}) is None
    assert bench.SIGNALS["draft answer mean token logprob"](ROW) == -0.4  # the first draft's
    assert bench.SIGNALS["draft answer min token logprob"](ROW) == -2.5
    assert bench.SIGNALS["draft answer min token logprob"]({"result": {"trace": []}}) is None


def test_best_abstention_keeps_false_abstention_within_the_bound(bench):
    answerable, unanswerable = [0.9, 0.8, 0.7, 0.3], [0.1, 0.2, 0.4, 0.6]
    assert bench.best_abstention(answerable, unanswerable, 0.0) == (0.5, 0.3)
    assert bench.best_abstention(answerable, unanswerable, 0.25)[0] == 1.0
