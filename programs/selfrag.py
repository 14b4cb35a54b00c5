"""SelfRAG: decide → retrieve → grade → check → draft → critique → pick, on soft scores, with bounded fallbacks.

After Asai et al. 2023 (Self-RAG) with the reflection tokens as separate typed DSPy judgements, so an
optimizer can compile each one, and the LangGraph-style corrective loop (rewrite, web, abstain).
Every judgement gives a probability per label (from its label tokens' log-probabilities; probability
1 for the decoded label on a backend without them) and three thresholds — compiled by ``selfrag
compile``'s calibrate stage — turn them into routes: retrieve when P(retrieve) ≥ δ, keep a passage when
P(relevant) ≥ its threshold, answer when the chosen candidate's confidence (its expected support,
P(fully) + 0.5·P(partially)) ≥ the answer threshold, else abstain with a reason.

The answer check (``program.answer_check``, on by default) sits between grading and drafting: one call
asks whether the passages the first draft would read *state* the answer (:class:`CheckAnswerStated`).
Relevance is topical — an unanswerable question usually retrieves passages on its subject — and the
support judge rates an answer the drafter has already committed to; on ClapNQ dev neither separates
answerable from unanswerable questions well (ROC AUC 0.55 and 0.62) while the check does (0.80).
Its score is P(stated), or — with a compiled ``stated_similarity_weight`` w — (1 − w)·P(stated) + w·the
round's best dense similarity. Thresholds compiled with ``check_prior`` take the check less its prior instead of
P(stated): the same check shown no passage, asked once per question (trace step ``check_prior``, one short call
more), measures how much "yes" the question draws on its own, (P(stated) − prior + 1) / 2. Below the compiled ``stated`` threshold the source lacks the answer: no rewrite (the topic was found),
the web when allowed, else abstain (``answer_not_stated``) — no draft or support call is spent on it.
Above the compiled ``verified`` threshold (P(stated) > it; default 1.0, never) the check stands in for
the support judge on the draft from the checked passages: no support call, its confidence is P(stated)
(trace step ``support_verified``). On ClapNQ dev the support judge's verdicts barely separate right
answers from hallucinated ones (AUC 0.62) while costing 40% of the prompt tokens; on the drafts a check fitted
with the e5 similarity lets through, not at all (AUC 0.51 dev, 0.64 train; ``bench/bench_support_judge.py``), so
the shipped English e5 set has ``verified`` 0: the check stands in on every draft it lets through.

Before grading, a knowledge-base round whose passages are all far from the query (their best dense
similarity below the compiled ``similarity`` threshold, fitted for the collection's embedder; default 0,
off) finds nothing: no grading or check call; the route is that of a round with no relevant passage
(rewrite, web, else abstain ``low_similarity``). On ClapNQ the top dense similarity alone separates
answerable from unanswerable questions (ROC AUC 0.87 on train, 0.83 on dev) about as well as the check.
With such a gate in force and the check on, a round's knowledge-base passages are not graded
(``program.kb_grading = "without_gate"``, the default; trace step ``grading`` "skipped"): the gate stops the
far rounds and the check decides the rest — on ClapNQ dev the relevance judge's P(relevant) hardly separates
answerable from unanswerable questions (AUC 0.57) and its batch cost 29% of the prompt tokens.

Self-RAG's third retrieve label, ``continue``, is honoured after the first draft
(``program.continue_retrieval``): a draft below the answer threshold goes back to the retrieve judge
as ``answer_so_far``; when it says "continue", answer-guided re-query rounds
(:func:`programs.iterative.iterate_retrieval`: ``next_query`` from the question and the draft →
retrieve → grade → merge the new relevant passages → re-draft → support) run until the draft is
confident, a round brings no new relevant passage, or ``max_iterations`` rounds.

LM calls per question, at most (``grading = "batched"``, one joint draft)::

    1 (retrieve decision; 0 when a cheap rule decides) + (1 + max_rewrites + max_web_rounds) ·
    (1 grade batch [+ per-passage re-grades of a malformed batch; none with a gate in force] + 1 answer check) + max_rewrites (rewrite) +
    (1 + max_regenerations + max_web_rounds) · (draft + support [+ usefulness when several candidates])
    + 1 (continue decision) + (max_iterations − 1) · (next query + 1 grade batch + draft + support)
"""

