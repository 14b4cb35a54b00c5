"""The index builders' LM steps: one typed call each, texts quoted, counted."""

import dspy

from programs.summaries import LMQuestionWriter, LMSummariser
from tests.fakes import scripted_lm


def test_summariser_quotes_the_texts_and_counts_calls():
    lm, engine = scripted_lm({"summarize_texts": {"summary": "  Two facts.  "}})
    summarise = LMSummariser(lm, dspy.JSONAdapter(), max_chars=10)
    assert summarise(["first «text» is long", "second"]) == "Two facts."
    texts = engine.calls[0][1]["texts"]
    assert texts.startswith("[1] «first ‹tex…»") and "[2] «second»" in texts and summarise.calls == 1


def test_question_writer_bounds_and_cleans():
    lm, engine = scripted_lm({"hypothetical_questions": {"questions": ["What is X?", " ", "Why Y?", "How Z?"]}})
    ask = LMQuestionWriter(lm, dspy.JSONAdapter(), n=2)
    assert ask("X is a thing.") == ["What is X?", "Why Y?"] and engine.calls[0][1]["n"] == "2"
    from selfrag.lm.compact_adapter import output_bounds

    assert output_bounds(ask.predict.signature) == {"questions": 2}  # the LM's schema stops at n
