from typing import Literal

import dspy


class RetrieveDecision(dspy.Signature):
    """Decide whether answering the question needs passages from the user's document collection.

    Answer "yes" when the question asks about specific facts, names, dates, numbers, events, people,
    places, products or documents that must be looked up. Answer "no" when the question can be
    answered correctly without any documents: arithmetic, unit conversion, greetings and chit-chat,
    rewriting or translating given text, or general instructions. Answer "continue" only when an
    answer so far is given and it needs more evidence to be completed."""

    question: str = dspy.InputField()
    answer_so_far: str = dspy.InputField(desc="the partial answer when continuing, or empty")
    decision: Literal["yes", "no", "continue"] = dspy.OutputField()
