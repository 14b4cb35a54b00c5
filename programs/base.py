"""Plumbing shared by the programs: LM/adapter scoping, ordered parallel map, quoting retrieved text.

Kept as plain functions so SelfRAG and CorrectiveRAG can use the same code (SelfRAG still has its
own private copies of the first two, ``SelfRAG._scope`` and ``SelfRAG._map``).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import dspy

from programs.tracing import Tracer
from programs.settings import ProgramSettings
from programs.types import Passage, Retriever, WebSearch

T = TypeVar("T")
R = TypeVar("R")


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


_DELIMITERS = str.maketrans({"«": "‹", "»": "›"})


def quote_safe(text: str) -> str:
    """Neutralise what could let quoted text break out of its field: the «» passage delimiters become
    ‹›, and DSPy's field headers ``[[ ## name ## ]]`` lose their double bracket."""
    return text.translate(_DELIMITERS).replace("[[", "[ [").replace("]]", "] ]")


def quoted_passage(p: Passage) -> Passage:
    """A copy of ``p`` whose text and title are :func:`quote_safe` (for prompts only; cite the original)."""
    meta = dict(p.metadata)
    if meta.get("title"):
        meta["title"] = quote_safe(str(meta["title"]))
    return p.model_copy(update={"text": quote_safe(p.text), "metadata": meta})


class RAGModule(dspy.Module):
    """What every program here shares: its components as constructor arguments (validated), and
    judgement calls scoped to the critic or generator LM and recorded by a :class:`Tracer`.

    Subclasses add their named predictors after ``super().__init__(...)``.
    """

    requires_retriever = True

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

    def _critic(self, tracer: Tracer, step: str, predictor, field: str, **inputs):
        with lm_scope(self.critic_lm, self.adapter):
            return tracer.call(step, predictor, field, **inputs)

    def _generator(self, tracer: Tracer, step: str, predictor, field: str, config=None, **inputs):
        with lm_scope(self.generator_lm, self.adapter):
            return tracer.call(step, predictor, field, config=config, **inputs)
