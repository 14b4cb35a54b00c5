"""Serial decomposition (least-to-most): answer the sub-questions in order, each with the answers so far,
then the question from all of them.

``DecomposeQuestion`` splits the question into at most ``program.max_subquestions`` sub-questions.
For each in turn: retrieve ``k`` passages for it (the earlier answers appended to the query, so a
sub-question that refers to an earlier answer — "where was *that person* born?" — finds it), then
``AnswerSubQuestion`` answers it from those passages and the answers so far. ``ComposeAnswer`` answers
the question from the sub-answers and every passage gathered (deduplicated), and the support judge
checks that answer against the passages. A question that does not decompose (no sub-question other
than itself) is answered from its own retrieval. The parallel form — retrieve for each sub-question,
fuse, answer once — is the ``decompose`` query transform of any program.

LM calls per question: 1 + n + 1 + 1 (n sub-questions ≤ ``max_subquestions``), plus the configured
retrieval strategies per retrieval.
"""

from __future__ import annotations

import time

import dspy

from programs.base import RAGModule
from programs.passages import cited_passages
from programs.query_transforms import MAX_QUERY_CHARS, clean_queries
from programs.scoring import Candidate
from programs.strategy_retrieval import StrategyRetrieval
from programs.tracing import Tracer
from programs.types import Passage
from signatures import AnswerSubQuestion, ComposeAnswer, DecomposeQuestion, JudgeSupport

UNKNOWN = "unknown"
UNKNOWN_SAID = frozenset({"", "unknown", "未知", "不知道", "不清楚", "无法确定"})


class SerialDecomposition(StrategyRetrieval, RAGModule):
    """Least-to-most decomposition over a retriever (see the module doc). Registered as ``decompose-serial``."""

    PREDICTORS = {"decompose": DecomposeQuestion, "answer_sub_question": AnswerSubQuestion,
                  "compose_answer": ComposeAnswer, "judge_support": JudgeSupport}
    reports_score = False

    def _sub_questions(self, tracer: Tracer, question: str) -> list[str]:
        cfg = self.config
        pred, _ = self._generator(tracer, "decompose_question", self.decompose, "sub_questions", question=question,
                                  max_subquestions=cfg.max_subquestions)
        subs, cut = clean_queries(pred.sub_questions if pred is not None else [], question, cfg.max_subquestions)
        tracer.note("sub_questions", subs, cut=cut)
        return subs

    def _answer_step(self, tracer: Tracer, sub: str, solved: list[str], passages: list[Passage]) -> str:
        pred, _ = self._generator(tracer, "answer_sub_question", self._bounded(self.answer_sub_question, sub,
                                                                               "sub_answer", passages),
                                  "sub_answer", sub_question=sub, answers_so_far=solved,
                                  passages=self._evidence(passages))
        answer = " ".join(str(pred.sub_answer or "").split()) if pred is not None else ""
        # "unknown" as the instructions ask, or as a model answering a Chinese question may say it
        return UNKNOWN if answer.strip(" .。").lower() in UNKNOWN_SAID else answer

    def _compose(self, tracer: Tracer, question: str, solved: list[str], passages: list[Passage]) -> Candidate | None:
        pred, _ = self._generator(tracer, "compose_answer", self._bounded(self.compose_answer, question,
                                                                                passages=passages), "answer",
                                  question=question, sub_answers=solved, passages=self._evidence(passages))
        if pred is None:
            return None
        if pred.answerable is False or not str(pred.answer or "").strip():
            tracer.note("candidate_dropped", "sub-answers and passages do not answer the question", answer=pred.answer)
            return None
        return Candidate(answer=str(pred.answer).strip(), passages=passages,
                         cited=cited_passages(passages, pred.citations), origin="kb")

    def forward(self, question: str) -> dspy.Prediction:
        question = self._question(question)
        k = self.config.k
        tracer, start = Tracer(), time.perf_counter()
        subs = self._sub_questions(tracer, question)
        gathered: dict[str, Passage] = {}
        solved: list[str] = []
        for sub in subs:
            known = "; ".join(a for a in (s.split(" → ", 1)[1] for s in solved) if a != UNKNOWN)
            query = f"{sub} ({known})"[:MAX_QUERY_CHARS] if known else sub
            self.plan_anew(tracer, sub)  # routing, filters and the rerank question from this sub-question
            passages = self._retrieve(tracer, query, k)
            gathered.update((p.id, p) for p in passages if p.id not in gathered)
            solved.append(f"{sub} → {self._answer_step(tracer, sub, solved, passages)}")
        if not subs:
            gathered.update((p.id, p) for p in self._retrieve(tracer, question, k))
        passages = list(gathered.values())
        best = self._compose(tracer, question, solved, passages) if passages else None
        if best is not None:
            best.passages = best.cited  # judged against what it cites (all gathered can exceed the context)
            self._judge_support(tracer, question, best)
        return self._finish(tracer, question, start, best)
