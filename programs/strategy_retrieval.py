"""``StrategyRetrieval``: a mixin that gives a :class:`~programs.base.RAGModule` the configured retrieval strategies.

Why a mixin and not a retriever wrapper: the strategies' LM steps (paraphrase, decompose, step-back,
HyDE, routing, self-query, listwise rerank) must be *parameters of the program* so an optimizer
compiles them, and a program's components are shared between its copies, not copied — a wrapper
component holding predictors would be the same object in the student and the teacher. So the
program owns a child :class:`~programs.retrieval_pipeline.RetrievalPipeline` (``self.retrieval``;
predictors named e.g. ``retrieval.transforms.paraphrase``), deep-copied with it, while the
retriever, LMs and the relevance scorer stay shared components passed per call. ``_retrieve`` — the
one retrieval step every program calls — goes through the pipeline, recording its steps in the
program's trace; with no strategy configured it is the base ``_retrieve`` unchanged and the program
has no extra predictor.

Use: ``class MyRAG(StrategyRetrieval, RAGModule)`` (the mixin first). Extra constructor keywords:
``relevance_scorer`` (for ``rerank = judge``/``auto``), ``logprobs`` (the LM gives token
log-probabilities: without a scorer, ``judge``/``auto`` rerank by the program's own relevance
judgement, the ``retrieval.rerank_judge`` predictor; wired from ``lm.logprobs``) and ``metadata_schema`` (the collection's
filterable keys for ``self_query``; a :class:`~programs.collection_routing.CollectionsRetriever`
supplies its own). Routing and self-query run once per question (the plan is kept per trace; a program
asking the store several questions plans each: decompose-serial's sub-questions, :meth:`plan_anew`), the
transforms on every query the program retrieves for. A question routed to no collection is searched on
the web when the program has a web search (at most ``max_web_rounds`` rounds), else retrieves nothing.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from typing import Any, ClassVar

import dspy

from programs.base import RAGModule
from programs.filter_grammar import FieldSpec
from programs.rerank import RelevanceScorer
from programs.retrieval_pipeline import RetrievalContext, RetrievalPipeline, RetrievalPlan
from programs.retriever_calls import accepts
from programs.tracing import Tracer
from programs.types import Passage
from programs.web_budget import WebBudget

# (the question's tracer, its plan): one plan per question, per thread/context.
_PLAN: contextvars.ContextVar[tuple[Tracer, RetrievalPlan] | None] = contextvars.ContextVar(
    "retrieval_plan", default=None)


class StrategyRetrieval:
    """Mixin for a ``RAGModule`` subclass: retrieval through the strategies in its settings."""

    COMPONENTS: ClassVar[tuple[str, ...]] = RAGModule.COMPONENTS + ("relevance_scorer",)

    def __init__(self, *args: Any, relevance_scorer: RelevanceScorer | None = None, logprobs: bool = False,
                 metadata_schema: Mapping[str, FieldSpec] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        cfg = self.config  # type: ignore[attr-defined]
        retriever = self.retriever  # type: ignore[attr-defined]
        if cfg.route_collections and not (accepts(retriever, "collections") and hasattr(retriever, "names")):
            raise TypeError("program.route_collections needs a retriever over collections (CollectionsRetriever); "
                            f"got {type(retriever).__name__}")
        if cfg.self_query and not metadata_schema and not hasattr(retriever, "schema"):
            raise ValueError("program.self_query needs the collection's metadata fields: pass metadata_schema")
        if relevance_scorer is not None and not callable(relevance_scorer):
            raise TypeError("relevance_scorer must be callable(question, passages) -> scores")
        self.relevance_scorer = relevance_scorer
        self.metadata_schema = dict(metadata_schema) if metadata_schema else None
        self.retrieval = RetrievalPipeline(cfg, has_scorer=relevance_scorer is not None, logprobs=logprobs)

    def _retrieval_context(self, tracer: Tracer) -> RetrievalContext:
        return RetrievalContext(tracer, self.retriever, self.generator_lm, self.critic_lm,  # type: ignore[attr-defined]
                                self.adapter, self.config.num_threads,  # type: ignore[attr-defined]
                                self.relevance_scorer, self.metadata_schema)

    def retrieval_plan(self, tracer: Tracer, question: str) -> RetrievalPlan:
        """The question's plan (routing, filters), made on its first retrieval and kept for its trace."""
        held = _PLAN.get()
        if held is not None and held[0] is tracer:
            return held[1]
        plan = self.retrieval.plan(self._retrieval_context(tracer), question)
        _PLAN.set((tracer, plan))
        return plan

    def plan_anew(self, tracer: Tracer, question: str) -> None:
        """Plan the next retrievals for ``question``: a program that asks the store several questions
        (decompose-serial's sub-questions) routes and filters each on its own words, not the first one's.
        A routed-to-web budget carries over, so ``max_web_rounds`` still bounds the whole question."""
        if not self.retrieval.active:
            return
        held = _PLAN.get()
        plan = self.retrieval.plan(self._retrieval_context(tracer), question)
        plan.web = held[1].web if held is not None and held[0] is tracer else None
        _PLAN.set((tracer, plan))

    def _retrieve(self, tracer: Tracer, query: str, k: int) -> list[Passage]:
        if not self.retrieval.active:
            return super()._retrieve(tracer, query, k)  # type: ignore[misc]
        plan = self.retrieval_plan(tracer, query)
        if plan.collections == [] and self.web_search is not None:  # type: ignore[attr-defined]
            if plan.web is None:  # routed to no collection: the web answers, within max_web_rounds
                plan.web = WebBudget(self.config.max_web_rounds)  # type: ignore[attr-defined]
            return self._web(tracer, plan.web, query)  # type: ignore[attr-defined]
        return self.retrieval.retrieve(self._retrieval_context(tracer), query, k, plan)

    def _finish(self, tracer: Tracer, *args: Any, used_web: bool = False, **kwargs: Any) -> dspy.Prediction:
        held = _PLAN.get()
        routed_to_web = held is not None and held[0] is tracer and held[1].web is not None
        finish = super()._finish  # type: ignore[misc]
        return finish(tracer, *args, used_web=used_web or routed_to_web, **kwargs)