from __future__ import annotations

import time

import dspy

from programs.base import RAGModule
from programs.calibration_probes import CalibrationProbes
from programs.draft_contexts import context_key, first_contexts, regeneration_context
from programs.iterative import CONFIDENT, iterate_retrieval
from programs.judging import field_labels, record_soft, soft_of
from programs.retrieve_rules import match_rule
from programs.routing import route_after_answer_check, route_after_grading, route_continue, route_retrieve_decision
from programs.scoring import Candidate, pick_best
from programs.token_budget import TokenBudget, reserved_steps
from programs.retriever_calls import retriever_embedder
from programs.thresholds import (NO_PASSAGE, check_value, similarity_gate, skips_grading, skips_support, stated_score,
                                 stated_weight)
from programs.thresholds import too_dissimilar, top_similarity
from programs.tracing import Tracer
from programs.failures import nothing_found_reason
from programs.types import AbstainReason, Passage
from programs.web_budget import WebBudget
from signatures import (
    AnswerDirectly,
    CheckAnswerStated,
    GenerateAnswer,
    GradeRelevance,
    GradeRelevanceBatch,
    JudgeSupport,
    JudgeUsefulness,
    NextQuery,
    RetrieveDecision,
    RewriteQuery,
)

# Rough prompt-token cost of the optional steps, used by the per-question token budget to decide
# what still fits (the real cost is recorded on each trace step).
STEP_ESTIMATES = {"extra_candidates": 700, "usefulness_single": 150, "regeneration": 1000, "web": 1200}
CONTINUATION_ESTIMATE = 1500  # the continue decision and one re-query round; not reserved (see token_budget)
REQUERY_ESTIMATE = 1300  # one more re-query round: the next query, grading its passages, a re-draft, its support


def _charge(budget: TokenBudget, tracer: Tracer) -> None:
    """Bring the budget's spent tokens up to the prompt tokens the trace has recorded so far."""
    budget.spend(max(0, tracer.usage.prompt_tokens - budget.spent))


