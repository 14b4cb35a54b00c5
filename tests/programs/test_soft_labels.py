"""Soft labels from token log-probabilities: recorded llama.cpp (SmolLM2) and OpenAI-style responses."""

import json
import math
from pathlib import Path
from typing import Literal

import pytest

from programs.soft_labels import SoftLabel, decoded_label, expected_value, label_values, soft_label

RECORDINGS = Path(__file__).parents[1] / "lm" / "recordings"


def recording(name: str) -> dict:
    return json.loads((RECORDINGS / name).read_text())


def step_of(record: dict, token: str) -> dict:
    (step,) = [s for s in record["logprobs"]["content"] if s["token"] == token]
    return step


def p_of(step: dict, token: str) -> float:
    (lp,) = [t["logprob"] for t in step["top_logprobs"] if t["token"] == token]
    return math.exp(lp)


def T(token: str, p: float, top=()):
    """One OpenAI-format token with its probability and (token, probability) alternatives."""
    return {
        "token": token,
        "logprob": math.log(p),
        "top_logprobs": [{"token": t, "logprob": math.log(q)} for t, q in top],
    }


# ─── Recorded llama.cpp responses (tests/lm/recordings/record.py) ───────────


def test_recorded_usefulness_gives_a_distribution_over_1_to_5():
    rec = recording("smollm2_usefulness.json")
    soft = soft_label(rec["field"], rec["labels"], rec["logprobs"])
    assert soft.soft and soft.decoded == rec["decoded"] == 1
    assert set(soft.probs) == {1, 2, 3, 4, 5}
    assert sum(soft.probs.values()) == pytest.approx(1.0)
    assert soft.label == max(soft.probs, key=soft.probs.get) == 1
    assert all(p > 0 for p in soft.probs.values())  # every digit is among the top-5 at the value
    # Labels decided at the same token keep the ratio of their token probabilities.
    digit = step_of(rec, "1")
    assert soft.probs[2] / soft.probs[3] == pytest.approx(p_of(digit, "2") / p_of(digit, "3"))
    assert soft.probs[5] / soft.probs[4] == pytest.approx(p_of(digit, "5") / p_of(digit, "4"))
    # "1" is also offered one token earlier (with no space before it): that mass is label 1's too.
    space = step_of(rec, " ")
    assert p_of(space, "1") > 0
    only_digit_step = p_of(digit, "1") / sum(p_of(digit, d) for d in "12345")
    assert soft.probs[1] > only_digit_step
    assert 1 < expected_value(soft.probs) < 2


def test_recorded_relevance_label_forced_by_the_grammar_has_probability_one():
    rec = recording("smollm2_relevance.json")
    assert rec["text"].startswith('{ "passage_topic": ')  # the field is found after another one
    value = step_of(rec, "relevant")
    alternatives = [t["token"] for t in value["top_logprobs"]]
    # The reported alternatives are the raw, pre-grammar distribution: the model wanted to write prose
    # ("Is", "The", ...); the grammar allowed only a label and picked "relevant", far below them.
    assert "relevant" not in alternatives
    assert all(value["logprob"] < t["logprob"] for t in value["top_logprobs"])
    assert not any("irrelevant".startswith(t) or "relevant".startswith(t) for t in alternatives)
    soft = soft_label(rec["field"], rec["labels"], rec["logprobs"])
    assert soft == SoftLabel("relevant", {"relevant": 1.0, "irrelevant": 0.0}, soft=True, decoded="relevant")


def test_recorded_score_splits_a_shared_prefix_evenly():
    """On the 0..10 scale a "1" not taken could have become 1 or 10: its mass is split between them."""
    rec = recording("smollm2_score.json")
    soft = soft_label(rec["field"], rec["labels"], rec["logprobs"])
    assert soft.soft and soft.decoded == 0 and soft.label == 0
    assert sum(soft.probs.values()) == pytest.approx(1.0)
    assert soft.probs[1] == pytest.approx(soft.probs[10]) and soft.probs[1] > 0
    digit = step_of(rec, "0")
    assert soft.probs[2] / soft.probs[9] == pytest.approx(p_of(digit, "2") / p_of(digit, "9"))
    assert soft.probs[4] == 0.0  # not among the top-5 anywhere


def test_recorded_text_matches_the_token_strings():
    for name in ("smollm2_relevance.json", "smollm2_usefulness.json", "smollm2_score.json"):
        rec = recording(name)
        assert "".join(s["token"] for s in rec["logprobs"]["content"]) == rec["text"]
        assert decoded_label(rec["text"], rec["field"], rec["labels"]) == rec["decoded"]


# ─── Hand-written OpenAI-style response ─────────────────────────────────────


def test_openai_response_with_a_label_split_over_two_tokens():
    rec = recording("openai_support_split.json")
    choice = rec["choices"][0]
    labels = ("fully", "partially", "no")
    soft = soft_label("support", labels, choice["logprobs"], text=choice["message"]["content"])
    part = choice["logprobs"]["content"][3]
    p = {t["token"]: math.exp(t["logprob"]) for t in part["top_logprobs"]}
    z = p["part"] + p["fully"] + p["full"] + p["no"]  # "Part" is no label's spelling
    assert soft.decoded == "partially" and soft.soft
    assert soft.probs["partially"] == pytest.approx(p["part"] / z)
    assert soft.probs["fully"] == pytest.approx((p["fully"] + p["full"]) / z)
    assert soft.probs["no"] == pytest.approx(p["no"] / z)
    support = expected_value(soft.probs, {"fully": 1.0, "partially": 0.5, "no": 0.0})
    assert support == pytest.approx(soft.probs["fully"] + 0.5 * soft.probs["partially"])


