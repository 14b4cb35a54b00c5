"""The calibrate stage of ``selfrag compile --program crag``: fit CorrectiveRAG's evaluator thresholds on
labelled passages.

CRAG's evaluator scores each retrieved passage 0–10; some passage at or above ``upper`` makes the retrieval
"correct" (the knowledge base alone), every passage below ``lower`` "incorrect" (the web alone), anything
else "ambiguous" (both). The score routed on is the expectation of the evaluator's probabilities over 0–10
or their argmax (``program.crag_score``; the fit uses the one in force). On the local model the expectation
lives in a narrow band (relevant passages ~6.5–7.3, irrelevant ~3.4–6.9), so no fixed pair such as the
paper's 7 / 4 holds for every model: the pair is fitted on the ``relevance`` split (a question with its gold
passage, or with a passage that does not answer it — another question's in the bundled sets, a hard
negative from the user's own documents in a ``selfrag data derive`` folder), one evaluator call per
passage, as CRAG asks:

* ``upper``: the lowest threshold at which at most ``max_trusted`` (default 0.1) of the irrelevant passages
  score "correct" (trusted without the web);
* ``lower``: the highest threshold at which at most ``max_dropped`` (default 0.05) of the relevant passages
  score "incorrect" (a dropped gold passage costs more than a web search); never above ``upper``.

The report (the manifest's ``calibration.stages.crag``) holds the ROC AUC of both scores, the ECE of E/10,
how the fitted thresholds and those the program started with route the passages, the curve on the score
routed on (thresholds on the 0–10 scale), a reliability PNG and the per-passage rows (so a refit needs no
LM: ``bench/bench_crag_evaluator.py --from-rows``). The fitted :class:`~programs.thresholds.CragThresholds`
go into the program's ``compiled_thresholds.crag`` (fitted for questions in any language) or, for a
``language`` other than English, ``compiled_thresholds.crag_by_language[language]`` (in force for questions
in that language only), and so into the artifact.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from optimize import metrics as M
from optimize.calibration import ece, reliability_diagram, threshold_curve
from programs.language import question_language
from programs.soft_labels import expected_value
from programs.thresholds import CragThresholds, Thresholds
from programs.types import Passage, Usage

DEFAULT_MAX_TRUSTED = 0.1
DEFAULT_MAX_DROPPED = 0.05
SCORES = ("argmax", "expected")


def scores_of(row: dict[str, Any]) -> tuple[float, float] | None:
    """(argmax, expected) score of a row's probabilities over 0–10 (a tie goes to the lower score); None when
    the call gave no probabilities."""
    probs = row.get("probs")
    if not probs:
        return None
    dist = {int(k): float(v) for k, v in probs.items()}
    return float(max(dist, key=lambda s: (dist[s], -s))), expected_value(dist)


def scored(rows: Sequence[dict[str, Any]], score: str = "expected") -> tuple[list[float], list[bool]]:
    """The rows' ``score`` ("argmax" or "expected") and relevance, leaving out the calls that failed."""
    i = SCORES.index(score)
    pairs = [(s[i], bool(r["relevant"])) for r in rows if (s := scores_of(r)) is not None]
    return [v for v, _ in pairs], [g for _, g in pairs]


def fit_crag_thresholds(rows: Sequence[dict[str, Any]], max_trusted: float = DEFAULT_MAX_TRUSTED,
                        max_dropped: float = DEFAULT_MAX_DROPPED, score: str = "expected") -> tuple[float, float]:
    """(upper, lower) on ``score`` of ``rows`` (languages pooled): the lowest upper at which at most
    ``max_trusted`` of the irrelevant passages score "correct", the highest lower at which at most
    ``max_dropped`` of the relevant ones score "incorrect", lower never above upper; read off calibrate's
    threshold curve on score / 10 (cuts half-way between neighbouring scores), rounded to 2 decimals.
    ValueError without relevant and irrelevant passages."""
    vals, gold = scored(rows, score)
    if not any(gold) or all(gold):
        raise ValueError("fitting CRAG's thresholds needs relevant and irrelevant passages with probabilities")
    return _cuts(threshold_curve([v / 10 for v in vals], gold), max_trusted, max_dropped)


def _cuts(curve: Sequence[Any], max_trusted: float, max_dropped: float) -> tuple[float, float]:
    """(upper, lower) read off a threshold curve on score / 10 (:func:`fit_crag_thresholds`)."""
    upper = min(pt.threshold for pt in curve if pt.false_acceptance <= max_trusted + 1e-12) * 10
    lower = max(pt.threshold for pt in curve if pt.false_abstention <= max_dropped + 1e-12) * 10
    return round(upper, 2), round(min(lower, upper), 2)