class SelfRAG(CalibrationProbes, RAGModule):
    """Self-reflective RAG over a retriever, with an optional web search (constructor: :class:`RAGModule`).

    Retrieves ``config.grade_pool`` (default k) candidates and grades them (one batched call by default); drafts one
    answer from the top ``config.draft_passages`` relevant passages (``max_candidates = 1``) or one per
    relevant passage (``max_candidates > 1``, Self-RAG's parallel segments), critiques each for support
    (and usefulness when there are several to rank), and answers with the best only when its confidence
    reaches the answer threshold. Rewrites, web rounds and regenerations are bounded by the settings;
    ``config.token_budget`` drops optional steps in a stated order (:mod:`programs.token_budget`).
    """

    PREDICTORS = {
        "decide_retrieval": RetrieveDecision,
        "grade_relevance": GradeRelevance,
        "grade_relevance_batch": GradeRelevanceBatch,
        "rewrite_query": RewriteQuery,
        "generate_answer": GenerateAnswer,
        "answer_directly": AnswerDirectly,
        "judge_support": JudgeSupport,
        "judge_usefulness": JudgeUsefulness,
        "next_query": NextQuery,
        "check_answer": CheckAnswerStated,
    }
    # Added after an artifact format was first shipped: an artifact without them loads (uncompiled state).
    ADDED_PREDICTORS = frozenset({"next_query", "check_answer"})

    # ------------------------------------------------------------------ steps
    def _decide(self, tracer: Tracer, question: str) -> str:
        cfg, th = self.config, self.thresholds
        rule = match_rule(question) if cfg.retrieve_rules and cfg.retrieve_mode == "adaptive" else None
        p_retrieve = None
        if rule is not None:
            tracer.note("retrieve_rule", rule.decision, rule=rule.rule)
        elif cfg.retrieve_mode == "adaptive":
            p_retrieve = self._p_retrieve(tracer, question)
        route = route_retrieve_decision(cfg.retrieve_mode, rule.decision if rule else None, p_retrieve, th.retrieve)
        tracer.note("route", route, mode=cfg.retrieve_mode, p_retrieve=p_retrieve, threshold=th.retrieve)
        return route

    def _relevant(self, tracer: Tracer, question: str, passages: list[Passage]) -> list[tuple[Passage, float]]:
        """The passages whose P(relevant) reaches the threshold, with it, in retrieval order; knowledge-base
        passages are kept ungraded (P(relevant) 1, trace step ``grading`` "skipped") when the gate and the
        check stand in for the grading (:func:`~programs.thresholds.skips_grading`)."""
        if skips_grading(self.config.kb_grading, self.config.answer_check, self.gate_threshold, passages):
            tracer.note("grading", "skipped", passages=len(passages), gate=self.gate_threshold)
            return [(p, 1.0) for p in passages]
        scores = self._relevance_scores(tracer, question, passages)
        th = self.thresholds.relevance
        return [(p, s) for p, s in zip(passages, scores) if s is not None and s >= th]

    @property
    def gate_threshold(self) -> float:
        """The similarity threshold in force over this program's retriever (0 = off: unfitted, or fitted
        for another embedder)."""
        return similarity_gate(self.thresholds, retriever_embedder(self.retriever))

    @property
    def stated_weight(self) -> float:
        """The similarity's weight in the answer check's score over this program's retriever (0: P(stated) alone)."""
        return stated_weight(self.thresholds, retriever_embedder(self.retriever))

    def _too_dissimilar(self, tracer: Tracer, passages: list[Passage]) -> bool:
        """Whether a knowledge-base round's passages are all too far from the query to be worth grading
        (their best dense similarity below the similarity threshold in force for this retriever's
        embedder); recorded as the trace step ``similarity_gate`` when they are."""
        gate = self.gate_threshold
        top = top_similarity(passages)
        if not too_dissimilar(top, gate):
            return False
        tracer.note("similarity_gate", "below", top_similarity=round(top, 4), threshold=gate)
        return True

    def _p_stated(self, tracer: Tracer, question: str,
                  relevant: list[tuple[Passage, float]]) -> tuple[float | None, float | None]:
        """The answer check on the passages the first draft would read: P(they state the answer), and — when
        the thresholds in force take the check less its prior (``check_prior``) — the prior (:meth:`_p_prior`;
        else None). None for a failed call: the check then decides nothing and the round goes on to drafting
        (a failed check never blocks an answer)."""
        passages = [p for p, _ in self._first(relevant)[0]]
        pred, step = self._critic(tracer, "check_answer", self.check_answer, "stated",
                                  question=question, passages=self._evidence(passages, question))
        soft = soft_of(pred, "stated", field_labels(self.check_answer, "stated"))
        record_soft(step, soft)
        p = None if soft is None else soft.p("yes")
        if p is None or not self.thresholds.check_prior:
            return p, None
        return p, self._p_prior(tracer, question)

    def _p_prior(self, tracer: Tracer, question: str) -> float | None:
        """The check's prior: its P(stated) shown no passage (:data:`~programs.thresholds.NO_PASSAGE`), how much
        "yes" the question draws on its own. It depends on the question alone: asked once per question (trace
        step ``check_prior``), a later round's check reuses it. None when the call failed."""
        done = next((s for s in tracer.steps if s.step == "check_prior" and s.ok and s.probs), None)
        if done is not None:
            return float(done.probs.get("yes", 0.0))
        pred, step = self._critic(tracer, "check_prior", self.check_answer, "stated",
                                  question=question, passages=NO_PASSAGE)
        soft = soft_of(pred, "stated", field_labels(self.check_answer, "stated"))
        record_soft(step, soft)
        return None if soft is None else soft.p("yes")

    def _judge_usefulness(self, tracer: Tracer, question: str, cand: Candidate) -> Candidate:
        use, step = self._critic(tracer, "judge_usefulness", self.judge_usefulness, "usefulness",
                                 question=question, answer=cand.answer)
        soft = soft_of(use, "usefulness", field_labels(self.judge_usefulness, "usefulness"))
        record_soft(step, soft)
        if soft is not None:
            cand.usefulness = int(soft.label)
            cand.e_use = sum(int(k) * v for k, v in soft.probs.items()) / (sum(soft.probs.values()) or 1.0)
        return cand

    def _candidates(self, tracer: Tracer, question: str, groups: list[list[tuple[Passage, float]]], origin: str,
                    budget: TokenBudget, tried: set, config: dict | None = None,
                    verified: float | None = None) -> list[Candidate]:
        """Draft and critique one candidate per context in ``groups`` (extra candidates only while the
        token budget allows); each context drafted from is added to ``tried``. ``verified``: the answer
        check's P(stated) on ``groups[0]`` when it is above the ``verified`` threshold — that draft skips
        the support judge (its confidence is P(stated))."""
        cfg = self.config
        if len(groups) > 1 and not budget.allows("extra_candidates", STEP_ESTIMATES["extra_candidates"]
                                                 * (len(groups) - 1)):
            groups = groups[:1]
        rate = cfg.judge_usefulness == "always" or len(groups) > 1
        if rate and len(groups) == 1 and not budget.allows("usefulness_single", STEP_ESTIMATES["usefulness_single"]):
            rate = False

        def one(group: list[tuple[Passage, float]]) -> Candidate | None:
            passages = [p for p, _ in group]
            tried.add(context_key(group))
            cand = self._draft(tracer, question, passages, origin, config)
            if cand is None:
                return None
            cand.p_rel = sum(s for _, s in group) / len(group)
            if verified is not None and group is groups[0]:
                cand.verified = verified
                tracer.note("support_verified", "skipped", p_stated=verified, threshold=self.thresholds.verified)
            else:
                cand = self._judge_support(tracer, question, cand)
            return self._judge_usefulness(tracer, question, cand) if rate else cand

        out = [c for c in self._map(one, groups) if c is not None]
        _charge(budget, tracer)
        return out

    def _continue(self, tracer: Tracer, question: str, relevant: list[tuple[Passage, float]],
                  candidates: list[Candidate], best: Candidate | None,
                  budget: TokenBudget) -> tuple[list[tuple[Passage, float]], Candidate | None]:
        """Self-RAG's ``continue`` (see the module doc): the relevant passages and the best candidate
        afterwards; a re-drafted candidate is added to ``candidates`` (origin ``continued``)."""
        cfg = self.config
        confidence = best.confidence() if best is not None else None
        if best is None or confidence is None or confidence >= self.thresholds.answer:
            return relevant, best
        if not budget.allows("continuation", CONTINUATION_ESTIMATE):
            return relevant, best
        pred, step = self._critic(tracer, "continue_decision", self.decide_retrieval, "decision",
                                  question=question, answer_so_far=best.answer)
        soft = soft_of(pred, "decision", field_labels(self.decide_retrieval, "decision"))
        record_soft(step, soft)
        p_continue = None if soft is None else soft.p("continue")
        route = route_continue(p_continue)
        tracer.note("route", route, p_continue=p_continue, confidence=confidence)
        if route != "continue":
            return relevant, best
        scores = {p.id: s for p, s in relevant}

        def admit(new: list[Passage]) -> list[Passage]:  # a round merges only its new relevant passages
            kept = self._relevant(tracer, question, new)
            scores.update((p.id, s) for p, s in kept)
            return [p for p, _ in kept]

        def may_requery() -> bool:  # every round after the first allowed above asks the budget again
            _charge(budget, tracer)
            return budget.allows("continuation", REQUERY_ESTIMATE)

        outcome = iterate_retrieval(self, tracer, question, [p for p, _ in relevant], best,
                                    next_query=self.next_query, max_iterations=cfg.max_iterations,
                                    k=cfg.grade_pool or cfg.k, confident=CONFIDENT[cfg.iteration_confident],
                                    admit=admit, may_requery=may_requery)
        _charge(budget, tracer)
        relevant = [(p, scores[p.id]) for p in outcome.passages]
        draft = outcome.draft
        if draft is None or draft is best:
            return relevant, best
        draft.origin = "continued"
        draft.p_rel = sum(scores.get(p.id, 0.0) for p in draft.passages) / max(1, len(draft.passages))
        candidates.append(draft)
        return relevant, self._choose(tracer, candidates) or best

    def _first(self, relevant: list[tuple[Passage, float]]) -> list[list[tuple[Passage, float]]]:
        return first_contexts(relevant, self.config.max_candidates, self.config.draft_passages)

    def _choose(self, tracer: Tracer, candidates: list[Candidate]) -> Candidate | None:
        """The best candidate by (soft) weighted score, recorded with every candidate's score and confidence."""
        cfg = self.config
        best = pick_best(candidates, cfg.w_rel, cfg.w_sup, cfg.w_use)
        tracer.note("select_candidate", {
            "scores": [round(c.score(cfg.w_rel, cfg.w_sup, cfg.w_use), 3) for c in candidates],
            "confidence": [None if c.confidence() is None else round(c.confidence(), 3) for c in candidates],
            "best": candidates.index(best) if best else None})
        return best

    # ------------------------------------------------------------------ forward
    def forward(self, question: str) -> dspy.Prediction:
        question = self._question(question)
        cfg, th = self.config, self.thresholds
        tracer = Tracer()
        start = time.perf_counter()
        reserve = reserved_steps(STEP_ESTIMATES, max_regenerations=cfg.max_regenerations,
                                 web_rounds=cfg.max_web_rounds if self.web_search is not None else 0)
        tokens = TokenBudget(cfg.token_budget, reserve=reserve)

        if self._decide(tracer, question) == "direct":
            return self._direct(tracer, question, start)

        # Retrieve, grade; rewrite, web, abstain — every loop bounded by the settings.
        web = WebBudget(cfg.max_web_rounds)
        has_web = self.web_search is not None
        failed_queries: list[str] = []
        query, rewrites, used_web, retrieval_failed = question, 0, False, False
        ever_not_stated = False  # a round found relevant passages that do not state the answer
        while True:
            dissimilar = False
            if used_web:
                passages = self._web(tracer, web, query)
            else:
                passages = self._retrieve(tracer, query, cfg.grade_pool or cfg.k)
                retrieval_failed = retrieval_failed or not tracer.steps[-1].ok
                dissimilar = self._too_dissimilar(tracer, passages)
            relevant = [] if dissimilar else self._relevant(tracer, question, passages)
            p_stated, p_prior = (self._p_stated(tracer, question, relevant) if relevant and cfg.answer_check
                                 else (None, None))
            value = check_value(p_stated, p_prior, th.check_prior)
            score = None if value is None else stated_score(value, top_similarity(passages), self.stated_weight)
            not_stated = score is not None and score < th.stated
            ever_not_stated = ever_not_stated or not_stated
            _charge(tokens, tracer)
            nxt = route_after_grading(len(relevant), rewrites, cfg.max_rewrites, web.rounds_used,
                                      cfg.max_web_rounds, has_web, not_stated=not_stated, on_web=used_web)
            if nxt == "web" and not tokens.allows("web", STEP_ESTIMATES["web"]):
                nxt = "abstain"
            tracer.note("route", nxt, relevant=len(relevant), graded=len(passages), threshold=th.relevance,
                        **({"p_stated": p_stated, "stated_score": round(score, 4), "stated_threshold": th.stated,
                            **({"p_prior": p_prior} if th.check_prior else {})}
                           if score is not None else {}))
            if nxt == "generate":
                break
            failed_queries.append(query)
            if nxt == "abstain":
                return self._finish(tracer, question, start, None, used_web=used_web,
                                    reason="answer_not_stated" if ever_not_stated else
                                    "low_similarity" if dissimilar else
                                    nothing_found_reason(tracer.steps, retrieval_failed))
            if nxt == "rewrite":
                rewrites += 1
                pred, _ = self._generator(tracer, "rewrite_query", self.rewrite_query, "query",
                                          question=question, failed_queries=failed_queries)
                new_query = str(pred.query).strip() if pred is not None and pred.query else ""
                query = new_query or question
            else:  # web: the next round searches the web for the question itself
                used_web = True
                query = question

        tried: set = set()  # the contexts drafted from: a regeneration never repeats one
        verified = p_stated if skips_support(p_stated, th) else None
        candidates = self._candidates(tracer, question, self._first(relevant), "web" if used_web else "kb",
                                      tokens, tried, verified=verified)
        best = self._choose(tracer, candidates)
        if cfg.continue_retrieval and not used_web:
            relevant, best = self._continue(tracer, question, relevant, candidates, best, tokens)
        regenerations = 0
        while True:
            confidence = best.confidence() if best is not None else None
            answerable = confidence is not None and confidence >= th.answer
            max_regen, web_ok = cfg.max_regenerations, has_web
            while True:  # the route, with optional steps the token budget refuses taken out (at most twice)
                nxt = route_after_answer_check(answerable, regenerations, max_regen, web.rounds_used,
                                               cfg.max_web_rounds, web_ok)
                if nxt == "regenerate" and not tokens.allows("regeneration", STEP_ESTIMATES["regeneration"]):
                    max_regen = regenerations
                elif nxt == "web" and not tokens.allows("web", STEP_ESTIMATES["web"]):
                    web_ok = False
                else:
                    break
            tracer.note("route", nxt, support=best.support if best else None, confidence=confidence,
                        threshold=th.answer)
            if nxt in ("accept", "abstain"):
                break
            if nxt == "regenerate":
                regenerations += 1
                # A context not drafted from yet (the next most relevant passage alone); when none is
                # left, a fresh sample of the first context (the same prompt at temperature 0 repeats).
                group = regeneration_context(relevant, tried)
                config = None if group is not None else {"rollout_id": regenerations, "temperature": 0.7}
                tracer.note("regenerate", "new_context" if group is not None else "resample",
                            passages=[p.id for p, _ in group] if group else None)
                new = self._candidates(tracer, question, [group] if group else self._first(relevant)[:1],
                                       "regenerated", tokens, tried, config=config)
            else:  # web
                used_web = True
                web_relevant = self._relevant(tracer, question, self._web(tracer, web, question))
                relevant = web_relevant or relevant
                new = self._candidates(tracer, question, self._first(web_relevant), "web", tokens,
                                       tried) if web_relevant else []
            candidates.extend(new)
            best = self._choose(tracer, candidates) or best

        if tokens.dropped:
            tracer.note("token_budget", tokens.summary())
        if nxt == "abstain":
            # A candidate the answer check verified (no support judge ran) is low in confidence, not
            # judged unsupported: its confidence is P(stated).
            reason: AbstainReason = "no_answer_in_passages" if best is None else (
                "low_confidence" if best.support in ("fully", "partially") or (
                    not best.support_judged and best.verified is not None) else "unsupported")
            if best is None and self._deciding_calls_failed(tracer):
                reason = "lm_error"
            return self._finish(tracer, question, start, None, used_web=used_web, reason=reason, withheld=best)
        return self._finish(tracer, question, start, best,
                            used_web=best is not None and (best.origin == "web" or any(
                                p.metadata.get("url") for p in best.passages)))

    @staticmethod
    def _deciding_calls_failed(tracer: Tracer) -> bool:
        """Whether the LM calls that decide the answer (drafts and their support judgements) all failed."""
        deciding = [s for s in tracer.steps if s.step in ("generate_answer", "judge_support")]
        return bool(deciding) and not any(s.ok for s in deciding)

    def _direct(self, tracer: Tracer, question: str, start: float) -> dspy.Prediction:
        """No retrieval: answer from the LM alone, then rate usefulness (no support to judge)."""
        pred, _ = self._generator(tracer, "answer_directly", self._bounded(self.answer_directly, question),
                                  "answer", question=question)
        if pred is None or not str(pred.answer or "").strip():
            return self._finish(tracer, question, start, None, retrieved=False,
                                reason="lm_error" if pred is None else "direct_unanswerable")
        cand = Candidate(answer=str(pred.answer).strip(), passages=[], relevant=False, origin="direct")
        return self._finish(tracer, question, start, self._judge_usefulness(tracer, question, cand), retrieved=False)
