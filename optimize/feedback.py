"""The words GEPA reflects on: per judgement, what the label should have been and what decides it.

:func:`judgement_feedback` reads the gold example and the prediction. A derived example
(:mod:`optimize.derive`) carries ``decides`` (what in the passage decides its label) and, for support,
``unsupported_claim`` (the claim the passages do not back); an example of the hand-made splits gets the
label's definition instead. A correct prediction is confirmed with the same reason, so the reflection
LM sees why the right cases are right too.
"""

from __future__ import annotations

from typing import Any

from optimize.metrics import answer_text, gold_answers, usefulness_side

# What decides each label when the example does not say (the signatures' definitions, in brief).
DEFINITIONS = {
    ("decision", "yes"): "the question asks for specific facts (names, dates, numbers, the user's documents) "
                         "that must be looked up",
    ("decision", "no"): "the question can be answered without any document (arithmetic, conversation, "
                        "rewriting a given text)",
    ("relevance", "relevant"): "the passage is about what the question asks and helps answer it",
    ("relevance", "irrelevant"): "the passage is about a different subject and does not help answer the question",
    ("support", "fully"): "every claim of the answer is stated in the passages",
    ("support", "partially"): "part of the answer is in the passages and part goes beyond them",
    ("support", "no"): "the passages do not state the answer, or contradict it",
    ("usefulness", "useful"): "the answer addresses the question directly",
    ("usefulness", "not_useful"): "the answer dodges the question or answers another one",
}


def _clip(text: Any, n: int = 300) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= n else text[:n] + "…"


def _reason(gold: Any, label: str, value: str) -> str:
    decides = gold.get("decides") if hasattr(gold, "get") else None
    return _clip(decides) if decides else DEFINITIONS.get((label, value), "")


def judgement_feedback(label: str | None, gold: Any, pred: Any, score: float) -> str:
    """Feedback text for one prediction of the judgement whose output field is ``label`` (None: end to end)."""
    if label is None:
        return f"Score {score:.2f}." + ("" if score >= 1 else f" Expected answer: {gold.get('answer') or '(abstain)'}.")
    got = getattr(pred, label, None) if pred is not None else None
    if label == "answerable":
        return _answer_feedback(gold, pred, got, score)
    want = gold.get(label)
    if label == "usefulness":
        side = usefulness_side(want)
        head = (f"Correct: usefulness = {got!r}." if score >= 1 else
                f"Wrong: usefulness should be {want!r}, the judge said {got!r}. Only the side of 3 counts "
                f"(useful 4-5 vs not useful 1-2); expected side: {side}.")
        return f"{head} Why: {_reason(gold, label, side or '')}."
    value = str(want).strip().lower()
    head = f"Correct: {label} = {got!r}." if score >= 1 else f"Wrong: {label} should be {want!r}, the judge said {got!r}."
    text = f"{head} Why: {_reason(gold, label, value)}."
    if label == "support" and value in ("partially", "no"):
        claim = gold.get("unsupported_claim") or gold.get("answer")
        text += f" The claim not backed by the passages: «{_clip(claim)}»."
    return text


def _answer_feedback(gold: Any, pred: Any, said: Any, score: float) -> str:
    if not gold.get("answerable", True):
        if score >= 1:
            return "Correct: the passages do not answer the question and the answer says so (answerable = false)."
        return ("Wrong: the passages do not answer this question; set answerable to false and say that the "
                "passages do not answer it instead of answering.")
    golds = gold_answers(gold)
    expected = f"Expected answer: «{_clip(golds[0] if golds else '')}»."
    where = _clip(gold.get("decides")) if gold.get("decides") else ""
    if said is False or str(said).strip().lower() == "false":
        return f"Wrong: the passages do answer the question (answerable should be true). {expected} {where}".strip()
    return (f"Answer F1 {score:.2f} against the gold answer. {expected} Got: «{_clip(answer_text(pred))}». "
            f"{where}").strip()