def routing(vals: Sequence[float], gold: Sequence[bool], upper: float, lower: float) -> dict[str, float]:
    """Shares of relevant / irrelevant passages the thresholds call "correct" (≥ upper) and "incorrect"
    (< lower)."""
    pos = [v for v, g in zip(vals, gold) if g]
    neg = [v for v, g in zip(vals, gold) if not g]

    def share(xs: list[float], hit) -> float:
        return round(sum(map(hit, xs)) / len(xs), 3) if xs else 0.0

    return {"relevant_correct": share(pos, lambda v: v >= upper), "relevant_incorrect": share(pos, lambda v: v < lower),
            "irrelevant_incorrect": share(neg, lambda v: v < lower), "irrelevant_correct": share(neg, lambda v: v >= upper)}


def record_rows(program: Any, examples: Sequence[Any], language: str = "") -> tuple[list[dict[str, Any]], Usage]:
    """Ask the program's evaluator on each labelled passage (``question``, ``passage``, ``relevance``; a
    ``title`` when given): one row per passage with its probabilities over 0–10, the gold relevance and the
    language (``language``, else the question's)."""
    rows, usage = [], Usage()
    for i, ex in enumerate(examples):
        passage = Passage(id=str(M.field_value(ex, "id") or f"p{i}"), text=str(M.field_value(ex, "passage")),
                          metadata={"title": str(M.field_value(ex, "title") or "")})
        question = str(M.field_value(ex, "question"))
        start = time.perf_counter()
        probs, tracer = program.evaluator_probabilities(question, passage)
        usage = usage.add(tracer.usage)
        rows.append({"language": language or question_language(question), "id": passage.id,
                     "relevant": M.field_value(ex, "relevance") == "relevant",
                     "probs": None if probs is None else {str(k): round(v, 4) for k, v in probs.items()},
                     "prompt_tokens": tracer.usage.prompt_tokens, "seconds": round(time.perf_counter() - start, 2)})
    return rows, usage


def _auc(vals: list[float], gold: list[bool]) -> float | None:
    from sklearn.metrics import roc_auc_score

    return round(float(roc_auc_score(gold, vals)), 4) if 0 < sum(gold) < len(gold) else None


def calibrate_crag(program: Any, examples: Sequence[Any], out_dir: Path | None = None,
                   max_trusted: float = DEFAULT_MAX_TRUSTED, max_dropped: float = DEFAULT_MAX_DROPPED,
                   language: str = "", recorded: list[dict[str, Any]] | None = None
                   ) -> tuple[CragThresholds, dict[str, Any], Usage]:
    """Fit the evaluator's thresholds on ``examples`` (or on ``recorded`` rows, no LM call) for the score the
    program routes on, set them on ``program.compiled_thresholds`` — ``crag`` for English or no ``language``,
    ``crag_by_language[language]`` for another — and return them with the stage's report and what the calls
    cost. When the rows cannot decide (fewer than 4 scored passages or one class only: ``kept_default`` says
    so) nothing is set and the thresholds the program started with (for that language) are returned."""
    key = crag_language_key(language)
    start = program.crag_thresholds_for(key)
    rows, usage = (list(recorded), Usage()) if recorded is not None else record_rows(program, examples)
    vals, gold = scored(rows, start.score)
    report: dict[str, Any] = {"language": key, "n": len(rows), "failed": len(rows) - len(vals), "relevant": sum(gold),
                              "score": start.score, "max_trusted": max_trusted, "max_dropped": max_dropped,
                              "start": start.model_dump()}
    if len(vals) < 4 or len(set(gold)) < 2:
        report["kept_default"] = "too few scored passages or only one class"
        fitted = start
    else:
        curve = threshold_curve([v / 10 for v in vals], gold)
        upper, lower = _cuts(curve, max_trusted, max_dropped)
        fitted = CragThresholds(score=start.score, upper=upper, lower=lower)
        expected, _ = scored(rows, "expected")
        argmax, _ = scored(rows, "argmax")
        report.update(upper=upper, lower=lower, auc_expected=_auc(expected, gold), auc_argmax=_auc(argmax, gold),
                      ece_expected=round(ece([v / 10 for v in expected], gold), 4),
                      routing_fitted=routing(vals, gold, upper, lower),
                      routing_start=routing(vals, gold, start.upper, start.lower),
                      curve=[{**pt.model_dump(), "threshold": round(pt.threshold * 10, 3)} for pt in curve])
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            report["reliability_png"] = str(reliability_diagram(
                [v / 10 for v in expected], gold, out_dir / "reliability-crag.png",
                title="CRAG evaluator: E[score]/10 vs relevant"))
    report["rows"] = rows
    if "kept_default" in report:  # nothing fitted: the artifact keeps what it had (no set frozen from the start)
        return fitted, report, usage
    base = getattr(program, "compiled_thresholds", None) or Thresholds()
    update = ({"crag": fitted} if key is None else {"crag_by_language": {**base.crag_by_language, key: fitted}})
    program.compiled_thresholds = base.model_copy(update=update)
    return fitted, report, usage


def crag_language_key(language: str | None) -> str | None:
    """Where a fit for questions in ``language`` goes: None (``Thresholds.crag``, any language) for English or
    none, else the language (``Thresholds.crag_by_language``)."""
    return None if not language or language == "en" else language
