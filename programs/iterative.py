"""Iterative retrieval (answer-guided re-query): draft → next query → retrieve → merge new → re-draft.

After ITER-RETGEN / FLARE-style iterative retrieval: the draft says what is still missing, so the
next search is written from the question *and* the draft (``NextQuery``). The rounds stop when
the support judge calls the draft confident (``program.iteration_confident``), when a round brings
no passage that was not already in hand, or after ``program.max_iterations`` retrieval rounds.

:func:`iterate_retrieval` is the loop on its own, callable from any program that has the shared
steps (``_retrieve``, ``_draft``, ``_judge_support``, ``_generator``) and a ``NextQuery`` predictor —
it is how SelfRAG honours a ``continue`` retrieve decision. :class:`IterativeRAG` is the program
built on it (registered as ``iterative``); its retrieval goes through the configured strategies.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import dspy

from programs.base import RAGModule
from programs.scoring import Candidate
from programs.strategy_retrieval import StrategyRetrieval
from programs.tracing import Tracer
from programs.types import Passage
from signatures import GenerateAnswer, JudgeSupport, NextQuery

RoundRoute = Literal["confident", "no_new_passages", "max_iterations", "requery"]
StopReason = Literal["confident", "no_new_passages", "max_iterations", "no_query", "token_budget"]

CONFIDENT: dict[str, tuple[str, ...]] = {"fully": ("fully",), "partially": ("fully", "partially")}


def route_after_round(support: str | None, confident: tuple[str, ...], rounds_done: int, max_iterations: int,
                      new_in_last_round: int | None) -> RoundRoute:
    """After a draft has been judged: stop when it is confident, when the last re-query found
    nothing new (None: no re-query yet), or when the rounds are spent; else query again."""
    if support in confident:
        return "confident"
    if new_in_last_round == 0:
        return "no_new_passages"
    if rounds_done >= max_iterations:
        return "max_iterations"
    return "requery"


@dataclass
class IterationOutcome:
    passages: list[Passage]
    draft: Candidate | None
    rounds: int  # retrieval rounds, the first included
    stop: StopReason


def iterate_retrieval(program: Any, tracer: Tracer, question: str, passages: list[Passage],
                      draft: Candidate | None, *, next_query: Callable[..., dspy.Prediction],
                      max_iterations: int, k: int, confident: tuple[str, ...] = CONFIDENT["fully"],
                      admit: Callable[[list[Passage]], list[Passage]] | None = None,
                      rounds_done: int = 1, may_requery: Callable[[], bool] | None = None) -> IterationOutcome:
    """Re-query until the draft is confident, a round finds nothing new, or ``max_iterations`` rounds.

    ``passages``/``draft``: what the first round (``rounds_done`` of them) produced; the draft's
    support is judged here when it has not been. ``next_query``: the program's ``NextQuery``
    predictor. ``admit`` filters a round's new passages before they are merged (e.g. SelfRAG's
    relevance grading: ``lambda ps: self._grade(tracer, question, ps)``). Each round records a
    ``next_query`` step, its retrieval, a ``merge`` step (the new passage ids) and the ``route``.
    ``may_requery`` is asked before every re-query round after the first (the caller allowed that one):
    False stops with ``token_budget`` (SelfRAG's per-question token budget).

    SelfRAG's ``continue``: after drafting ``best`` from ``relevant``, when the retrieve decision on
    ``answer_so_far=best.answer`` says "continue", call
    ``iterate_retrieval(self, tracer, question, relevant, best, next_query=self.next_query,
    max_iterations=cfg.max_iterations, k=cfg.k, admit=...)`` (with ``"next_query": NextQuery`` in
    its ``PREDICTORS``) and go on with ``outcome.draft``.
    """
    seen = {p.id for p in passages}
    passages = list(passages)
    rounds, new_count = rounds_done, None
    while True:
        if draft is not None and not draft.support_judged:
            program._judge_support(tracer, question, draft)
        nxt = route_after_round(draft.support if draft else None, confident, rounds, max_iterations, new_count)
        tracer.note("route", nxt, round=rounds, support=draft.support if draft else None)
        if nxt != "requery":
            return IterationOutcome(passages, draft, rounds, nxt)
        if rounds > rounds_done and may_requery is not None and not may_requery():
            tracer.note("route", "token_budget", round=rounds)
            return IterationOutcome(passages, draft, rounds, "token_budget")
        pred, _ = program._generator(tracer, "next_query", next_query, "next_query", question=question,
                                     draft_answer=draft.answer if draft else "",
                                     passage_titles=[p.title or p.id for p in passages])
        query = " ".join(str(pred.next_query or "").split()) if pred is not None else ""
        if not query:
            tracer.note("route", "no_query", round=rounds)
            return IterationOutcome(passages, draft, rounds, "no_query")
        got = program._retrieve(tracer, query, k)
        rounds += 1
        new = [p for p in got if p.id not in seen]
        if new and admit is not None:
            new = admit(new)
        seen.update(p.id for p in got)
        new_count = len(new)
        tracer.note("merge", [p.id for p in new], round=rounds, retrieved=len(got))
        if new:
            passages += new
            draft = program._draft(tracer, question, passages) or draft


class IterativeRAG(StrategyRetrieval, RAGModule):
    """Retrieve ``k``, draft, then re-query from the draft until it is supported (see the module doc).

    LM calls per question: at most ``1 + 3 * (max_iterations - 1) + 1`` — the first draft, per
    re-query round the next query, a re-draft and its support judgement, and the first judgement —
    plus whatever the configured retrieval strategies cost per retrieval. An unsupported final
    draft is returned flagged (``supported = "no"``); no draft at all is an abstention.
    """

    PREDICTORS = {"generate_answer": GenerateAnswer, "next_query": NextQuery, "judge_support": JudgeSupport}
    reports_score = False

    def forward(self, question: str) -> dspy.Prediction:
        question = self._question(question)
        cfg = self.config
        tracer, start = Tracer(), time.perf_counter()
        passages = self._retrieve(tracer, question, cfg.k)
        draft = self._draft(tracer, question, passages) if passages else None
        outcome = iterate_retrieval(self, tracer, question, passages, draft, next_query=self.next_query,
                                    max_iterations=cfg.max_iterations, k=cfg.k,
                                    confident=CONFIDENT[cfg.iteration_confident])
        return self._finish(tracer, question, start, outcome.draft)
