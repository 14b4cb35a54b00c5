"""CorrectiveRAG: retrieve → evaluate → (refine | web | both) → answer, after Yan et al. 2024 (CRAG).

The paper's fine-tuned T5 evaluator and its decompose-then-recompose refinement become typed DSPy
judgements (:class:`~signatures.EvaluateRetrieval`, :class:`~signatures.FilterStrip`,
:class:`~signatures.RewriteWebQuery`) so an optimizer can compile each one; the three-way split and
every other route are plain functions in :mod:`programs.routing`. Two additions to the paper: the
final answer is checked by the same support judge as SelfRAG (so ``result.supported`` is filled and
an ungrounded answer is regenerated, then returned flagged), and every loop is bounded by
:class:`~selfrag.settings.ProgramSettings`.

LM calls per question are at most::

    k (evaluate) + max_strips · (1 + max_web_rounds) (filter) + max_web_rounds (keyword rewrite)
    + (1 + max_regenerations) · 2 (draft + support)
"""

from __future__ import annotations

import logging
import re
import time

import dspy

from programs.base import RAGModule, parallel_map, quote_safe, quoted_passage
from programs.routing import (
    crag_action,
    crag_usable,
    route_after_critique,
    route_after_refinement,
    route_after_web_round,
)
from programs.scoring import Candidate, pick_best
from programs.selfrag import ABSTAIN_ANSWER, format_passages
from programs.tracing import Tracer
from programs.settings import ProgramSettings
from programs.types import Citation, Passage, Retriever, RAGResult, TraceStep, WebSearch
from programs.web_budget import STEP as WEB_STEP
from programs.web_budget import WebBudget, error_kind
from signatures import EvaluateRetrieval, FilterStrip, GenerateAnswer, JudgeSupport, RewriteWebQuery

logger = logging.getLogger(__name__)

# A sentence ends after CJK 。！？ (and full-width ；) — no space follows in Chinese/Japanese — or after
# . ! ? followed by whitespace (so "3.5" and "e.g.x" stay whole); closing quotes/brackets stay with
# their sentence. Line breaks always end a strip.
_SENTENCE_END = re.compile(
    r"(?<=[。！？；])(?![。！？；」』”’）)\]])"
    r"|(?<=[。！？][」』”’）)\]])"
    r"|(?<=[.!?])\s+"
    r"|(?<=[.!?][\"'”’)\]])\s+"
    r"|\s*\n\s*"
)
_CJK_END = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]$")


