"""Reading a free-text output's token log-probabilities (the drafted answer's confidence)."""

import math

import dspy
import pytest

from programs.judging import record_soft, text_logprob
from programs.soft_labels import SoftLabel
from programs.types import TraceStep


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


# ---------------------------------------------------------------------- record_soft
def test_the_step_shows_the_argmax_and_keeps_the_decoded_label_when_they_differ():
    step = TraceStep(step="judge_support", output="no")
    record_soft(step, SoftLabel("partially", {"fully": 0.26, "partially": 0.39, "no": 0.35}, soft=True, decoded="no"))
    assert step.output == "partially" and step.decoded == "no"
    assert step.probs == {"fully": 0.26, "partially": 0.39, "no": 0.35} and step.soft is True


def test_agreeing_labels_leave_the_step_output_alone():
    step = TraceStep(step="judge_support", output="fully")
    record_soft(step, SoftLabel("fully", {"fully": 0.9, "partially": 0.1, "no": 0.0}, soft=True, decoded="fully"))
    assert step.output == "fully" and step.decoded is None


def test_a_label_read_beside_another_output_does_not_replace_it():
    step = TraceStep(step="generate_answer", output="It opened in 1931.")
    record_soft(step, SoftLabel(False, {True: 0.4, False: 0.6}, soft=True, decoded=True), is_output=False)
    assert step.output == "It opened in 1931." and step.decoded is None and step.probs == {"true": 0.4, "false": 0.6}


def test_true_and_one_are_different_labels():
    step = TraceStep(step="x", output=1)
    record_soft(step, SoftLabel(True, {True: 0.6, 1: 0.4}, soft=True, decoded=1))
    assert step.output is True and step.decoded == 1
