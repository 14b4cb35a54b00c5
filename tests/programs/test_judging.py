"""Reading a free-text output's token log-probabilities (the drafted answer's confidence)."""

import math

import dspy
import pytest

from programs.judging import text_logprob


def pred_with(tokens):
    """A prediction whose completion is the concatenation of ``tokens`` ((text, logprob) pairs)."""
    return dspy.Prediction(logprobs={"content": [{"token": t, "logprob": lp, "top_logprobs": []} for t, lp in tokens]})


def test_mean_and_min_over_the_answer_value_tokens_only():
    pred = pred_with([('{"answer": "', -0.01), ("John", -0.5), (" Mark", -2.0), ('", "citations": [1], ', 0.0),
                      ('"answerable": true}', -0.3)])
    stats = text_logprob(pred, "answer")
    # The opening token holds the quote (counted only if it holds value characters: it does not).
    assert stats == {"mean": pytest.approx(-1.25), "min": -2.0, "n": 2.0}


def test_a_token_straddling_the_value_boundary_counts():
    pred = pred_with([('{"answer": "Jo', -1.0), ('hn"', -0.2), (', "answerable": true}', 0.0)])
    assert text_logprob(pred, "answer") == {"mean": pytest.approx(-0.6), "min": -1.0, "n": 2.0}


def test_escaped_quotes_stay_inside_the_value():
    pred = pred_with([('{"answer": "', 0.0), ('the \\"Zephyr', -1.0), ('\\" bridge', -3.0), ('"}', -0.1)])
    assert text_logprob(pred, "answer") == {"mean": pytest.approx(-2.0), "min": -3.0, "n": 2.0}


@pytest.mark.parametrize("pred", [
    None,
    dspy.Prediction(answer="x"),  # no logprobs at all
    pred_with([('{"citations": [1]}', 0.0)]),  # no such field
    pred_with([('{"answer": 3}', math.log(0.5))]),  # not a string value
    pred_with([('{"answer": "unterminated', -1.0)]),  # the value never closes
])
def test_nothing_to_read_gives_none(pred):
    assert text_logprob(pred, "answer") is None
