"""The retrieval strategies of a program, as one ``dspy.Module`` of named predictors.

Per question, :meth:`RetrievalPipeline.plan` decides *where* and *what* to search once — collection
routing (``RouteCollections``, over a :class:`~programs.collection_routing.CollectionsRetriever`) and
self-query (``ExtractFilters`` → the validated :mod:`programs.filter_grammar` → a Chroma ``where``).
Per query, :meth:`RetrievalPipeline.retrieve` expands it (:class:`~programs.query_transforms.QueryTransforms`),
searches each expansion, fuses the rankings with the original query's by RRF (``fusion_k``, 60),
reranks the fused pool (``program.rerank``) and returns the top ``k``.

Rerank ``judge`` orders the pool by P(relevant): from an injected scorer, or — when the LM gives token
log-probabilities (``logprobs=True``, wired from ``lm.logprobs``) — from the pipeline's own relevance
judgement, ``rerank_judge`` (the batched grading signature, one call for the whole pool, soft labels
read per verdict); a failed or unusable judgement keeps the fused order, recorded.

The module holds parameters only: the retriever, LMs, adapter and scorer come in a
:class:`RetrievalContext` per call, so a program owning the pipeline (``StrategyRetrieval``) deep-copies
its predictors and shares its components. Predictors exist only for the configured strategies, so a
program without strategies has exactly its own predictors (and its compiled artifacts stay valid).

:class:`TransformingRetriever` wraps the same pipeline as a plain ``Retriever`` for use outside a
program (``search``, benchmarks); its steps land in ``last_trace``, and nothing in it is compiled.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import dspy

from programs.base import BATCH_TOKENS_BASE, BATCH_TOKENS_PER_PASSAGE, lm_scope
from programs.batch_grading import parse_batch_verdicts
from programs.collection_routing import parse_route
from programs.filter_grammar import FieldSpec, and_where, describe, parse_clauses, to_where
from programs.fusion import weighted_rrf
from programs.judging import soft_verdicts
from programs.passages import format_passages, passage_ref
from programs.query_transforms import Expansion, QueryTransforms
from programs.rerank import RelevanceScorer, order_by_scores, parse_ranking, rerank_method
from programs.retriever_calls import accepts, call_retriever
from programs.settings import ProgramSettings
from programs.soft_labels import label_values
from programs.tracing import Tracer
from programs.types import Passage, Retriever
from signatures import ExtractFilters, GradeRelevanceBatch, PassageVerdict, RerankPassages, RouteCollections

RERANK_PASSAGE_CHARS = 400
RELEVANCE_LABELS = label_values(PassageVerdict.model_fields["relevance"].annotation)


@dataclass
class RetrievalContext:
    """What one call of the pipeline works with (components, never stored on the module)."""

    tracer: Tracer
    retriever: Retriever
    lm: dspy.BaseLM | None = None  # transforms, routing, self-query
    critic_lm: dspy.BaseLM | None = None  # listwise rerank
    adapter: dspy.Adapter | None = None
    num_threads: int = 1
    scorer: RelevanceScorer | None = None
    schema: Mapping[str, FieldSpec] | None = None  # filterable metadata keys; else the retriever's schema()
    filters: dict[str, Any] | None = None  # the caller's own where, and-ed with self-query's


@dataclass
class RetrievalPlan:
    """Decided once per question (per sub-question for decompose-serial): the question, the collections to
    search (None = not routed) and the where."""

    question: str
    collections: list[str] | None = None
    where: dict[str, Any] | None = None
    caller_where: dict[str, Any] | None = None  # kept when self-query's filters are relaxed
    web: Any = None  # routed to no collection with a web search: the question's WebBudget (StrategyRetrieval)


class RetrievalPipeline(dspy.Module):
    """Routing, self-query, query transforms, fusion and rerank for one program (see the module doc)."""

    def __init__(self, config: ProgramSettings | None = None, *, has_scorer: bool = False, logprobs: bool = False):
        """``has_scorer``: a relevance scorer is injected (per call, ``RetrievalContext.scorer``);
        ``logprobs``: the LM gives token log-probabilities, so rerank ``judge`` / ``auto`` scores with
        the pipeline's own relevance judgement when no scorer is injected."""
        super().__init__()
        cfg = config or ProgramSettings()
        self.transforms = (QueryTransforms(cfg.transforms, cfg.max_paraphrases, cfg.max_subquestions)
                           if cfg.transforms else None)
        self.route = dspy.Predict(RouteCollections) if cfg.route_collections else None
        self.extract_filters = dspy.Predict(ExtractFilters) if cfg.self_query else None
        self.rerank_method = rerank_method(cfg.rerank, has_scorer or logprobs)
        self.rerank = (dspy.Predict(RerankPassages.with_updated_fields("ranking", max_length=cfg.rerank_pool))
                       if self.rerank_method == "listwise" else None)  # at most one number per candidate
        own_judge = self.rerank_method == "judge" and not has_scorer
        self.rerank_judge = dspy.Predict(GradeRelevanceBatch) if own_judge else None
        self.fusion_k = cfg.fusion_k
        self.max_routes = cfg.max_routes
        self.rerank_pool = cfg.rerank_pool

    @property
    def active(self) -> bool:
        """Whether any strategy is configured (else retrieval is the retriever's own ranking)."""
        return bool(self.transforms or self.route or self.extract_filters or self.rerank_method != "none")

    # ------------------------------------------------------------------ once per question
    def plan(self, ctx: RetrievalContext, question: str) -> RetrievalPlan:
        plan = RetrievalPlan(question=question, where=ctx.filters, caller_where=ctx.filters)
        if self.route is not None:
            plan.collections = self._route(ctx, question)
        if self.extract_filters is not None and plan.collections != []:
            plan.where = and_where(ctx.filters, self._self_query(ctx, question, plan.collections))
        return plan

    def _route(self, ctx: RetrievalContext, question: str) -> list[str] | None:
        if not accepts(ctx.retriever, "collections") or not hasattr(ctx.retriever, "names"):
            raise TypeError("program.route_collections needs a retriever over collections (CollectionsRetriever)")
        with lm_scope(ctx.lm, ctx.adapter):
            pred, _ = ctx.tracer.call("route_collections", self.route, "chosen", question=question,
                                      collections=ctx.retriever.describe())
        if pred is None:
            ctx.tracer.note("collections", None, fallback="routing failed: all collections")
            return None
        kept, unknown = parse_route(pred.chosen, ctx.retriever.names, self.max_routes)
        if not kept and unknown:  # it named collections, none of them known: unusable, like a failed call
            ctx.tracer.note("collections", None, unknown=unknown, fallback="no known collection named: all collections")
            return None
        ctx.tracer.note("collections", kept, unknown=unknown)
        return kept

    def _self_query(self, ctx: RetrievalContext, question: str, collections: list[str] | None) -> dict | None:
        schema = ctx.schema
        if schema is None and hasattr(ctx.retriever, "schema"):
            schema = ctx.retriever.schema(collections)
        if not schema:
            ctx.tracer.note("filters", None, skipped="the collection has no filterable metadata")
            return None
        with lm_scope(ctx.lm, ctx.adapter):
            pred, _ = ctx.tracer.call("extract_filters", self.extract_filters, "filters", question=question,
                                      metadata_fields=describe(schema))
        clauses, dropped = parse_clauses(pred.filters if pred is not None else [], schema)
        where = to_where(clauses)
        step = ctx.tracer.note("filters", where, dropped=len(dropped))
        step.inputs.update({f"dropped_{n}": f"{d.condition}: {d.reason}"[:200] for n, d in enumerate(dropped, 1)})
        return where

    # ------------------------------------------------------------------ per query
    def retrieve(self, ctx: RetrievalContext, query: str, k: int, plan: RetrievalPlan) -> list[Passage]:
        """The top ``k`` for ``query`` under ``plan``; store failures are failed steps, never raised."""
        if plan.collections == []:
            ctx.tracer.note("retrieve", [], query=query, skipped="routed to no collection")
            return []
        expansion = (self.transforms.expand(ctx.tracer, query, ctx.lm, ctx.adapter, ctx.num_threads)
                     if self.transforms is not None else Expansion(queries=[("original", query)]))
        depth = max(k, self.rerank_pool) if self.rerank_method != "none" else k
        fused = self._search_all(ctx, expansion, depth, plan, plan.where)
        if not fused and plan.where is not None and plan.where != plan.caller_where:
            ctx.tracer.note("filters_relaxed", None, reason="no passage matched the extracted filters")
            fused = self._search_all(ctx, expansion, depth, plan, plan.caller_where)
        fused = self._rerank(ctx, plan.question, fused)[:k]
        ctx.tracer.note("fuse", [p.id for p in fused], query=query, searches=len(expansion.queries))
        return fused

    def _search_all(self, ctx: RetrievalContext, expansion: Expansion, depth: int, plan: RetrievalPlan,
                    where: dict[str, Any] | None) -> list[Passage]:
        rankings = [self._search(ctx, label, text, depth, plan.collections, where,
                                 expansion.dense_query if label == "original" else None)
                    for label, text in expansion.queries]
        return rankings[0] if len(rankings) == 1 else weighted_rrf(rankings, k=self.fusion_k, limit=depth)

    @staticmethod
    def _search(ctx: RetrievalContext, label: str, text: str, depth: int, collections: list[str] | None,
                where: dict[str, Any] | None, dense_query: str | None) -> list[Passage]:
        inputs: dict[str, Any] = {"query": text, "transform": label}
        if where is not None:
            inputs["filters"] = where
        if collections is not None:
            inputs["collections"] = collections
        if dense_query is not None:
            inputs["hyde"] = "split" if accepts(ctx.retriever, "dense_query") else "fused"
        start = time.perf_counter()
        try:
            passages = call_retriever(ctx.retriever, text, depth, where, dense_query=dense_query,
                                      collections=collections)
        except Exception as exc:  # noqa: BLE001 - a store failure is recorded; the other searches go on
            step = ctx.tracer.note("retrieve", None, **inputs)
            step.ok, step.error = False, f"{type(exc).__name__}: {exc}"
            return []
        step = ctx.tracer.note("retrieve", [p.id for p in passages], **inputs)
        step.seconds = round(time.perf_counter() - start, 4)
        return passages

    def _rerank(self, ctx: RetrievalContext, question: str, passages: list[Passage]) -> list[Passage]:
        if self.rerank_method == "none" or len(passages) < 2:
            return passages
        if self.rerank_method == "judge":
            try:
                if ctx.scorer is None and self.rerank_judge is not None:
                    scores = self._judge_scores(ctx, question, passages)
                    if scores is None:
                        ctx.tracer.note("rerank", None, method="judge", fallback="fused order")
                        return passages
                else:
                    scores = list(ctx.scorer(question, passages))  # type: ignore[misc]
                ranked = order_by_scores(passages, scores)
            except Exception as exc:  # noqa: BLE001 - a scorer failure keeps the fused order, recorded
                step = ctx.tracer.note("rerank", None, method="judge")
                step.ok, step.error = False, f"{type(exc).__name__}: {exc}"
                return passages
            ctx.tracer.note("rerank", [p.id for p in ranked], method="judge",
                            scores=[None if s is None else round(s, 3) for s in scores])
            return ranked
        with lm_scope(ctx.critic_lm or ctx.lm, ctx.adapter):
            pred, step = ctx.tracer.call("rerank", self.rerank, "ranking", question=question,
                                         passages=format_passages(passages, RERANK_PASSAGE_CHARS))
        if pred is None:
            return passages
        order, used = parse_ranking(pred.ranking, len(passages))
        step.inputs["usable_numbers"] = str(used)
        return [passages[i] for i in order]

    def _judge_scores(self, ctx: RetrievalContext, question: str, passages: list[Passage]) -> list[float | None] | None:
        """P(relevant) of each pooled passage from one ``rerank_judge`` call (the critic LM), recorded as
        the ``rerank_judge`` step (calls, tokens, labels, ``p_relevant``); None when the call failed or
        no verdict was usable. Its steps are not ``grade_relevance`` steps: evaluation does not count them."""
        cap = {"max_tokens": BATCH_TOKENS_BASE + BATCH_TOKENS_PER_PASSAGE * len(passages)}
        with lm_scope(ctx.critic_lm or ctx.lm, ctx.adapter):
            pred, step = ctx.tracer.call("rerank_judge", self.rerank_judge, "verdicts", config=cap,
                                         question=question,
                                         passages=format_passages(passages, RERANK_PASSAGE_CHARS, query=question))
        parsed = parse_batch_verdicts(getattr(pred, "verdicts", None) if pred is not None else None, len(passages))
        softs = soft_verdicts(pred, "relevance", RELEVANCE_LABELS, parsed)
        scores = [None if s is None else s.p("relevant") for s in softs]
        step.output = parsed.labels
        step.inputs["passage_ids"] = ", ".join(passage_ref(p) for p in passages)[:200]
        step.inputs["p_relevant"] = ", ".join("-" if s is None else f"{s:.3f}" for s in scores)
        if parsed.malformed and pred is not None:
            step.inputs["problems"] = "; ".join(parsed.problems)[:200]
        judged = [s for s in softs if s is not None]
        step.soft = all(s.soft for s in judged) if judged else None
        return scores if judged else None


