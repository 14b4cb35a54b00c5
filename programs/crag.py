"""CorrectiveRAG: retrieve → evaluate → (refine | web | both) → answer, after Yan et al. 2024 (CRAG).

The paper's fine-tuned T5 evaluator and its decompose-then-recompose refinement become typed DSPy
judgements (:class:`~signatures.EvaluateRetrieval`, :class:`~signatures.FilterStrip`,
:class:`~signatures.RewriteWebQuery`) so an optimizer can compile each one; the three-way split and
every other route are plain functions in :mod:`programs.routing`. Two additions to the paper: the
final answer is checked by the same support judge as SelfRAG (so ``result.supported`` is filled and
an ungrounded answer is regenerated, then returned flagged), and every loop is bounded by
:class:`~programs.settings.ProgramSettings`.

LM calls per question are at most::

    k (evaluate) + max_strips · (1 + max_web_rounds) (filter) + max_web_rounds (keyword rewrite)
    + (1 + max_regenerations) · 2 (draft + support)
"""

from __future__ import annotations

import re
import time
from typing import Any

import dspy

from programs.base import RAGModule, current_question_language
from programs.failures import nothing_found_reason
from programs.judging import field_labels, record_soft, soft_of
from programs.passages import passage_ref, quote
from programs.routing import (
    crag_action,
    crag_usable,
    route_after_critique,
    route_after_refinement,
    route_after_web_round,
)
from programs.scoring import Candidate, pick_best
from programs.soft_labels import expected_value
from programs.thresholds import CRAG_DEFAULTS_BY_LANGUAGE, CragThresholds, compiled_crag, crag_thresholds
from programs.tracing import Tracer
from programs.types import Passage
from programs.web_budget import WebBudget
from signatures import EvaluateRetrieval, FilterStrip, GenerateAnswer, JudgeSupport, RewriteWebQuery

# A sentence ends after CJK 。！？ — no space follows in Chinese/Japanese — or after . ! ? followed by
# whitespace (so "3.5" and "e.g.x" stay whole, and an initial such as "John H. McArthur" or "S.G. Tallentyre"
# is not an end); closing quotes/brackets stay with their sentence. A line break ends a strip, except a soft
# wrap inside a paragraph (see _unwrap). The full-width ； joins clauses of one sentence: on CMRC 2018 text,
# splitting there cut answer spans.
_SENTENCE_END = re.compile(
    r"(?<=[。！？])(?![。！？；」』”’）)\]])"
    r"|(?<=[。！？][」』”’）)\]])"
    r"|(?<=[.!?])(?<!\b[A-Z]\.)\s+"
    r"|(?<=[.!?][\"'”’)\]])\s+"
    r"|\s*\n\s*"
)
_CJK_END = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]$")


_BLOCK_LINE = re.compile(r"^\s*(?:#|[-*+•]\s|\d+[.)]\s|>|\|)")  # a heading, list item, quote or table row
_CJK_START = re.compile(r"^[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")


def _unwrap(text: str) -> str:
    """Join the lines of a hard-wrapped paragraph (Markdown and plain text wrapped at a fixed width), so a
    sentence running over a line break stays one strip: a line break between two non-blank lines is a soft
    wrap unless either line is a heading, list item, quote or table row (two CJK characters join without a
    space). A sentence end before the break still ends the strip (``_SENTENCE_END``)."""
    lines = text.split("\n")
    out = [lines[0]]
    for line in lines[1:]:
        prev = out[-1]
        if prev.strip() and line.strip() and not _BLOCK_LINE.match(prev) and not _BLOCK_LINE.match(line):
            left, right = prev.rstrip(), line.lstrip()
            glue = "" if _CJK_END.search(left) and _CJK_START.search(right) else " "
            out[-1] = left + glue + right
        else:
            out.append(line)
    return "\n".join(out)


def split_strips(text: str) -> list[str]:
    """Split a passage into sentence strips (CRAG's "knowledge strips"), Chinese punctuation included;
    hard-wrapped lines are joined first."""
    return [s.strip() for s in _SENTENCE_END.split(_unwrap(text)) if s and s.strip()]


def join_strips(strips: list[str]) -> str:
    """Recompose kept strips: no space after a CJK sentence, one space otherwise."""
    out = ""
    for s in strips:
        out += s if not out or _CJK_END.search(out) else " " + s
    return out


def select_strips(passages: list[Passage], max_strips: int) -> tuple[list[tuple[int, int, str]], int]:
    """Up to ``max_strips`` (passage index, position, strip) triples, taken round-robin over the
    passages so that every passage is represented before any passage gets a second strip; returned
    in document order. Also returns how many strips were left out by the bound."""
    per_passage = [split_strips(p.text) for p in passages]
    total = sum(len(s) for s in per_passage)
    chosen: list[tuple[int, int, str]] = []
    depth = 0
    while len(chosen) < max_strips and len(chosen) < total:
        for i, strips in enumerate(per_passage):
            if depth < len(strips) and len(chosen) < max_strips:
                chosen.append((i, depth, strips[depth]))
        depth += 1
    chosen.sort()
    return chosen, total - len(chosen)


