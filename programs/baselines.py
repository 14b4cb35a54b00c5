"""Baselines for the dev-set evaluation, with the same contract as :class:`programs.selfrag.SelfRAG`.

Each is a :class:`~programs.base.RAGModule` (same constructor, same prediction: ``answer``,
``abstained``, ``cited_doc_ids`` and ``result``, a :class:`~programs.types.RAGResult` with the trace
and usage), so the harness scores all programs alike.

- :class:`VanillaRAG`: retrieve ``config.k`` passages → one :class:`~signatures.GenerateAnswer` call.
  A draft marked not answerable from the passages (or empty) is an abstention.
- :class:`NoRetrieval`: one :class:`~signatures.AnswerDirectly` call; no passages, no judgements.
- :class:`GradedRAG`: the common LangGraph Self-RAG / corrective-RAG tutorial pipeline written with
  this project's signatures — retrieve ``k`` (4), grade each (:class:`~signatures.GradeRelevance`),
  generate from the relevant ones, hallucination check (:class:`~signatures.JudgeSupport`); when
  nothing is relevant, the draft is not answerable, or the check fails: one web round (when a web
  search is configured; web results go to the generator ungraded, as in the tutorial) and generate
  and check again. Without a web search: abstain when nothing usable was found, or return the
  unsupported draft flagged ``supported="no"``.

LM calls per question: vanilla 1; no-retrieval 1; graded at most ``k + 2 + 2`` (k grades, draft and
check, then once more after the web round).
"""

from __future__ import annotations

import time

import dspy

from programs.base import RAGModule
from programs.scoring import Candidate
from programs.tracing import Tracer
from programs.types import Passage
from programs.web_budget import WebBudget
from signatures import AnswerDirectly, GenerateAnswer, GradeRelevance, JudgeSupport

GROUNDED = ("fully", "partially")


class VanillaRAG(RAGModule):
    """Retrieve ``config.k`` passages and answer from them in one call (no judgements)."""

    PREDICTORS = {"generate_answer": GenerateAnswer}
    reports_score = False

    def forward(self, question: str) -> dspy.Prediction:
        question = self._question(question)
        tracer, start = Tracer(), time.perf_counter()
        passages = self._retrieve(tracer, question, self.config.k)
        draft = self._draft(tracer, question, passages) if passages else None
        return self._finish(tracer, question, start, draft)


class NoRetrieval(RAGModule):
    """Answer from the LM alone (one AnswerDirectly call). An empty answer is an abstention."""

    PREDICTORS = {"answer_directly": AnswerDirectly}
    requires_retriever = False
    reports_score = False

    def forward(self, question: str) -> dspy.Prediction:
        question = self._question(question)
        tracer, start = Tracer(), time.perf_counter()
        pred, _ = self._generator(tracer, "answer_directly", self._bounded(self.answer_directly, question),
                                  "answer", question=question)
        answer = str(pred.answer or "").strip() if pred is not None else ""
        best = Candidate(answer=answer, passages=[], relevant=False, origin="direct") if answer else None
        return self._finish(tracer, question, start, best, retrieved=False)


class GradedRAG(RAGModule):
    """The LangGraph tutorial pipeline: retrieve k, grade each, generate, hallucination check, one web
    round, generate again (see the module docstring for the routes). ``k`` (default 4) is its own:
    the tutorial's, independent of ``config.k``."""

    PREDICTORS = {"grade_relevance": GradeRelevance, "generate_answer": GenerateAnswer, "judge_support": JudgeSupport}
    reports_score = False

    def __init__(self, *args, k: int = 4, **kwargs):
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k!r}")
        super().__init__(*args, **kwargs)
        self.k = k

    def _generate_checked(self, tracer: Tracer, question: str, passages: list[Passage]) -> Candidate | None:
        """Draft, then the hallucination check; None when there was no draft."""
        draft = self._draft(tracer, question, passages)
        return self._judge_support(tracer, question, draft) if draft is not None else None

    def forward(self, question: str) -> dspy.Prediction:
        question = self._question(question)
        tracer, start = Tracer(), time.perf_counter()
        passages = self._retrieve(tracer, question, self.k)
        relevant = self._grade(tracer, question, passages) if passages else []
        tracer.note("route", "generate" if relevant else "web", relevant=len(relevant), graded=len(passages))
        best = self._generate_checked(tracer, question, relevant) if relevant else None
        grounded = best is not None and best.support in GROUNDED
        used_web = False
        if best is not None:
            tracer.note("route", "accept" if grounded else "web", support=best.support)
        if not grounded and self.web_search is not None:  # one web round (the tutorial's); max_web_rounds 0: none
            used_web = self.config.max_web_rounds > 0
            web = self._web(tracer, WebBudget(min(1, self.config.max_web_rounds)), question)
            retry = self._generate_checked(tracer, question, web) if web else None
            if retry is not None and (best is None or retry.support in GROUNDED):
                best = retry
        return self._finish(tracer, question, start, best, used_web=used_web)


# Still imported by optimize/evaluate.py; programs.registry is the one list (eval moves to it).
BASELINES = {"vanilla-rag": VanillaRAG, "no-retrieval": NoRetrieval, "graded-rag": GradedRAG}
