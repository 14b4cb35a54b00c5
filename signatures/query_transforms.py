"""Query-side transforms: each rewrites the question into what retrieval searches for.

Multi-query and step-back after the RAG-fusion / step-back prompting recipes, decomposition after
least-to-most prompting, HyDE after Gao et al. 2022 (a hypothetical passage embedded for dense search).
The program fuses what each query retrieves with the original question's ranking (RRF).
"""

import dspy


class ParaphraseQuery(dspy.Signature):
    """Write different search queries for the same information need as the question (multi-query).

    Each paraphrase keeps every entity, date and constraint of the question but uses other words
    or another angle, so together they find passages a single wording would miss. Do not answer the
    question. Return only the queries, one per list item."""

    question: str = dspy.InputField()
    n: int = dspy.InputField(desc="how many paraphrases to write")
    paraphrases: list[str] = dspy.OutputField()


class DecomposeQuestion(dspy.Signature):
    """Split a multi-part question into the simpler sub-questions it depends on (decomposition).

    Each sub-question asks one thing and can be looked up on its own; together they cover the
    question. A question that already asks one thing is returned as its only sub-question. Keep the
    entities' full names in every sub-question."""

    question: str = dspy.InputField()
    max_subquestions: int = dspy.InputField()
    sub_questions: list[str] = dspy.OutputField()


class StepBackQuestion(dspy.Signature):
    """Write the more general question behind this specific one (step-back prompting).

    The step-back question asks about the broader concept, entity or period whose description
    would contain the answer, e.g. "Which team did Ann Lee play for in 2004?" → "What is Ann Lee's
    career history?". Return only the question."""

    question: str = dspy.InputField()
    step_back_question: str = dspy.OutputField()


class HypotheticalPassage(dspy.Signature):
    """Write a short passage, as an encyclopedia or a manual would, that answers the question (HyDE).

    It is used only to search for similar real passages, never shown as an answer: write plausible,
    specific prose of two to four sentences in the language of the question, even if unsure."""

    question: str = dspy.InputField()
    hypothetical_passage: str = dspy.OutputField()
