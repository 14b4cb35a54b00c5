"""SelfRAG: decide → retrieve → grade → draft per passage → critique → pick, with bounded fallbacks.

After Asai et al. 2023 (Self-RAG) with the reflection tokens as separate typed DSPy judgements, so
an optimizer can compile each one, and the LangGraph-style corrective loop (rewrite, web, abstain).
"""

from __future__ import annotations

import time

import dspy

from programs.base import RAGModule
from programs.passages import format_passages  # noqa: F401 - optimize/compile.py imports it from here (for now)
from programs.routing import route_after_critique, route_after_grading, route_retrieval
from programs.scoring import Candidate, pick_best
from programs.tracing import Tracer
from programs.types import Passage
from programs.web_budget import WebBudget
from signatures import (
    AnswerDirectly,
    GenerateAnswer,
    GradeRelevance,
    JudgeSupport,
    JudgeUsefulness,
    RetrieveDecision,
    RewriteQuery,
)


class SelfRAG(RAGModule):
    """Self-reflective RAG over a retriever, with an optional web search (constructor: :class:`RAGModule`).

    Retrieves ``2 * config.k`` candidates, grades each, drafts one answer per relevant passage (at most
    ``config.max_candidates``) and critiques each for support and usefulness; the best by weighted
    score wins. Rewrites, web rounds and regenerations are bounded by the settings.
    """

    PREDICTORS = {
        "decide_retrieval": RetrieveDecision,
        "grade_relevance": GradeRelevance,
        "rewrite_query": RewriteQuery,
        "generate_answer": GenerateAnswer,
        "answer_directly": AnswerDirectly,
        "judge_support": JudgeSupport,
        "judge_usefulness": JudgeUsefulness,
    }

    # ------------------------------------------------------------------ steps
    def _judge_usefulness(self, tracer: Tracer, question: str, cand: Candidate) -> Candidate:
        use, _ = self._critic(tracer, "judge_usefulness", self.judge_usefulness, "usefulness",
                              question=question, answer=cand.answer)
        cand.usefulness = int(use.usefulness) if use is not None else None
        return cand

    def _draft_and_critique(self, tracer: Tracer, question: str, groups: list[list[Passage]], origin: str,
                            config: dict | None = None) -> list[Candidate]:
        def one(group: list[Passage]) -> Candidate | None:
            cand = self._draft(tracer, question, group, origin, config)
            if cand is None:
                return None
            return self._judge_usefulness(tracer, question, self._judge_support(tracer, question, cand))

        return [c for c in self._map(one, groups) if c is not None]

    # ------------------------------------------------------------------ forward
    def forward(self, question: str) -> dspy.Prediction:
        question = self._question(question)
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
        budget = WebBudget(cfg.max_web_rounds)
        has_web = self.web_search is not None
        relevant: list[Passage] = []
        failed_queries: list[str] = []
        query, rewrites, used_web = question, 0, False
        while True:
            passages = self._web(tracer, budget, query) if used_web else self._retrieve(tracer, query, 2 * cfg.k)
            relevant = self._grade(tracer, question, passages) if passages else []
            nxt = route_after_grading(len(relevant), rewrites, cfg.max_rewrites, budget.rounds_used,
                                      cfg.max_web_rounds, has_web)
            tracer.note("route", nxt, relevant=len(relevant), graded=len(passages))
            if nxt == "generate":
                break
            failed_queries.append(query)
            if nxt == "abstain":
                return self._finish(tracer, question, start, None, used_web=used_web)
            if nxt == "rewrite":
                rewrites += 1
                pred, _ = self._generator(tracer, "rewrite_query", self.rewrite_query, "query",
                                          question=question, failed_queries=failed_queries)
                new_query = str(pred.query).strip() if pred is not None and pred.query else ""
                query = new_query or question
            else:  # web: the next round searches the web for the question itself
                used_web = True
                query = question

        groups = [[p] for p in relevant[: cfg.max_candidates]]
        candidates = self._draft_and_critique(tracer, question, groups, "web" if used_web else "kb")
        best = self._choose(tracer, candidates)
        regenerations = 0
        while True:
            nxt = route_after_critique(best.support if best else None, regenerations, cfg.max_regenerations,
                                       budget.rounds_used, cfg.max_web_rounds, has_web)
            tracer.note("route", nxt, support=best.support if best else None)
            if nxt in ("accept", "flag_unsupported"):
                break  # a None best (no usable draft at all) abstains in _finish
            if nxt == "regenerate":
                regenerations += 1
                # All relevant passages together: a different context, not a repeat of the same call.
                config = {"rollout_id": regenerations, "temperature": 0.7} if regenerations > 1 else None
                new = self._draft_and_critique(tracer, question, [relevant], "regenerated", config=config)
            else:  # web
                used_web = True
                web_passages = self._web(tracer, budget, question)
                web_relevant = self._grade(tracer, question, web_passages) if web_passages else []
                relevant = web_relevant or relevant
                new = self._draft_and_critique(tracer, question, [[p] for p in web_relevant[: cfg.max_candidates]],
                                               "web")
            candidates.extend(new)
            best = self._choose(tracer, candidates)

        return self._finish(tracer, question, start, best,
                            used_web=used_web or (best is not None and best.origin == "web"))

    def _choose(self, tracer: Tracer, candidates: list[Candidate]) -> Candidate | None:
        """The best candidate by weighted score, recorded with every candidate's score."""
        cfg = self.config
        best = pick_best(candidates, cfg.w_rel, cfg.w_sup, cfg.w_use)
        scores = [round(c.score(cfg.w_rel, cfg.w_sup, cfg.w_use), 3) for c in candidates]
        tracer.note("select_candidate", {"scores": scores, "best": candidates.index(best) if best else None})
        return best

    def _direct(self, tracer: Tracer, question: str, start: float) -> dspy.Prediction:
        """No retrieval: answer from the LM alone, then rate usefulness (no support to judge)."""
        pred, _ = self._generator(tracer, "answer_directly", self.answer_directly, "answer", question=question)
        if pred is None or not str(pred.answer or "").strip():
            return self._finish(tracer, question, start, None, retrieved=False)
        cand = Candidate(answer=str(pred.answer).strip(), passages=[], relevant=False, origin="direct")
        return self._finish(tracer, question, start, self._judge_usefulness(tracer, question, cand), retrieved=False)
