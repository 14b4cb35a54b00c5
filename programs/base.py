"""The one base of every program: components, scoped judgement calls, and the shared steps.

:class:`RAGModule` does the plumbing once — validating the components and the question, retrieving,
searching the web through a :class:`~programs.web_budget.WebBudget`, grading passages, drafting a
cited answer, judging its support and assembling the :class:`~programs.types.RAGResult` — so that a
program (``SelfRAG``, ``CorrectiveRAG``, the baselines) is only its flow: which steps, in which
order, routed by the plain functions of :mod:`programs.routing`.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar, TypeVar

import dspy

from programs.answer_length import bounded_answer, lm_max_tokens, min_answer_chars
from programs.batch_grading import parse_batch_verdicts
from programs.failures import deciding_failure, web_passages_used
from programs.judging import field_labels, record_soft, soft_of, soft_verdicts, text_logprob
from programs.language import abstain_answer, question_language
from programs.passages import cited_passages, citation, format_passages, passage_ref
from programs.retriever_calls import query_warning, retriever_embedder
from programs.scoring import Candidate
from programs.settings import ProgramSettings
from programs.thresholds import Thresholds, thresholds_for, top_similarity
from programs.tracing import Tracer
from programs.types import AbstainReason, Passage, RAGResult, Retriever, WebSearch
from programs.web_budget import WebBudget

T = TypeVar("T")
R = TypeVar("R")
# The language of the question the program is answering in this context (thread / task): set by
# RAGModule._question at the start of every forward, read by RAGModule.thresholds.
_QUESTION_LANGUAGE: contextvars.ContextVar[str | None] = contextvars.ContextVar("question_language", default=None)


def current_question_language() -> str | None:
    """The language of the question being answered in this context (None outside a ``forward``)."""
    return _QUESTION_LANGUAGE.get()


BATCH_TOKENS_BASE, BATCH_TOKENS_PER_PASSAGE = 16, 32  # completion-token cap of a batched grading call


def lm_scope(lm: dspy.BaseLM | None, adapter: dspy.Adapter | None):
    """A ``dspy.context`` with this LM and adapter (nothing global); a no-op when both are None."""
    kwargs: dict[str, Any] = {}
    if lm is not None:
        kwargs["lm"] = lm
    if adapter is not None:
        kwargs["adapter"] = adapter
    return dspy.context(**kwargs) if kwargs else contextlib.nullcontext()


def parallel_map(fn: Callable[[T], R], items: Iterable[T], num_threads: int) -> list[R]:
    """Run independent LM calls in parallel when ``num_threads > 1``, keeping input order; each
    worker runs in a copy of the caller's context so the scoped LM and callbacks follow it."""
    items = list(items)
    if num_threads <= 1 or len(items) <= 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(num_threads, len(items))) as pool:
        futures = [pool.submit(contextvars.copy_context().run, fn, item) for item in items]
        return [f.result() for f in futures]


