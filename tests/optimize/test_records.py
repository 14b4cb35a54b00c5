"""Passage helpers of the labelled records."""

from optimize import records as R


def test_window_passage_keeps_selected_sentences():
    sents = [f"Sentence number {i} is here." for i in range(100)]
    out = R.window_passage(sents, [sents[40], sents[42]], max_chars=200)
    assert sents[40] in out and sents[41] in out and sents[42] in out and len(out) <= 200
    far = R.window_passage(sents, [sents[1], sents[90]], max_chars=200)
    assert far == f"{sents[1]} ... {sents[90]}"


def test_truncate_at_sentence_end():
    text = "One two three. " * 200
    out = R.truncate(text, 100)
    assert len(out) <= 100 and out.endswith(".")
