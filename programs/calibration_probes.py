"""The judgements of :class:`~programs.selfrag.SelfRAG` one at a time, as ``selfrag compile``'s calibrate
stage reads them: each probe runs only what its score needs (a first round's retrieval, grading, the
answer check) and returns the soft score with the trace it was taken from (the trace's usage is what it
cost). A mixin over SelfRAG's steps (``_retrieve``, ``_relevant``, ``_p_stated``, ``_critic``, …)."""

from __future__ import annotations

from programs.judging import field_labels, record_soft, soft_of
from programs.retrieve_rules import match_rule
from programs.thresholds import top_similarity
from programs.tracing import Tracer
from programs.types import Passage


class CalibrationProbes:
    """Soft scores of single judgements, for threshold fitting (mixed into SelfRAG)."""

    def retrieve_probability(self, question: str) -> tuple[str | None, float | None, Tracer]:
        """The cheap rule's verdict (None when no rule applies) and, when no rule decides, the judge's
        P(retrieve) = P(yes) + P(continue) (None if the judgement failed); with the trace of the call."""
        tracer = Tracer()
        rule = match_rule(question) if self.config.retrieve_rules else None
        if rule is not None:
            return rule.decision, None, tracer
        return None, self._p_retrieve(tracer, question), tracer

    def _p_retrieve(self, tracer: Tracer, question: str) -> float | None:
        pred, step = self._critic(tracer, "retrieve_decision", self.decide_retrieval, "decision",
                                  question=question, answer_so_far="")
        soft = soft_of(pred, "decision", field_labels(self.decide_retrieval, "decision"))
        record_soft(step, soft)
        return None if soft is None else soft.p("yes") + soft.p("continue")

    def stated_probability(self, question: str, gate: bool = True) -> tuple[float | None, Tracer]:
        """What the answer check gives in a first round: retrieve, grade, then P(stated) on the first
        draft's passages (None when the similarity gate stops the round — trace step ``similarity_gate``;
        ``gate=False`` checks past it —, no passage is relevant or the check failed), with the trace."""
        p, _, _, tracer = self._first_round(question, gate)
        return p, tracer

    def first_round_signals(self, question: str) -> tuple[float | None, float | None, float | None, Tracer]:
        """P(stated) checked past the gate (as :meth:`stated_probability` with ``gate=False``), the check's
        prior when the thresholds in force take it (``check_prior``; else None) and the best dense similarity
        of the same retrieval (None when no passage carries one), with the trace."""
        return self._first_round(question, gate=False)

    def _first_round(self, question: str, gate: bool) -> tuple[float | None, float | None, float | None, Tracer]:
        tracer = Tracer()
        passages = self._retrieve(tracer, question, self.config.grade_pool or self.config.k)
        top = top_similarity(passages)
        if gate and self._too_dissimilar(tracer, passages):
            return None, None, top, tracer
        relevant = self._relevant(tracer, question, passages)
        p, prior = self._p_stated(tracer, question, relevant) if relevant else (None, None)
        return p, prior, top, tracer

    def retrieval_similarity(self, question: str) -> tuple[float | None, Tracer]:
        """The best dense similarity of a first round's passages (None when none carries one), with the trace."""
        tracer = Tracer()
        passages = self._retrieve(tracer, question, self.config.grade_pool or self.config.k)
        return top_similarity(passages), tracer

    def relevance_probabilities(self, question: str, passages: list[Passage]) -> tuple[list[float | None], Tracer]:
        """P(relevant) of each passage as the program grades them (``config.grading``), with the trace."""
        tracer = Tracer()
        return self._relevance_scores(tracer, question, passages), tracer