def test_litellm_logprob_objects_are_read_by_attribute():
    from litellm.types.utils import ChoiceLogprobs

    choice = recording("openai_support_split.json")["choices"][0]
    as_dicts = soft_label("support", ("fully", "partially", "no"), choice["logprobs"])
    as_objects = soft_label("support", ("fully", "partially", "no"), ChoiceLogprobs(**choice["logprobs"]))
    assert as_objects == as_dicts


# ─── Without log-probabilities ──────────────────────────────────────────────


@pytest.mark.parametrize("logprobs", [None, {"content": []}, {"content": None}, []])
def test_no_logprobs_fall_back_to_the_decoded_label(logprobs):
    soft = soft_label("relevance", ("relevant", "irrelevant"), logprobs, text='{"relevance": "irrelevant"}')
    expected = SoftLabel("irrelevant", {"relevant": 0.0, "irrelevant": 1.0}, soft=False, decoded="irrelevant")
    assert soft == expected
    assert soft_label("usefulness", (1, 2, 3, 4, 5), logprobs, decoded=4).probs[4] == 1.0


def test_logprobs_that_do_not_hold_the_field_fall_back():
    logprobs = {"content": [T('{"answer": "Paris"}', 0.9)]}
    soft = soft_label("relevance", ("relevant", "irrelevant"), logprobs, decoded="relevant")
    assert not soft.soft and soft.probs == {"relevant": 1.0, "irrelevant": 0.0}


def test_no_label_anywhere_is_an_error():
    with pytest.raises(ValueError, match="no label of 'relevance'"):
        soft_label("relevance", ("relevant", "irrelevant"), None, text='{"relevance": "maybe"}')
    with pytest.raises(ValueError, match="not one of"):
        soft_label("relevance", ("relevant", "irrelevant"), None, decoded="maybe")


# ─── Hand-built cases ───────────────────────────────────────────────────────


def test_shared_prefix_taken_multiplies_along_the_path():
    # "1" (1 or 10) then "0": P(10) = P(1 at step 1) x P(0 at step 2), each renormalised over labels.
    logprobs = {
        "content": [
            T('{"score": ', 0.9),
            T("1", 0.5, [("1", 0.5), ("2", 0.3), ("x", 0.2)]),
            T("0", 0.1, [("0", 0.1), (",", 0.2), ("}", 0.1), ("a", 0.6)]),
            T("}", 1.0),
        ]
    }
    soft = soft_label("score", range(11), logprobs)
    assert soft.decoded == 10
    assert soft.probs[2] == pytest.approx(0.3 / 0.8)
    assert soft.probs[10] == pytest.approx(0.5 / 0.8 * 0.1 / 0.4)
    assert soft.probs[1] == pytest.approx(0.5 / 0.8 * 0.3 / 0.4)  # "," and "}" end the number 1
    assert soft.label == 1  # the argmax, not the decoded value


def test_value_token_that_starts_with_punctuation_and_uninformative_variants():
    logprobs = {
        "content": [
            T('{"', 0.9),
            T("relevance", 0.9),
            T('":', 0.9),
            T(' "', 0.8, [(' "', 0.8), (' "rel', 0.1), ("  ", 0.05)]),
            T("ir", 0.6, [("ir", 0.6), ("rel", 0.3), ("Rel", 0.05)]),
            T("relevant", 0.99),
            T('"}', 0.9),
        ]
    }
    soft = soft_label("relevance", ("relevant", "irrelevant"), logprobs)
    # step ' "': ' "rel' decides "relevant"; "  " (whitespace only) says nothing and is dropped.
    first = 0.1 / 0.9
    rest = 0.8 / 0.9
    assert soft.probs["relevant"] == pytest.approx(first + rest * 0.3 / 0.9)
    assert soft.probs["irrelevant"] == pytest.approx(rest * 0.6 / 0.9)


def test_key_named_in_an_earlier_value_is_skipped():
    text = '{"passage_topic": "\\"relevance\\": of bananas", "relevance": "irrelevant"}'
    assert decoded_label(text, "relevance", ("relevant", "irrelevant")) == "irrelevant"


def test_chat_adapter_format_and_bool_labels():
    logprobs = {
        "content": [
            T("[[ ## keep ## ]]\n", 0.9),
            T("True", 0.7, [("True", 0.7), ("False", 0.2), ("false", 0.05), ("Maybe", 0.05)]),
            T("\n\n[[ ## completed ## ]]", 0.9),
        ]
    }
    soft = soft_label("keep", (True, False), logprobs)
    assert soft.decoded is True and soft.soft
    assert soft.probs[False] == pytest.approx(0.25 / 0.95)
    json_bool = {
        "content": [T('{"keep": ', 0.9), T("false", 0.6, [("false", 0.6), ("true", 0.3), ("True", 0.1)])]
    }
    soft = soft_label("keep", (True, False), json_bool)
    assert soft.decoded is False and soft.probs[True] == pytest.approx(0.3 / 0.9)  # JSON has no "True"


def test_label_values_and_expected_value():
    assert label_values(Literal["relevant", "irrelevant"]) == ("relevant", "irrelevant")
    assert label_values(Literal[1, 2, 3]) == (1, 2, 3)
    assert label_values(bool) == (True, False)
    with pytest.raises(ValueError, match="not a label annotation"):
        label_values(str)
    assert expected_value({1: 0.5, 5: 0.5}) == 3.0
    assert expected_value({0: 0.0, 10: 1.0}) == 10.0
    with pytest.raises(ValueError, match="positive mass"):
        expected_value({1: 0.0})
