"""SelfRAG: decide → retrieve → grade → draft per passage → critique → pick, with bounded fallbacks.

After Asai et al. 2023 (Self-RAG) with the reflection tokens as separate typed DSPy judgements, so
an optimizer can compile each one, and the LangGraph-style corrective loop (rewrite, web, abstain).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import TypeVar

import dspy

from programs.base import RAGModule, parallel_map, quote_safe
from programs.routing import route_after_critique, route_after_grading, route_retrieval
from programs.scoring import Candidate, pick_best
from programs.tracing import Tracer
from programs.settings import ProgramSettings
from programs.types import Citation, Passage, Retriever, RAGResult, WebSearch, WebSearchError
from signatures import (
    AnswerDirectly,
    GenerateAnswer,
    GradeRelevance,
    JudgeSupport,
    JudgeUsefulness,
    RetrieveDecision,
    RewriteQuery,
)

logger = logging.getLogger(__name__)

ABSTAIN_ANSWER = "I could not find this in the available sources."
T = TypeVar("T")
R = TypeVar("R")


def format_passages(passages: list[Passage], max_chars: int) -> str:
    """Numbered, delimited passages: sources are quoted data, kept apart from the instructions; text that
    could close the quote or forge a field header is neutralised (:func:`quote_safe`)."""
    blocks = []
    for i, p in enumerate(passages, start=1):
        title = f" ({quote_safe(p.title)})" if p.title else ""
        text = quote_safe(p.text if len(p.text) <= max_chars else p.text[:max_chars] + "…")
        blocks.append(f"[{i}]{title} «{text}»")
    return "\n".join(blocks)


def passage_ref(p: Passage) -> str:
    """The id a judgement of ``p`` is recorded under: its document id when it has one, else its id."""
    return str(p.metadata.get("doc_id") or p.id)


class SelfRAG(RAGModule):
    """Self-reflective RAG over a retriever, with an optional web search.

    Args:
        retriever: returns ranked :class:`Passage` objects for a query.
        web_search: optional fallback when the knowledge base cannot support an answer.
        config: bounds and weights (:class:`ProgramSettings`); every loop is bounded by it.
        generator_lm: LM for drafting answers and rewriting queries (None = the one in dspy.settings).
        critic_lm: LM for the judgements (None = generator_lm).
        adapter: DSPy adapter for all calls (None = the one in dspy.settings).
    """

    def __init__(
        self,
        retriever: Retriever,
        web_search: WebSearch | None = None,
        config: ProgramSettings | None = None,
        generator_lm: dspy.BaseLM | None = None,
        critic_lm: dspy.BaseLM | None = None,
        adapter: dspy.Adapter | None = None,
    ):
        super().__init__(retriever, web_search, config, generator_lm, critic_lm, adapter)

        self.decide_retrieval = dspy.Predict(RetrieveDecision)
        self.grade_relevance = dspy.Predict(GradeRelevance)
        self.rewrite_query = dspy.Predict(RewriteQuery)
        self.generate_answer = dspy.Predict(GenerateAnswer)
        self.answer_directly = dspy.Predict(AnswerDirectly)
        self.judge_support = dspy.Predict(JudgeSupport)
        self.judge_usefulness = dspy.Predict(JudgeUsefulness)

    # ------------------------------------------------------------------ plumbing
    def _map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        return parallel_map(fn, items, self.config.num_threads)

    # ------------------------------------------------------------------ steps
    def _grade(self, tracer: Tracer, question: str, passages: list[Passage]) -> list[Passage]:
        def grade(p: Passage) -> bool:
            pred, step = self._critic(tracer, "grade_relevance", self.grade_relevance, "relevance",
                                      question=question, passage=format_passages([p], self.config.passage_chars))
            step.inputs["passage_id"] = passage_ref(p)  # which passage was judged (the eval harness scores it)
            return pred is not None and pred.relevance == "relevant"

        verdicts = self._map(grade, passages)
        return [p for p, ok in zip(passages, verdicts) if ok]

    def _retrieve(self, tracer: Tracer, query: str) -> list[Passage]:
        start = time.perf_counter()
        try:
            passages = self.retriever.retrieve(query, k=2 * self.config.k)
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
        except WebSearchError as exc:
            step = tracer.note("web_search", None, query=query)
            step.ok, step.error = False, str(exc)
            return []
        except Exception as exc:  # noqa: BLE001 - any backend failure is recorded, never fatal
            step = tracer.note("web_search", None, query=query)
            step.ok, step.error = False, f"{type(exc).__name__}: {exc}"
            return []
        step = tracer.note("web_search", [p.source or p.id for p in passages], query=query)
        step.seconds = round(time.perf_counter() - start, 4)
        return passages

    def _draft(self, tracer: Tracer, question: str, passages: list[Passage], origin: str,
               config: dict | None = None) -> Candidate | None:
        pred, _ = self._generator(tracer, "generate_answer", self.generate_answer, "answer", config=config,
                                  question=question, passages=format_passages(passages, self.config.passage_chars))
        if pred is None:
            return None
        if pred.answerable is False or not str(pred.answer or "").strip():
            tracer.note("candidate_dropped", "passages do not answer the question", answer=pred.answer)
            return None
        cited = [passages[i - 1] for i in (pred.citations or []) if isinstance(i, int) and 1 <= i <= len(passages)]
        return Candidate(answer=str(pred.answer).strip(), passages=passages, cited=cited or passages, origin=origin)

    def _critique(self, tracer: Tracer, question: str, cand: Candidate) -> Candidate:
        evidence = format_passages(cand.passages, self.config.passage_chars)
        sup, _ = self._critic(tracer, "judge_support", self.judge_support, "support",
                              question=question, passages=evidence, answer=cand.answer)
        use, _ = self._critic(tracer, "judge_usefulness", self.judge_usefulness, "usefulness",
                              question=question, answer=cand.answer)
        cand.support = sup.support if sup is not None else None
        cand.usefulness = int(use.usefulness) if use is not None else None
        return cand

    def _draft_and_critique(self, tracer: Tracer, question: str, groups: list[list[Passage]], origin: str,
                            config: dict | None = None) -> list[Candidate]:
        def one(group: list[Passage]) -> Candidate | None:
            cand = self._draft(tracer, question, group, origin, config)
            return self._critique(tracer, question, cand) if cand is not None else None

        return [c for c in self._map(one, groups) if c is not None]

    # ------------------------------------------------------------------ forward
    def forward(self, question: str) -> dspy.Prediction:
        if not isinstance(question, str) or not question.strip():
            raise ValueError("question must be a non-empty string")
        question = question.strip()
        cfg = self.config
        tracer = Tracer()
        start = time.perf_counter()

        decision = None
        if cfg.retrieve_mode == "adaptive":
            pred, _ = self._critic(tracer, "retrieve_decision", self.decide_retrieval, "decision",
                                   question=question, answer_so_far="")
            decision = pred.decision if pred is not None else None
        route = route_retrieval(cfg.retrieve_mode, decision)
        tracer.note("route", route, mode=cfg.retrieve_mode, decision=decision)

        if route == "direct":
            return self._direct(tracer, question, start)

        # Retrieve, grade; rewrite, web, abstain — every loop bounded by the settings.
        relevant: list[Passage] = []
        failed_queries: list[str] = []
        query, rewrites, web_rounds, used_web = question, 0, 0, False
        while True:
            passages = self._web(tracer, query) if used_web else self._retrieve(tracer, query)
            relevant = self._grade(tracer, question, passages) if passages else []
            nxt = route_after_grading(len(relevant), rewrites, cfg.max_rewrites, web_rounds, cfg.max_web_rounds,
                                      self.web_search is not None)
            tracer.note("route", nxt, relevant=len(relevant), graded=len(passages))
            if nxt == "generate":
                break
            failed_queries.append(query)
            if nxt == "abstain":
                return self._finish(tracer, question, start, None, retrieved=True, used_web=used_web, abstained=True)
            if nxt == "rewrite":
                rewrites += 1
                pred, _ = self._generator(tracer, "rewrite_query", self.rewrite_query, "query",
                                          question=question, failed_queries=failed_queries)
                new_query = str(pred.query).strip() if pred is not None and pred.query else ""
                query = new_query or question
            else:  # web
                web_rounds += 1
                used_web = True
                query = question

        groups = [[p] for p in relevant[: cfg.max_candidates]]
        candidates = self._draft_and_critique(tracer, question, groups, "web" if used_web else "kb")
        best = pick_best(candidates, cfg.w_rel, cfg.w_sup, cfg.w_use)
        self._note_choice(tracer, candidates, best)
        regenerations = 0
        while True:
            nxt = route_after_critique(best.support if best else None, regenerations, cfg.max_regenerations,
                                       web_rounds, cfg.max_web_rounds, self.web_search is not None)
            tracer.note("route", nxt, support=best.support if best else None)
            if nxt in ("accept", "flag_unsupported"):
                break  # a None best (no usable draft at all) abstains in _finish
            if nxt == "regenerate":
                regenerations += 1
                # All relevant passages together: a different context, not a repeat of the same call.
                config = {"rollout_id": regenerations, "temperature": 0.7} if regenerations > 1 else None
                new = self._draft_and_critique(tracer, question, [relevant], "regenerated",
                                               config=config)
            else:  # web
                web_rounds += 1
                used_web = True
                web_passages = self._web(tracer, question)
                web_relevant = self._grade(tracer, question, web_passages) if web_passages else []
                relevant = web_relevant or relevant
                new = self._draft_and_critique(tracer, question, [[p] for p in web_relevant[: cfg.max_candidates]],
                                               "web")
            candidates.extend(new)
            best = pick_best(candidates, cfg.w_rel, cfg.w_sup, cfg.w_use)
            self._note_choice(tracer, candidates, best)

        return self._finish(tracer, question, start, best, retrieved=True,
                            used_web=used_web or (best is not None and best.origin == "web"))

    def _note_choice(self, tracer: Tracer, candidates: list[Candidate], best: Candidate | None) -> None:
        cfg = self.config
        scores = [round(c.score(cfg.w_rel, cfg.w_sup, cfg.w_use), 3) for c in candidates]
        tracer.note("select_candidate", {"scores": scores, "best": candidates.index(best) if best else None})

    def _direct(self, tracer: Tracer, question: str, start: float) -> dspy.Prediction:
        pred, _ = self._generator(tracer, "answer_directly", self.answer_directly, "answer", question=question)
        if pred is None or not str(pred.answer or "").strip():
            return self._finish(tracer, question, start, None, retrieved=False, abstained=True)
        cand = Candidate(answer=str(pred.answer).strip(), passages=[], relevant=False, origin="direct")
        use, _ = self._critic(tracer, "judge_usefulness", self.judge_usefulness, "usefulness",
                              question=question, answer=cand.answer)
        cand.usefulness = int(use.usefulness) if use is not None else None
        return self._finish(tracer, question, start, cand, retrieved=False)

    def _finish(self, tracer: Tracer, question: str, start: float, best: Candidate | None, *, retrieved: bool,
                used_web: bool = False, abstained: bool = False) -> dspy.Prediction:
        cfg = self.config
        if best is None:
            abstained = True
            tracer.note("abstain", ABSTAIN_ANSWER)
        citations = [] if best is None else [
            Citation(id=p.id, source=p.source, title=p.title, snippet=p.text[:200]) for p in best.cited
        ]
        result = RAGResult(
            question=question,
            answer=ABSTAIN_ANSWER if best is None else best.answer,
            citations=citations,
            retrieved=retrieved,
            abstained=abstained,
            used_web=used_web,
            supported=None if best is None or best.origin == "direct" else (best.support or "no"),
            usefulness=None if best is None else best.usefulness,
            score=None if best is None else round(best.score(cfg.w_rel, cfg.w_sup, cfg.w_use), 4),
            trace=tracer.steps,
            usage=tracer.usage,
            seconds=round(time.perf_counter() - start, 4),
        )
        cited_doc_ids = [str(p.metadata.get("doc_id") or p.id) for p in (best.cited if best else [])]
        return dspy.Prediction(answer=result.answer, abstained=result.abstained, cited_doc_ids=cited_doc_ids,
                               result=result)