class TransformingRetriever:
    """A :class:`~programs.types.Retriever` that runs a :class:`RetrievalPipeline` over ``base``.

    For retrieval outside a program (``search``, benchmarks). Programs own their pipeline instead
    (``StrategyRetrieval``), so its predictors are compiled and its steps land in their trace; here
    each call's steps are in :attr:`last_trace` (the latest call's, one caller at a time).
    """

    def __init__(self, base: Retriever, config: ProgramSettings | None = None, *, lm: dspy.BaseLM | None = None,
                 critic_lm: dspy.BaseLM | None = None, adapter: dspy.Adapter | None = None,
                 relevance_scorer: RelevanceScorer | None = None, logprobs: bool = False,
                 metadata_schema: Mapping[str, FieldSpec] | None = None, pipeline: RetrievalPipeline | None = None):
        if not isinstance(base, Retriever):
            raise TypeError(f"base must implement retrieve(query, k, filters); got {type(base).__name__}")
        self.base = base
        self.config = config or ProgramSettings()
        self.pipeline = pipeline or RetrievalPipeline(self.config, has_scorer=relevance_scorer is not None,
                                                      logprobs=logprobs)
        self.lm, self.critic_lm, self.adapter = lm, critic_lm, adapter
        self.relevance_scorer = relevance_scorer
        self.metadata_schema = metadata_schema
        self.last_trace: Tracer | None = None

    def retrieve(self, query: str, k: int = 5, filters: dict[str, Any] | None = None) -> list[Passage]:
        tracer = Tracer()
        ctx = RetrievalContext(tracer, self.base, self.lm, self.critic_lm, self.adapter, self.config.num_threads,
                               self.relevance_scorer, self.metadata_schema, filters)
        try:
            return self.pipeline.retrieve(ctx, query, k, self.pipeline.plan(ctx, query))
        finally:
            self.last_trace = tracer
