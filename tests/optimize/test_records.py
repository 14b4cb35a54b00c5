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


def test_numbers_are_content_words_of_any_length():
    assert R.content_words("16 weeks of leave") == {"16", "weeks", "leave"}
    assert R.answer_overlap("16 weeks", "Employees get 12 weeks of paid leave.") == 0.5  # the 16 is missing
    assert R.answer_overlap("16 weeks", "Employees get 16 weeks of paid leave.") == 1.0
    assert R.answer_overlap("an in of", "anything") == 0.0  # stop words and short words still do not count