def split_strips(text: str) -> list[str]:
    """Split a passage into sentence strips (CRAG's "knowledge strips"), Chinese punctuation included."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


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

    Same constructor and output contract as :class:`programs.selfrag.SelfRAG`: the prediction has
    ``answer``, ``abstained``, ``cited_doc_ids`` and ``result`` (a :class:`RAGResult` with the
    trace and usage). Web passages are cited with their URL (``Citation.source``).

    Args:
        retriever: returns ranked :class:`Passage` objects for a query (``config.k`` are evaluated).
        web_search: used when retrieval is judged incorrect or ambiguous; None = knowledge base only.
        config: thresholds (``crag_upper``, ``crag_lower``) and bounds (``max_strips``,
            ``max_web_rounds``, ``max_regenerations``, ``k``, ``passage_chars``, ``num_threads``).
        generator_lm: LM for answers and web-query rewrites (None = the one in dspy.settings).
        critic_lm: LM for the evaluator, strip filter and support judge (None = generator_lm).
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

        self.evaluate_retrieval = dspy.Predict(EvaluateRetrieval)
        self.filter_strip = dspy.Predict(FilterStrip)
        self.rewrite_web_query = dspy.Predict(RewriteWebQuery)
        self.generate_answer = dspy.Predict(GenerateAnswer)
        self.judge_support = dspy.Predict(JudgeSupport)

    # ------------------------------------------------------------------ plumbing
    def _format(self, passages: list[Passage]) -> str:
        """Numbered «…» passages with the delimiters neutralised inside the quoted text."""
        return format_passages([quoted_passage(p) for p in passages], self.config.passage_chars)

    def _map(self, fn, items):
        return parallel_map(fn, items, self.config.num_threads)

    # ------------------------------------------------------------------ steps
    def _retrieve(self, tracer: Tracer, query: str) -> list[Passage]:
        start = time.perf_counter()
        try:
            passages = list(self.retriever.retrieve(query, k=self.config.k))[: self.config.k]
        except Exception as exc:  # noqa: BLE001 - a store failure is recorded; the web may still answer
            step = tracer.note("retrieve", None, query=query)
            step.ok, step.error = False, f"{type(exc).__name__}: {exc}"
            return []
        step = tracer.note("retrieve", [p.id for p in passages], query=query)
        step.seconds = round(time.perf_counter() - start, 4)
        return passages

    def _evaluate(self, tracer: Tracer, question: str, passages: list[Passage]) -> list[int | None]:
        def score(p: Passage) -> int | None:
            pred, _ = self._critic(tracer, "evaluate_retrieval", self.evaluate_retrieval, "score",
                                   question=question, passage=self._format([p]))
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
            title = passages[i].title
            text = strip if len(strip) <= self.config.passage_chars else strip[: self.config.passage_chars] + "…"
            quoted = (f"({quote_safe(title)}) " if title else "") + f"«{quote_safe(text)}»"
            pred, _ = self._critic(tracer, "filter_strip", self.filter_strip, "keep", question=question, strip=quoted)
            return pred is not None and pred.keep is True  # a failed judgement keeps nothing

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

    def _search(self, budget: WebBudget, query: str) -> tuple[list[Passage], TraceStep]:
        try:
            return budget.try_search(self.web_search, query, max_results=self.config.k)
        except Exception as exc:  # noqa: BLE001 - a backend bug is recorded like any web failure
            logger.warning("web search crashed for %r: %s", query, exc)
            return [], TraceStep(step=WEB_STEP, inputs={"query": query}, ok=False,
                                 error=f"crashed: {type(exc).__name__}: {exc}")

    def _web_knowledge(self, tracer: Tracer, question: str) -> list[Passage]:
        """Keyword rewrite → web search → refine, for at most ``max_web_rounds`` rounds (WebBudget)."""
        budget = WebBudget(self.config.max_web_rounds)
        if self.web_search is None or budget.exhausted:  # recorded as a refused web step, no LM call
            _, step = self._search(budget, question)
            tracer.record(step)
            return []
        failed: list[str] = []
        while True:
            pred, _ = self._generator(tracer, "rewrite_web_query", self.rewrite_web_query, "web_query",
                                      question=question, failed_queries=failed)
            query = " ".join(str(pred.web_query or "").split()) if pred is not None else ""
            query = query or question
            passages, step = self._search(budget, query)
            tracer.record(step)
            refined = self._refine(tracer, question, passages, "web") if passages else []
            nxt = route_after_web_round(len(refined), error_kind(step), budget.remaining)
            tracer.note("route", nxt, web_round=budget.rounds_used, kept=len(refined))
            if nxt != "retry":
                return refined
            failed.append(query)

    def _draft(self, tracer: Tracer, question: str, knowledge: list[Passage], web_ids: set[str],
               config: dict | None) -> Candidate | None:
        evidence = self._format(knowledge)
        pred, _ = self._generator(tracer, "generate_answer", self.generate_answer, "answer", config=config,
                                  question=question, passages=evidence)
        if pred is None:
            return None
        if pred.answerable is False or not str(pred.answer or "").strip():
            tracer.note("candidate_dropped", "refined knowledge does not answer the question", answer=pred.answer)
            return None
        cited = [knowledge[i - 1] for i in (pred.citations or []) if isinstance(i, int) and 1 <= i <= len(knowledge)]
        cand = Candidate(answer=str(pred.answer).strip(), passages=knowledge, cited=cited or knowledge,
                         origin="web" if any(p.id in web_ids for p in (cited or knowledge)) else "kb")
        sup, _ = self._critic(tracer, "judge_support", self.judge_support, "support",
                              question=question, passages=evidence, answer=cand.answer)
        cand.support = sup.support if sup is not None else None
        return cand

    # ------------------------------------------------------------------ forward
    def forward(self, question: str) -> dspy.Prediction:
        if not isinstance(question, str) or not question.strip():
            raise ValueError("question must be a non-empty string")
        question = question.strip()
        cfg = self.config
        tracer = Tracer()
        start = time.perf_counter()

        passages = self._retrieve(tracer, question)
        scores = self._evaluate(tracer, question, passages)
        action = crag_action(scores, cfg.crag_upper, cfg.crag_lower)
        tracer.note("route", action, scores=scores, upper=cfg.crag_upper, lower=cfg.crag_lower)

        knowledge: list[Passage] = []
        if action in ("correct", "ambiguous"):
            internal = [p for p, s in zip(passages, scores) if crag_usable(s, cfg.crag_lower)]
            knowledge += self._refine(tracer, question, internal, "kb")
        web_knowledge: list[Passage] = []
        if action in ("incorrect", "ambiguous"):
            web_knowledge = self._web_knowledge(tracer, question)
            knowledge += web_knowledge

        nxt = route_after_refinement(len(knowledge))
        tracer.note("route", nxt, knowledge=len(knowledge))
        if nxt == "abstain":
            return self._finish(tracer, question, start, None, used_web=bool(web_knowledge))

        candidates: list[Candidate] = []
        regenerations = 0
        config: dict | None = None
        while True:
            cand = self._draft(tracer, question, knowledge, {p.id for p in web_knowledge}, config)
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
        return self._finish(tracer, question, start, best, used_web=bool(web_knowledge))

    def _finish(self, tracer: Tracer, question: str, start: float, best: Candidate | None, *,
                used_web: bool) -> dspy.Prediction:
        cfg = self.config
        if best is None:
            tracer.note("abstain", ABSTAIN_ANSWER)
        citations = [] if best is None else [
            Citation(id=p.id, source=p.source, title=p.title, snippet=p.text[:200]) for p in best.cited
        ]
        result = RAGResult(
            question=question,
            answer=ABSTAIN_ANSWER if best is None else best.answer,
            citations=citations,
            retrieved=True,
            abstained=best is None,
            used_web=used_web,
            supported=None if best is None else (best.support or "no"),
            score=None if best is None else round(best.score(cfg.w_rel, cfg.w_sup, cfg.w_use), 4),
            trace=tracer.steps,
            usage=tracer.usage,
            seconds=round(time.perf_counter() - start, 4),
        )
        cited_doc_ids = [str(p.metadata.get("doc_id") or p.id) for p in (best.cited if best else [])]
        return dspy.Prediction(answer=result.answer, abstained=result.abstained, cited_doc_ids=cited_doc_ids,
                               result=result)

