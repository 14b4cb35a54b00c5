"""Query transforms: the LM steps that turn one query into several searches.

- ``multi_query``: ``ParaphraseQuery`` writes up to ``max_paraphrases`` paraphrases;
- ``decompose``: ``DecomposeQuestion`` splits a multi-part question into up to ``max_subquestions``
  sub-questions (the parallel form: retrieve for each, fuse, answer once);
- ``step_back``: ``StepBackQuestion`` writes the more general question behind it;
- ``hyde``: ``HypotheticalPassage`` writes a passage that would answer it; it is embedded for the
  dense search of the original query while keyword search keeps the query
  (:func:`programs.retriever_calls.call_retriever`).

:class:`QueryTransforms` is a ``dspy.Module`` holding one named predictor per configured transform,
so it is compiled with the program that owns it (never a shared component). :meth:`expand` returns
the searches to run, the original query first; the caller retrieves each and fuses them (RRF).
Every LM step is a trace step; what the bounds cut is recorded in the ``query_expansion`` step.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import dspy

from programs.base import lm_scope, parallel_map
from programs.tracing import Tracer
from signatures import DecomposeQuestion, HypotheticalPassage, ParaphraseQuery, StepBackQuestion

# transform → (predictor attribute, signature, trace step, output field)
TRANSFORMS: dict[str, tuple[str, type[dspy.Signature], str, str]] = {
    "multi_query": ("paraphrase", ParaphraseQuery, "paraphrase_query", "paraphrases"),
    "decompose": ("decompose", DecomposeQuestion, "decompose_question", "sub_questions"),
    "step_back": ("step_back", StepBackQuestion, "step_back_question", "step_back_question"),
    "hyde": ("hyde", HypotheticalPassage, "hypothetical_passage", "hypothetical_passage"),
}
MAX_QUERY_CHARS = 300
MAX_HYDE_CHARS = 1200


@dataclass
class Expansion:
    """The searches for one query: ``(label, text)`` pairs, the original first, and HyDE's passage."""

    queries: list[tuple[str, str]]
    dense_query: str | None = None
    cut: dict[str, int] = field(default_factory=dict)  # transform → items dropped by the bounds


def clean_queries(items: Iterable[object] | None, original: str, limit: int,
                  seen: set[str] | None = None) -> tuple[list[str], int]:
    """Whitespace-normalised, clipped, non-empty queries different from ``original`` and from each
    other (case-insensitive), at most ``limit``; also how many given items were dropped. ``seen`` (casefolded
    queries kept so far, updated) carries over between transforms, so a query two transforms both produce is
    searched, and weighed in the fusion, once."""
    given = [items] if isinstance(items, str) else list(items or [])
    seen = set() if seen is None else seen
    seen.add(" ".join(original.split()).casefold())
    kept: list[str] = []
    for item in given:
        text = " ".join(str(item).split())[:MAX_QUERY_CHARS]
        if not text or text.casefold() in seen or len(kept) >= limit:
            continue
        seen.add(text.casefold())
        kept.append(text)
    return kept, len(given) - len(kept)


class QueryTransforms(dspy.Module):
    """The configured transforms as named predictors (``paraphrase``, ``decompose``, ``step_back``, ``hyde``)."""

    def __init__(self, transforms: Sequence[str], max_paraphrases: int = 3, max_subquestions: int = 3):
        super().__init__()
        unknown = [t for t in transforms if t not in TRANSFORMS]
        if unknown:
            raise ValueError(f"unknown query transform(s) {unknown}; choose from {', '.join(TRANSFORMS)}")
        if max_paraphrases < 1 or max_subquestions < 1:
            raise ValueError("max_paraphrases and max_subquestions must be >= 1")
        self.names = tuple(dict.fromkeys(transforms))
        self.max_paraphrases = max_paraphrases
        self.max_subquestions = max_subquestions
        limits = {"multi_query": max_paraphrases, "decompose": max_subquestions}
        for name in self.names:
            attr, signature, _, out = TRANSFORMS[name]
            if name in limits:  # the configured count bounds the list the LM writes (the adapter's schema)
                signature = signature.with_updated_fields(out, max_length=limits[name])
            setattr(self, attr, dspy.Predict(signature))

    def _inputs(self, name: str, query: str) -> dict[str, object]:
        if name == "multi_query":
            return {"question": query, "n": self.max_paraphrases}
        if name == "decompose":
            return {"question": query, "max_subquestions": self.max_subquestions}
        return {"question": query}

    def expand(self, tracer: Tracer, query: str, lm: dspy.BaseLM | None = None,
               adapter: dspy.Adapter | None = None, num_threads: int = 1) -> Expansion:
        """Run each transform once on ``query`` (in parallel when ``num_threads > 1``). A failed
        step contributes nothing; the original query is always searched."""
        def run(name: str):
            attr, _, step, out = TRANSFORMS[name]
            with lm_scope(lm, adapter):
                pred, _ = tracer.call(step, getattr(self, attr), out, **self._inputs(name, query))
            return None if pred is None else getattr(pred, out, None)

        outputs = dict(zip(self.names, parallel_map(run, self.names, num_threads)))
        expansion = Expansion(queries=[("original", query)])
        limits = {"multi_query": self.max_paraphrases, "decompose": self.max_subquestions, "step_back": 1}
        seen: set[str] = set()
        for name in self.names:
            value = outputs[name]
            if name == "hyde":
                text = " ".join(str(value or "").split())[:MAX_HYDE_CHARS]
                expansion.dense_query = text or None
                continue
            kept, cut = clean_queries(value, query, limits[name], seen)
            label = {"multi_query": "paraphrase", "decompose": "sub_question", "step_back": "step_back"}[name]
            expansion.queries += [(label, q) for q in kept]
            if cut:
                expansion.cut[name] = cut
        tracer.note("query_expansion", [text for _, text in expansion.queries], query=query,
                    hyde=expansion.dense_query is not None, cut=expansion.cut)
        return expansion
