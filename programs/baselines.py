"""Baselines for the dev-set evaluation, with the same contract as :class:`programs.selfrag.SelfRAG`.

Each ``forward(question)`` returns a ``dspy.Prediction`` with ``answer``, ``abstained``,
``cited_doc_ids`` and ``result`` (a :class:`RAGResult` with the trace and usage), recorded with
the same :class:`~programs.tracing.Tracer`, so the harness scores all programs alike.

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

from programs.base import RAGModule, parallel_map
from programs.selfrag import ABSTAIN_ANSWER, format_passages, passage_ref
from programs.tracing import Tracer
from programs.settings import ProgramSettings
from programs.types import Citation, Passage, Retriever, RAGResult, WebSearch
from signatures import AnswerDirectly, GenerateAnswer, GradeRelevance, JudgeSupport


class _Baseline(RAGModule):
    """Shared constructor (same arguments as SelfRAG), LM scoping, retrieval and result assembly."""

    requires_retriever = False  # NoRetrieval runs without one

    @staticmethod
    def _question(question: str) -> str:
        if not isinstance(question, str) or not question.strip():
            raise ValueError("question must be a non-empty string")
        return question.strip()

    def _retrieve(self, tracer: Tracer, query: str, k: int) -> list[Passage]:
        if self.retriever is None:
            raise ValueError(f"{type(self).__name__} needs a retriever")
        start = time.perf_counter()
        try:
            passages = self.retriever.retrieve(query, k=k)
        except Exception as exc:  # noqa: BLE001 - a store failure is recorded, the program abstains
            step = tracer.note("retrieve", None, query=query)
            step.ok, step.error = False, f"{type(exc).__name__}: {exc}"
            return []
        step = tracer.note("retrieve", [p.id for p in passages], query=query)
        step.seconds = round(time.perf_counter() - start, 4)
        return passages

    def _web(self, tracer: Tracer, query: str) -> list[Passage]:
        start = time.perf_counter()
        try:
            passages = self.web_search.search(query, max_results=self.config.k)  # type: ignore[union-attr]
        except Exception as exc:  # noqa: BLE001 - any backend failure is recorded, never fatal
            step = tracer.note("web_search", None, query=query)
            step.ok, step.error = False, f"{type(exc).__name__}: {exc}"
            return []
        step = tracer.note("web_search", [p.source or p.id for p in passages], query=query)
        step.seconds = round(time.perf_counter() - start, 4)
        return passages

    def _draft(self, tracer: Tracer, question: str, passages: list[Passage]) -> tuple[str, list[Passage]] | None:
        """GenerateAnswer over ``passages``: (answer, cited passages), or None when it gave none."""
        pred, _ = self._generator(tracer, "generate_answer", self.generate_answer, "answer",
                                  question=question, passages=format_passages(passages, self.config.passage_chars))
        if pred is None:
            return None
        if pred.answerable is False or not str(pred.answer or "").strip():
            tracer.note("candidate_dropped", "passages do not answer the question", answer=pred.answer)
            return None
        cited = [passages[i - 1] for i in (pred.citations or []) if isinstance(i, int) and 1 <= i <= len(passages)]
        return str(pred.answer).strip(), cited or passages

    def _finish(self, tracer: Tracer, question: str, start: float, answer: str | None, cited: list[Passage], *,
                retrieved: bool, supported: str | None = None, used_web: bool = False) -> dspy.Prediction:
        abstained = answer is None
        if abstained:
            tracer.note("abstain", ABSTAIN_ANSWER)
            cited, supported = [], None
        result = RAGResult(
            question=question,
            answer=ABSTAIN_ANSWER if answer is None else answer,
            citations=[Citation(id=p.id, source=p.source, title=p.title, snippet=p.text[:200]) for p in cited],
            retrieved=retrieved,
            abstained=abstained,
            used_web=used_web,
            supported=supported,
            trace=tracer.steps,
            usage=tracer.usage,
            seconds=round(time.perf_counter() - start, 4),
        )
        return dspy.Prediction(answer=result.answer, abstained=abstained,
                               cited_doc_ids=[passage_ref(p) for p in cited], result=result)


class VanillaRAG(_Baseline):
    """Retrieve ``config.k`` passages and answer from them in one call (no judgements)."""

    def __init__(self, retriever: Retriever, web_search: WebSearch | None = None, config: ProgramSettings | None = None,
                 generator_lm: dspy.BaseLM | None = None, critic_lm: dspy.BaseLM | None = None,
                 adapter: dspy.Adapter | None = None):
        super().__init__(retriever, web_search, config, generator_lm, critic_lm, adapter)
        self.generate_answer = dspy.Predict(GenerateAnswer)

    def forward(self, question: str) -> dspy.Prediction:
        question = self._question(question)
        tracer, start = Tracer(), time.perf_counter()
        passages = self._retrieve(tracer, question, self.config.k)
        draft = self._draft(tracer, question, passages) if passages else None
        answer, cited = draft if draft else (None, [])
        return self._finish(tracer, question, start, answer, cited, retrieved=True)


class NoRetrieval(_Baseline):
    """Answer from the LM alone (one AnswerDirectly call). An empty answer is an abstention."""

    def __init__(self, retriever: Retriever | None = None, web_search: WebSearch | None = None,
                 config: ProgramSettings | None = None, generator_lm: dspy.BaseLM | None = None,
                 critic_lm: dspy.BaseLM | None = None, adapter: dspy.Adapter | None = None):
        super().__init__(retriever, web_search, config, generator_lm, critic_lm, adapter)
        self.answer_directly = dspy.Predict(AnswerDirectly)

    def forward(self, question: str) -> dspy.Prediction:
        question = self._question(question)
        tracer, start = Tracer(), time.perf_counter()
        pred, _ = self._generator(tracer, "answer_directly", self.answer_directly, "answer", question=question)
        answer = str(pred.answer).strip() if pred is not None and str(pred.answer or "").strip() else None
        return self._finish(tracer, question, start, answer, [], retrieved=False)


class GradedRAG(_Baseline):
    """The LangGraph tutorial pipeline: retrieve k, grade each, generate, hallucination check, one web
    round, generate again (see the module docstring for the routes)."""

    def __init__(self, retriever: Retriever, web_search: WebSearch | None = None, config: ProgramSettings | None = None,
                 generator_lm: dspy.BaseLM | None = None, critic_lm: dspy.BaseLM | None = None,
                 adapter: dspy.Adapter | None = None, k: int = 4):
        super().__init__(retriever, web_search, config, generator_lm, critic_lm, adapter)
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k!r}")
        self.k = k
        self.grade_relevance = dspy.Predict(GradeRelevance)
        self.generate_answer = dspy.Predict(GenerateAnswer)
        self.judge_support = dspy.Predict(JudgeSupport)

    def _grade(self, tracer: Tracer, question: str, passages: list[Passage]) -> list[Passage]:
        def grade(p: Passage) -> bool:
            pred, step = self._critic(tracer, "grade_relevance", self.grade_relevance, "relevance",
                                      question=question, passage=format_passages([p], self.config.passage_chars))
            step.inputs["passage_id"] = passage_ref(p)
            return pred is not None and pred.relevance == "relevant"

        verdicts = parallel_map(grade, passages, self.config.num_threads)
        return [p for p, ok in zip(passages, verdicts) if ok]

    def _generate_checked(self, tracer: Tracer, question: str, passages: list[Passage]):
        """Draft, then the hallucination check: (answer, cited, support) or None when no draft."""
        draft = self._draft(tracer, question, passages)
        if draft is None:
            return None
        answer, cited = draft
        sup, _ = self._critic(tracer, "judge_support", self.judge_support, "support", question=question,
                              passages=format_passages(passages, self.config.passage_chars), answer=answer)
        return answer, cited, (sup.support if sup is not None else None)

    def forward(self, question: str) -> dspy.Prediction:
        question = self._question(question)
        tracer, start = Tracer(), time.perf_counter()
        passages = self._retrieve(tracer, question, self.k)
        relevant = self._grade(tracer, question, passages) if passages else []
        tracer.note("route", "generate" if relevant else "web", relevant=len(relevant), graded=len(passages))
        best = self._generate_checked(tracer, question, relevant) if relevant else None
        grounded = best is not None and best[2] in ("fully", "partially")
        used_web = False
        if best is not None:
            tracer.note("route", "accept" if grounded else "web", support=best[2])
        if not grounded and self.web_search is not None:
            used_web = True
            web = self._web(tracer, question)
            retry = self._generate_checked(tracer, question, web) if web else None
            if retry is not None and (best is None or retry[2] in ("fully", "partially")):
                best = retry
        if best is None:
            return self._finish(tracer, question, start, None, [], retrieved=True, used_web=used_web)
        answer, cited, support = best
        return self._finish(tracer, question, start, answer, cited, retrieved=True, supported=support or "no",
                            used_web=used_web)


BASELINES = {"vanilla-rag": VanillaRAG, "no-retrieval": NoRetrieval, "graded-rag": GradedRAG}
