"""Iterative retrieval (answer-guided re-query): the next search is built from what the draft lacks."""

import dspy


class NextQuery(dspy.Signature):
    """Write the next search query that finds what the draft answer still lacks.

    Compare the draft with the question: name the missing fact, entity or step and search for it.
    Use words the passages so far did not contain, in the language of the question. Return only the
    query text."""

    question: str = dspy.InputField()
    draft_answer: str = dspy.InputField(desc="the answer drafted from the passages so far, or empty")
    passage_titles: list[str] = dspy.InputField(desc="titles of the passages already found")
    next_query: str = dspy.OutputField()
