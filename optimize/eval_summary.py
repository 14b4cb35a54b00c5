"""Per-program metrics over the lines of a results file.

Metrics per program (:func:`summarize_program`; errors are counted — ``errors``, and ``errors_by_kind``
from each row's ``error_kind``: the result's LM-failure kind, or ``exception`` — and left out of the
averages):

- ``retrieve_accuracy``: share of questions where the program retrieved (every dataset question
  needs retrieval, so "retrieve" is the correct decision).
- ``relevance_precision`` / ``relevance_recall``: over the ``grade_relevance`` steps of the traces
  (each records the judged ``passage_id``, a document id): a passage is gold when its document is in
  the example's ``gold_doc_ids``. Precision = judged-relevant that are gold / judged-relevant;
  recall = judged-relevant gold / gold passages that were graded (micro-averaged; recall of the
  grader, not of the retriever). ``None`` for a program that grades nothing.
- ``support_accuracy``: the program's support judge on labelled ``support`` examples (optional).
- ``em`` / ``f1``: on the answerable questions (an abstention scores its abstain text, i.e. ~0);
  ``semantic_f1`` (optional, :class:`~optimize.eval_runs.SemanticF1Judge`): LM-judged, answerable
  questions, abstention 0; ``e2e``: :func:`optimize.metrics.e2e_score` over all questions.
- ``abstain_unanswerable``: share of unanswerable questions the program abstained on;
  ``abstain_answerable``: share of answerable questions it (wrongly) abstained on;
  ``abstention_accuracy``: ``abstention_correct`` over all questions.
- ``citation_hit`` on the answerable questions with gold documents (``citation_questions`` of them; one
  without scores None and is left out — in an older results file, its row has no ``gold_doc_ids``).
- ``groundedness``: share of (non-abstained) answers the support judge accepted (``supported`` fully
  or partially); ``None`` for a program that never runs the judge.
- cost per question: LM calls, prompt and completion tokens, wall seconds (mean, p50, p95).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from optimize.metrics import mean

ACCEPTED_SUPPORT = ("fully", "partially")


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (numpy's default), None for no values."""
    xs = sorted(values)
    if not xs:
        return None
    pos = (len(xs) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _stats(values: Sequence[float]) -> dict[str, float | None]:
    return {"mean": mean(values) if values else None, "p50": percentile(values, 50), "p95": percentile(values, 95)}


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def _mean_present(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return mean(present) if present else None


def summarize_program(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    qa = [r for r in rows if r.get("task", "qa") == "qa"]
    ok = [r for r in qa if r.get("ok")]
    answerable = [r for r in ok if r["answerable"]]
    unanswerable = [r for r in ok if not r["answerable"]]
    answered = [r for r in ok if not r["abstained"]]
    rel = {k: sum(r["relevance"][k] for r in ok) for k in ("tp", "fp", "fn", "tn")}
    judged = any(r.get("supported") is not None for r in ok)
    support_rows = [r for r in rows if r.get("task") == "support"]
    support_ok = [r for r in support_rows if r.get("ok")]

    def avg(rs, key):
        return mean(r["scores"][key] for r in rs) if rs else None

    cite_hits = [r["scores"].get("citation_hit") if r.get("gold_doc_ids", True) else None for r in answerable]

    return {
        "questions": len(qa),
        "answerable": len(answerable),
        "unanswerable": len(unanswerable),
        "errors": len(qa) - len(ok),
        # RAGResult.error_kind of each error (unreachable, auth, timeout, …), "exception" for a raised one
        "errors_by_kind": dict(Counter(r.get("error_kind") or "other" for r in qa if not r.get("ok"))),
        "retrieve_accuracy": mean(float(r["retrieved"]) for r in ok) if ok else None,
        "relevance_precision": _ratio(rel["tp"], rel["tp"] + rel["fp"]),
        "relevance_recall": _ratio(rel["tp"], rel["tp"] + rel["fn"]),
        "relevance_counts": rel,
        "support_accuracy": mean(r["correct"] for r in support_rows) if support_rows else None,
        "support_examples": len(support_rows),
        "support_errors": len(support_rows) - len(support_ok),
        "em": avg(answerable, "em"),
        "f1": avg(answerable, "f1"),
        "semantic_f1": _mean_present(r["scores"].get("semantic_f1") for r in answerable),
        "e2e": avg(ok, "e2e"),
        "abstain_unanswerable": mean(float(r["abstained"]) for r in unanswerable) if unanswerable else None,
        "abstain_answerable": mean(float(r["abstained"]) for r in answerable) if answerable else None,
        "abstention_accuracy": avg(ok, "abstention_correct"),
        "citation_hit": _mean_present(cite_hits),
        "citation_questions": len([h for h in cite_hits if h is not None]),
        "groundedness": (mean(float(r.get("supported") in ACCEPTED_SUPPORT) for r in answered)
                         if judged and answered else None),
        "lm_calls": _stats([r["usage"]["lm_calls"] for r in ok]),
        "prompt_tokens": _stats([r["usage"]["prompt_tokens"] for r in ok]),
        "completion_tokens": _stats([r["usage"]["completion_tokens"] for r in ok]),
        "seconds": _stats([r["seconds"] for r in ok]),
    }


def summarize(rows: Sequence[dict[str, Any]], programs: Sequence[str] | None = None,
              meta: dict[str, Any] | None = None) -> dict[str, Any]:
    names = list(programs) if programs is not None else list(dict.fromkeys(r["program"] for r in rows))
    return {"meta": meta or {},
            "programs": {n: summarize_program([r for r in rows if r["program"] == n]) for n in names}}
