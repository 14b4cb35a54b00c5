"""parse_batch_verdicts: a passage gets a label only from exactly one well-formed verdict."""

import pytest

from programs.batch_grading import parse_batch_verdicts
from signatures import PassageVerdict


def v(number, relevance="relevant", topic="t"):
    return {"number": number, "topic": topic, "relevance": relevance}


def test_well_formed_batch_in_any_order():
    out = parse_batch_verdicts([v(2, "irrelevant"), v(1), v(3)], 3)
    assert out.labels == ["relevant", "irrelevant", "relevant"]
    assert not out.malformed and out.problems == [] and out.missing == []
    assert out.order == [1, 0, 2]  # the passage each written verdict names


def test_order_marks_verdicts_that_gave_no_label():
    out = parse_batch_verdicts([v(2), v(7), v(1, "maybe"), v(1)], 2)
    assert out.order == [1, None, None, None]  # out of range; a bad label; a second verdict on [1]


def test_accepts_pydantic_verdicts():
    verdicts = [PassageVerdict(number=1, topic="a", relevance="irrelevant"),
                PassageVerdict(number=2, topic="b", relevance="relevant")]
    assert parse_batch_verdicts(verdicts, 2).labels == ["irrelevant", "relevant"]


def test_missing_passage_is_left_for_the_fallback():
    out = parse_batch_verdicts([v(1), v(3)], 3)
    assert out.labels == ["relevant", None, "relevant"]
    assert out.malformed and out.missing == [1]
    assert out.problems == ["passage [2] not graded"]


def test_duplicate_number_ungrades_that_passage_even_with_agreeing_labels():
    out = parse_batch_verdicts([v(1), v(2, "irrelevant"), v(2, "irrelevant")], 2)
    assert out.labels == ["relevant", None]
    assert out.malformed and out.missing == [1]
    assert out.problems == ["passage [2] graded 2 times"]


def test_out_of_range_and_unnumbered_verdicts_are_problems():
    out = parse_batch_verdicts([v(1), v(0), v(5), v(None), v("two")], 2)
    assert out.labels == ["relevant", None]
    assert out.malformed and out.missing == [1]
    assert "passage [0] out of range 1..2" in out.problems and "passage [5] out of range 1..2" in out.problems
    assert sum("without a passage number" in p for p in out.problems) == 2


def test_wrong_label_leaves_the_passage_ungraded():
    out = parse_batch_verdicts([v(1, "Relevant"), v(2, "partially")], 2)
    assert out.labels == [None, None] and out.missing == [0, 1]
    assert "passage [1] has label 'Relevant'" in out.problems


def test_numeric_strings_are_read_but_booleans_are_not():
    out = parse_batch_verdicts([v("1"), v("[2]", "irrelevant"), v(True)], 3)
    assert out.labels == ["relevant", "irrelevant", None]
    assert out.malformed


def test_failed_call_leaves_every_passage_for_the_fallback():
    out = parse_batch_verdicts(None, 3)
    assert out.labels == [None, None, None] and out.missing == [0, 1, 2] and out.malformed
    assert parse_batch_verdicts([], 0).malformed is False


def test_empty_output_for_passages_is_malformed():
    out = parse_batch_verdicts([], 2)
    assert out.malformed and out.missing == [0, 1]


def test_negative_count_is_refused():
    with pytest.raises(ValueError, match="n_passages"):
        parse_batch_verdicts([], -1)