class RAGModule(dspy.Module):
    """A retrieval-augmented program over injected components.

    Args:
        retriever: returns ranked :class:`~programs.types.Passage` objects for a query.
        web_search: optional web search (:class:`~programs.types.WebSearch`); None = knowledge base only.
        config: behaviour, weights and the bound of every loop (:class:`ProgramSettings`).
        generator_lm: LM for answers and query rewrites (None = the one in dspy.settings).
        critic_lm: LM for the judgements (None = generator_lm).
        adapter: DSPy adapter for all calls (None = the one in dspy.settings).

    A subclass declares its judgements in ``PREDICTORS`` (attribute name → signature; each becomes a
    named ``dspy.Predict``, what an optimizer compiles) and writes ``forward(question)``, which
    returns :meth:`_finish`'s prediction: ``answer``, ``abstained``, ``cited_doc_ids`` and ``result``.

    The components are shared, not copied, when DSPy copies the program (``deepcopy``,
    ``reset_copy``, ``load_state``'s trial run): they are not parameters, and a store client or a
    loaded model cannot be deep-copied.
    """

    PREDICTORS: ClassVar[dict[str, type[dspy.Signature]]] = {}
    COMPONENTS: ClassVar[tuple[str, ...]] = ("retriever", "web_search", "generator_lm", "critic_lm", "adapter")
    requires_retriever: ClassVar[bool] = True
    reports_score: ClassVar[bool] = True  # RAGResult.score: the weighted critique of the chosen answer

    def __init__(
        self,
        retriever: Retriever | None = None,
        web_search: WebSearch | None = None,
        config: ProgramSettings | None = None,
        generator_lm: dspy.BaseLM | None = None,
        critic_lm: dspy.BaseLM | None = None,
        adapter: dspy.Adapter | None = None,
    ):
        super().__init__()
        if (retriever is not None or self.requires_retriever) and not isinstance(retriever, Retriever):
            raise TypeError(f"retriever must implement retrieve(query, k, filters); got {type(retriever).__name__}")
        if web_search is not None and not isinstance(web_search, WebSearch):
            raise TypeError(f"web_search must implement search(query, max_results); got {type(web_search).__name__}")
        self.retriever = retriever
        self.web_search = web_search
        self.config = config or ProgramSettings()
        self.generator_lm = generator_lm
        self.critic_lm = critic_lm or generator_lm
        self.adapter = adapter
        for name, signature in self.PREDICTORS.items():
            setattr(self, name, dspy.Predict(signature))
        self.compiled_thresholds: Thresholds | None = None  # set when a compiled artifact is loaded

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """dspy.Module's call; the question's language (set by :meth:`_question`) holds for this call only, so
        thresholds read after it — or by the next question in this thread — are not the last question's."""
        token = _QUESTION_LANGUAGE.set(None)
        try:
            return super().__call__(*args, **kwargs)
        finally:
            _QUESTION_LANGUAGE.reset(token)

    @property
    def thresholds(self) -> Thresholds:
        """The decision thresholds in force: each set in the settings wins, else the compiled
        artifact's (its calibrate stage; the set for the retriever's embedder and the language of the question
        being answered: :func:`thresholds_for`), else
        :class:`Thresholds`' defaults."""
        base = thresholds_for(self.compiled_thresholds or Thresholds(), retriever_embedder(self.retriever),
                              current_question_language())
        cfg = self.config
        overrides = {name: value for name, value in (("retrieve", cfg.retrieve_threshold),
                                                     ("relevance", cfg.relevance_threshold),
                                                     ("answer", cfg.answer_threshold),
                                                     ("stated", cfg.stated_threshold),
                                                     ("verified", cfg.verified_threshold),
                                                     ("similarity", cfg.similarity_threshold),
                                                     ("stated_similarity_weight", cfg.stated_similarity_weight))
                     if value is not None}
        if cfg.similarity_threshold is not None:  # set in the settings: for whatever embedder is in use
            overrides["similarity_embedder"] = ""
        return base.model_copy(update=overrides) if overrides else base

    def __deepcopy__(self, memo: dict[int, Any]) -> RAGModule:
        """Deep-copy the predictors and settings; keep the same component objects."""
        for name in self.COMPONENTS:
            value = self.__dict__.get(name)
            if value is not None:
                memo[id(value)] = value
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        new.__setstate__(copy.deepcopy(self.__getstate__(), memo))
        return new

    # ------------------------------------------------------------------ plumbing
    def _question(self, question: str) -> str:
        """The stripped question; ValueError (before any LM call) for an empty one or one longer than
        ``config.max_question_chars`` (it would overflow the prompt of every judgement)."""
        if not isinstance(question, str) or not question.strip():
            raise ValueError("question must be a non-empty string")
        question = question.strip()
        limit = self.config.max_question_chars
        if len(question) > limit:
            raise ValueError(f"the question is {len(question)} characters long; the limit is {limit} "
                             "(program.max_question_chars)")
        _QUESTION_LANGUAGE.set(question_language(question))  # which per-language thresholds hold (this context)
        return question

    def _map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        return parallel_map(fn, items, self.config.num_threads)

    def _bounded(self, predictor: dspy.Predict, question: str, field: str = "answer",
                 passages: Iterable[Passage] = ()) -> Callable[..., Any]:
        """``predictor`` with its ``field`` bounded to what fits in the generator's ``max_tokens`` in the
        language of the question or of any passage it reads, the one with fewer characters a token (a run-on
        answer copies a passage: an English question over Chinese passages copies Chinese;
        :mod:`programs.answer_length`)."""
        languages = {question_language(question)} | {question_language(p.text) for p in passages}
        limit = min_answer_chars(lm_max_tokens(self.generator_lm), languages)
        return bounded_answer(predictor, field, limit)

    def _critic(self, tracer: Tracer, step: str, predictor, field: str, **inputs):
        with lm_scope(self.critic_lm, self.adapter):
            return tracer.call(step, predictor, field, **inputs)

    def _generator(self, tracer: Tracer, step: str, predictor, field: str, config=None, **inputs):
        with lm_scope(self.generator_lm, self.adapter):
            return tracer.call(step, predictor, field, config=config, **inputs)

    def _evidence(self, passages: list[Passage], query: str | None = None) -> str:
        """Passages as quoted, numbered evidence; with ``query``, long ones shown as their window
        around the query terms (:func:`programs.passages.passage_window`)."""
        return format_passages(passages, self.config.passage_chars, query=query)

    # ------------------------------------------------------------------ shared steps
    def _retrieve(self, tracer: Tracer, query: str, k: int) -> list[Passage]:
        """The top ``k`` passages for ``query``; a store failure is a recorded failed step and no passages."""
        start = time.perf_counter()
        try:
            passages = list(self.retriever.retrieve(query, k=k))[:k]  # type: ignore[union-attr]
        except Exception as exc:  # noqa: BLE001 - a store failure is recorded; the flow abstains or goes on
            step = tracer.note("retrieve", None, query=query)
            step.ok, step.error = False, f"{type(exc).__name__}: {exc}"
            return []
        top = top_similarity(passages)
        extra = {} if top is None else {"top_similarity": round(top, 4)}
        step = tracer.note("retrieve", [p.id for p in passages], query=query, **extra)
        step.seconds = round(time.perf_counter() - start, 4)
        warning = query_warning(self.retriever, query)
        if warning and not any(s.step == "query_warning" and s.output == warning for s in tracer.steps):
            tracer.note("query_warning", warning, query=query)
        return passages

    def _web(self, tracer: Tracer, budget: WebBudget, query: str) -> list[Passage]:
        """One web round through ``budget`` (which records refusals and failures, typed); never raises."""
        passages, step = budget.try_search(self.web_search, query, max_results=self.config.k)
        tracer.record(step)
        return passages

    def _grade(self, tracer: Tracer, question: str, passages: list[Passage]) -> list[Passage]:
        """The passages the relevance judge (``self.grade_relevance``) calls relevant, in order; each
        step records the judged ``passage_id`` (the eval harness scores it)."""
        def grade(p: Passage) -> bool:
            pred, step = self._critic(tracer, "grade_relevance", self.grade_relevance, "relevance",
                                      question=question, passage=self._evidence([p]))
            step.inputs["passage_id"] = passage_ref(p)
            return pred is not None and pred.relevance == "relevant"

        verdicts = self._map(grade, passages)
        return [p for p, ok in zip(passages, verdicts) if ok]

    def _relevance_scores(self, tracer: Tracer, question: str, passages: list[Passage]) -> list[float | None]:
        """P(relevant) of each passage (None: its judgement failed), graded in one batched call
        (``config.grading = "batched"``, ``self.grade_relevance_batch``) or one call per passage.

        A batch whose output is malformed for some passages re-grades those one by one (recorded).
        Every passage gets a ``grade_relevance`` step with its ``passage_id``, label and probabilities
        (0 LM calls when it came from the batch), so evaluation reads the verdicts the same way."""
        if not passages:
            return []
        window = self.config.grade_chars
        labels = field_labels(self.grade_relevance, "relevance")
        scores: list[float | None] = [None] * len(passages)
        todo = list(range(len(passages)))
        if self.config.grading == "batched" and len(passages) > 1:
            # A verdict is ~25 tokens; the cap stops a model that keeps adding verdicts (the output is
            # then cut, repaired by the JSON adapter's parser, and any missing passage re-graded alone).
            cap = {"max_tokens": BATCH_TOKENS_BASE + BATCH_TOKENS_PER_PASSAGE * len(passages)}
            with lm_scope(self.critic_lm, self.adapter):
                pred, batch_step = tracer.call("grade_relevance_batch", self.grade_relevance_batch, "verdicts",
                                               config=cap, question=question,
                                               passages=format_passages(passages, window, query=question))
            parsed = parse_batch_verdicts(getattr(pred, "verdicts", None) if pred is not None else None,
                                          len(passages))
            softs = soft_verdicts(pred, "relevance", labels, parsed)
            batch_step.output = parsed.labels
            if parsed.malformed:
                batch_step.inputs["problems"] = "; ".join(parsed.problems)[:200]
            for i, (p, soft) in enumerate(zip(passages, softs)):
                if soft is None:
                    continue
                step = tracer.note("grade_relevance", soft.label, passage_id=passage_ref(p), batched=True)
                record_soft(step, soft)
                scores[i] = soft.p("relevant")
            todo = parsed.missing
            if todo and pred is not None:
                tracer.note("grade_fallback", [passage_ref(passages[i]) for i in todo], reason="malformed batch")

        def grade_one(i: int) -> float | None:
            p = passages[i]
            pred, step = self._critic(tracer, "grade_relevance", self.grade_relevance, "relevance",
                                      question=question, passage=format_passages([p], window, query=question))
            step.inputs["passage_id"] = passage_ref(p)
            soft = soft_of(pred, "relevance", labels)
            record_soft(step, soft)
            return None if soft is None else soft.p("relevant")

        for i, score in zip(todo, self._map(grade_one, todo)):
            scores[i] = score
        return scores

    def _draft(self, tracer: Tracer, question: str, passages: list[Passage], origin: str = "kb",
               config: dict | None = None) -> Candidate | None:
        """One cited answer from ``passages`` (``self.generate_answer``); None when the call failed or
        the draft says the passages do not answer (recorded as ``candidate_dropped``)."""
        pred, step = self._generator(tracer, "generate_answer",
                                     self._bounded(self.generate_answer, question, passages=passages),
                                     "answer", config=config, question=question,
                                     passages=self._evidence(passages, question))
        if pred is None:
            return None
        # The drafter's own P(answerable = true), read from the same call's log-probabilities (free).
        answerable = soft_of(pred, "answerable", field_labels(self.generate_answer, "answerable"))
        record_soft(step, answerable, is_output=False)
        step.text_logprob = text_logprob(pred, "answer")
        if pred.answerable is False or not str(pred.answer or "").strip():
            tracer.note("candidate_dropped", "passages do not answer the question", answer=pred.answer)
            return None
        return Candidate(answer=str(pred.answer).strip(), passages=passages,
                         cited=cited_passages(passages, pred.citations), origin=origin,
                         p_answerable=None if answerable is None else answerable.p(True))

    def _judge_support(self, tracer: Tracer, question: str, cand: Candidate) -> Candidate:
        """The support judge (``self.judge_support``) on ``cand`` against the passages it was drafted from."""
        sup, step = self._critic(tracer, "judge_support", self.judge_support, "support",
                                 question=question, passages=self._evidence(cand.passages, question),
                                 answer=cand.answer)
        soft = soft_of(sup, "support", field_labels(self.judge_support, "support"))
        record_soft(step, soft)
        cand.support = str(soft.label) if soft is not None else None
        cand.p_sup = None if soft is None else {str(k): v for k, v in soft.probs.items()}
        cand.support_judged = True
        return cand

    def _finish(self, tracer: Tracer, question: str, start: float, best: Candidate | None, *,
                retrieved: bool = True, used_web: bool = False, reason: AbstainReason | None = None,
                withheld: Candidate | None = None) -> dspy.Prediction:
        """The prediction for ``best`` (None = abstain, recorded as an ``abstain`` step with its
        ``reason``; ``withheld`` is a candidate that was not good enough, kept in the trace).

        ``result.error`` is set when the LM calls that decided the answer failed
        (:func:`programs.failures.deciding_failure`; an abstention then has the reason ``lm_error``), and
        ``used_web`` only when a web search returned passages and the result is an answer (an abstention —
        an error above all — used no passage, whatever the web returned)."""
        failure = deciding_failure(tracer.steps)
        if failure is not None and best is not None:  # an answer its deciding judgements never checked
            best, withheld = None, best
        if best is None:
            reason = "lm_error" if failure is not None else (reason or "no_relevant_passage")
            tracer.note("abstain", {"reason": reason, "answer": abstain_answer(question)},
                        **({"withheld": withheld.answer} if withheld is not None else {}))
        cfg = self.config
        confidence = (best or withheld).confidence() if (best or withheld) is not None else None
        cited = best.cited if best is not None else []
        result = RAGResult(
            question=question,
            answer=abstain_answer(question) if best is None else best.answer,
            citations=[citation(p) for p in cited],
            retrieved=retrieved,
            abstained=best is None,
            used_web=used_web and best is not None and web_passages_used(tracer.steps),  # web passages answered
            supported=(best.support or "no") if best is not None and best.support_judged else None,
            usefulness=None if best is None else best.usefulness,
            score=round(best.score(cfg.w_rel, cfg.w_sup, cfg.w_use), 4) if best and self.reports_score else None,
            abstain_reason=None if best is not None else reason,
            confidence=None if confidence is None else round(confidence, 4),
            error=None if failure is None else failure.message(),
            error_kind=None if failure is None else failure.kind,
            trace=tracer.steps,
            usage=tracer.usage,
            seconds=round(time.perf_counter() - start, 4),
        )
        return dspy.Prediction(answer=result.answer, abstained=result.abstained,
                               cited_doc_ids=[passage_ref(p) for p in cited], result=result)