class CorrectiveRAG(RAGModule):
    """Corrective retrieval-augmented generation over a retriever, with an optional web search.

    Same constructor and output contract as every :class:`~programs.base.RAGModule`. ``config.k``
    passages are evaluated; the web is used when retrieval is judged incorrect or ambiguous (web
    passages are cited with their URL, ``Citation.source``). The settings it reads: the thresholds
    ``crag_upper`` and ``crag_lower`` and the score they apply to (``crag_score``; unset: the compiled
    artifact's, else the defaults — :attr:`crag_thresholds`), and the bounds ``max_strips``, ``max_web_rounds``,
    ``max_regenerations``, ``k``, ``passage_chars`` and ``num_threads``. The generator LM writes the
    answers and web queries; the critic LM runs the evaluator, the strip filter and the support judge.
    """

    PREDICTORS = {
        "evaluate_retrieval": EvaluateRetrieval,
        "filter_strip": FilterStrip,
        "rewrite_web_query": RewriteWebQuery,
        "generate_answer": GenerateAnswer,
        "judge_support": JudgeSupport,
    }

    @property
    def crag_thresholds(self) -> CragThresholds:
        """The evaluator's thresholds in force for the question being answered: the settings' ``crag_score`` /
        ``crag_upper`` / ``crag_lower``, else the compiled artifact's (its calibrate stage; its set for the
        question's language when it holds one), else the defaults (:func:`crag_thresholds`)."""
        return self.crag_thresholds_for(current_question_language())

    def crag_thresholds_for(self, language: str | None) -> CragThresholds:
        """:attr:`crag_thresholds` for a question in ``language`` (None: a set for any language)."""
        cfg = self.config
        return crag_thresholds(compiled_crag(self.compiled_thresholds, language), cfg.crag_score, cfg.crag_upper,
                               cfg.crag_lower, language)

    def check_crag_settings(self) -> None:
        """ValueError (naming both values) when a threshold set in the settings ends against the other one in
        force for questions in some language: the artifact's (any or per-language set) or the default."""
        compiled = self.compiled_thresholds
        for language in [None, *sorted({*CRAG_DEFAULTS_BY_LANGUAGE, *(compiled.crag_by_language if compiled else {})})]:
            try:
                self.crag_thresholds_for(language)
            except ValueError as exc:
                raise ValueError(f"{exc} (the thresholds for {language} questions)" if language else str(exc)) from None

    def evaluator_probabilities(self, question: str, passage: Passage) -> tuple[dict[int, float] | None, Tracer]:
        """The evaluator's probabilities over the scores 0–10 for one passage (None when the call failed; the
        decoded score at 1 without log-probabilities), with the trace of the call: what the calibrate stage
        fits the thresholds on."""
        tracer = Tracer()
        soft, _ = self._evaluator_call(tracer, question, passage)
        return (None if soft is None else {int(k): float(v) for k, v in soft.probs.items()}), tracer

    def _evaluator_call(self, tracer: Tracer, question: str, passage: Passage) -> tuple[Any, Any]:
        """One evaluator call on one passage: its soft label (None when it failed) and its prediction; the
        step records the passage's id and the probabilities."""
        pred, step = self._critic(tracer, "evaluate_retrieval", self.evaluate_retrieval, "score",
                                  question=question, passage=self._evidence([passage]))
        step.inputs["passage_id"] = passage_ref(passage)
        soft = soft_of(pred, "score", field_labels(self.evaluate_retrieval, "score"))
        record_soft(step, soft)
        return soft, pred

    # ------------------------------------------------------------------ steps
    def _evaluate(self, tracer: Tracer, question: str, passages: list[Passage]) -> list[float | None]:
        """The evaluator's 0–10 score of each passage: the argmax of its probabilities over the scores
        (recorded on the step, with the passage's id) or, with ``crag_score = "expected"``, their
        expectation (2 decimals; the route step lists the scores routed on); the decoded score without
        log-probabilities (where the expectation is that score too)."""
        expected = self.crag_thresholds.score == "expected"

        def score(p: Passage) -> float | None:
            soft, pred = self._evaluator_call(tracer, question, p)
            if soft is not None and expected:
                return round(expected_value(soft.probs), 2)
            if soft is not None:
                return int(soft.label)
            if pred is None:
                return None
            try:
                return max(0, min(10, int(pred.score)))
            except (TypeError, ValueError):
                return None

        return self._map(score, passages)

    def _refine(self, tracer: Tracer, question: str, passages: list[Passage], source: str) -> list[Passage]:
        """Decompose into strips, keep the ones the filter keeps, recompose per passage (same id and
        metadata, so citations still point at the document or URL)."""
        if not passages:
            return []
        chosen, left_out = select_strips(passages, self.config.max_strips)

        def keep(item: tuple[int, int, str]) -> bool:
            i, _, strip = item
            pred, step = self._critic(tracer, "filter_strip", self.filter_strip, "keep", question=question,
                                      strip=quote(strip, passages[i].title, self.config.passage_chars))
            soft = soft_of(pred, "keep", field_labels(self.filter_strip, "keep"))
            record_soft(step, soft)
            return soft is not None and soft.label is True  # a failed judgement keeps nothing

        verdicts = self._map(keep, chosen)
        kept: dict[int, list[str]] = {}
        for (i, _, strip), ok in zip(chosen, verdicts):
            if ok:
                kept.setdefault(i, []).append(strip)
        refined = [passages[i].model_copy(update={"text": join_strips(strips)}) for i, strips in sorted(kept.items())]
        tracer.note("refine", {"strips": len(chosen), "kept": sum(len(s) for s in kept.values()),
                               "left_out_by_limit": left_out, "passages": [p.id for p in refined]},
                    source=source, passages=len(passages))
        return refined

    def _web_knowledge(self, tracer: Tracer, question: str) -> list[Passage]:
        """Keyword rewrite → web search → refine, for at most ``max_web_rounds`` rounds (WebBudget)."""
        budget = WebBudget(self.config.max_web_rounds)
        if self.web_search is None or budget.exhausted:  # recorded as a refused web step, no LM call
            self._web(tracer, budget, question)
            return []
        failed: list[str] = []
        while True:
            pred, _ = self._generator(tracer, "rewrite_web_query", self.rewrite_web_query, "web_query",
                                      question=question, failed_queries=failed)
            query = " ".join(str(pred.web_query or "").split()) if pred is not None else ""
            query = query or question
            passages = self._web(tracer, budget, query)
            refined = self._refine(tracer, question, passages, "web") if passages else []
            nxt = route_after_web_round(len(refined), budget.steps[-1].error_kind, budget.remaining)
            tracer.note("route", nxt, web_round=budget.rounds_used, kept=len(refined))
            if nxt != "retry":
                return refined
            failed.append(query)

    def _draft_checked(self, tracer: Tracer, question: str, knowledge: list[Passage], web_ids: set[str],
                       config: dict | None) -> Candidate | None:
        """Draft from the refined knowledge, then judge its support; the origin is the web when it cites a web passage."""
        cand = self._draft(tracer, question, knowledge, config=config)
        if cand is None:
            return None
        cand.origin = "web" if any(p.id in web_ids for p in cand.cited) else "kb"
        return self._judge_support(tracer, question, cand)

    # ------------------------------------------------------------------ forward
    def forward(self, question: str) -> dspy.Prediction:
        question = self._question(question)
        cfg = self.config
        tracer = Tracer()
        start = time.perf_counter()

        passages = self._retrieve(tracer, question, cfg.k)
        scores = self._evaluate(tracer, question, passages)
        cut = self.crag_thresholds
        action = crag_action(scores, cut.upper, cut.lower)
        tracer.note("route", action, scores=scores, score=cut.score, upper=cut.upper, lower=cut.lower)

        knowledge: list[Passage] = []
        if action in ("correct", "ambiguous"):
            internal = [p for p, s in zip(passages, scores) if crag_usable(s, cut.lower)]
            knowledge += self._refine(tracer, question, internal, "kb")
        web_knowledge: list[Passage] = []
        if action in ("incorrect", "ambiguous"):
            web_knowledge = self._web_knowledge(tracer, question)
            knowledge += web_knowledge

        nxt = route_after_refinement(len(knowledge))
        tracer.note("route", nxt, knowledge=len(knowledge))
        if nxt == "abstain":
            retrieval_failed = any(s.step == "retrieve" and not s.ok for s in tracer.steps)
            return self._finish(tracer, question, start, None, used_web=bool(web_knowledge),
                                reason=nothing_found_reason(tracer.steps, retrieval_failed))

        candidates: list[Candidate] = []
        regenerations = 0
        config: dict | None = None
        while True:
            cand = self._draft_checked(tracer, question, knowledge, {p.id for p in web_knowledge}, config)
            if cand is not None:
                candidates.append(cand)
            best = pick_best(candidates, cfg.w_rel, cfg.w_sup, cfg.w_use)
            nxt = route_after_critique(best.support if best else None, regenerations, cfg.max_regenerations,
                                       0, 0, has_web=False)  # the web was already consulted by the action
            tracer.note("route", nxt, support=best.support if best else None)
            if nxt != "regenerate":
                break
            regenerations += 1
            config = {"rollout_id": regenerations, "temperature": 0.7}  # same knowledge, a fresh sample
        return self._finish(tracer, question, start, best, used_web=bool(web_knowledge),
                            reason="no_answer_in_passages")  # (only read when no draft came: best is None)
