"""A module's mean metric on a dev set, through ``dspy.Evaluate``: what the compile stages report
before and after compiling.

A failed prediction (or a metric that raises) scores 0 and is counted as an error; the evaluation
goes on. With a ``label`` (an output field) the ``gold->predicted`` pairs are counted too
(``error`` for a failure), so a report shows which way a judge is wrong.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import dspy

from optimize.progress import Reporter


@dataclass
class DevScore:
    score: float  # mean metric in [0, 1]
    n: int
    errors: int
    seconds: float
    confusion: dict[str, int] = field(default_factory=dict)  # "gold->predicted": count, when a label is given


def score_on_dev(module: Callable[..., Any], devset: list[dspy.Example], metric: Callable, *, num_threads: int = 1,
                 reporter: Reporter | None = None, description: str = "evaluate",
                 label: str | None = None) -> DevScore:
    """Mean ``metric`` of ``module`` over ``devset`` (see the module docstring)."""
    if not devset:
        return DevScore(score=0.0, n=0, errors=0, seconds=0.0)
    reporter = reporter or Reporter()
    reporter.stage(description, total=len(devset))
    scored: set[int] = set()  # the predictions the metric scored; a failure gets DSPy's empty Prediction
    lock = threading.Lock()

    def run(**inputs: Any) -> Any:
        try:
            return module(**inputs)
        except Exception:
            reporter.advance()
            raise

    def scored_metric(example: dspy.Example, pred: Any, trace: Any = None) -> float:
        try:
            value = float(metric(example, pred))
        finally:
            reporter.advance()
        with lock:
            scored.add(id(pred))
        return value

    start = time.perf_counter()
    evaluate = dspy.Evaluate(devset=devset, metric=scored_metric, num_threads=num_threads, display_progress=False,
                             max_errors=len(devset) + 1, failure_score=0.0, timeout=None)
    results = evaluate(run).results
    reporter.done()
    errors = 0
    confusion: Counter[str] = Counter()
    for example, pred, _ in results:
        ok = id(pred) in scored
        errors += not ok
        if label:
            confusion[f"{example.get(label)}->{getattr(pred, label, None) if ok else 'error'}"] += 1
    return DevScore(score=sum(float(s) for *_, s in results) / len(devset), n=len(devset), errors=errors,
                    seconds=round(time.perf_counter() - start, 2), confusion=dict(sorted(confusion.items())))
