"""Calibration of soft judgement scores: threshold fitting on dev data, ECE, reliability diagrams and
coverage–accuracy curves (with their PNG plots).

Conventions: ``probs[i]`` is the score of the positive event for example ``i`` and ``labels[i]``
whether it really happened; the decision is "positive when prob ≥ threshold". For each judgement:

* retrieve — positive = needs retrieval (P(retrieve)), false abstention = retrieval skipped when needed;
* relevance — positive = relevant passage (P(relevant)), false abstention = a relevant passage dropped;
* answer — positive = the answer is right / the question answerable (candidate confidence),
  false abstention = abstaining on a question that should have been answered.

For a multi-label judgement (support, usefulness) pass the probability of the predicted label and
whether the prediction was correct: :func:`ece` then measures top-label calibration.

Plots use matplotlib's object API with the Agg canvas: no pyplot state, safe in threads and headless.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import sqrt
from pathlib import Path
from statistics import NormalDist
from typing import Literal, Union

import numpy as np
from pydantic import BaseModel, ConfigDict

Objective = Union[
    Literal["accuracy", "balanced_accuracy"],
    tuple[Literal["max_false_abstention", "max_false_acceptance"], float],
    # (rate, bound, confidence): the rate's one-sided upper confidence bound must stay under the bound
    tuple[Literal["max_false_abstention", "max_false_acceptance"], float, float],
]


class CurvePoint(BaseModel):
    """The decision rule "positive when prob ≥ threshold" scored on the dev set."""

    model_config = ConfigDict(frozen=True)

    threshold: float
    accuracy: float
    balanced_accuracy: float
    coverage: float  # share of examples decided positive (retrieved / kept / answered)
    false_abstention: float  # share of positives decided negative (1 − recall); 0 without positives
    false_acceptance: float  # share of negatives decided positive; 0 without negatives


class ThresholdFit(BaseModel):
    """A fitted threshold, the objective it was chosen for, and the dev curve it came from (for the artifact)."""

    threshold: float
    objective: str
    point: CurvePoint
    curve: list[CurvePoint]
    n: int
    n_positive: int


class CoveragePoint(BaseModel):
    """Answering only when confidence ≥ threshold: the share answered and how accurate those answers are."""

    model_config = ConfigDict(frozen=True)

    threshold: float
    coverage: float
    accuracy: float


# ---------------------------------------------------------------------- threshold fitting
def _checked(probs: Sequence[float], labels: Sequence[bool | int]) -> tuple[list[float], list[bool]]:
    if len(probs) != len(labels):
        raise ValueError(f"probs and labels differ in length ({len(probs)} vs {len(labels)})")
    if not probs:
        raise ValueError("no examples: need at least one (prob, label) pair")
    ps = [float(p) for p in probs]
    bad = [p for p in ps if not 0.0 <= p <= 1.0]
    if bad:
        raise ValueError(f"probabilities must lie in [0, 1], got {bad[:3]}")
    return ps, [bool(y) for y in labels]


def candidate_thresholds(probs: Sequence[float]) -> list[float]:
    """One threshold per distinct decision on this data, each as far from the data as it can be: 0
    (everything positive), the midpoints between consecutive distinct scores, and halfway between the
    highest score and 1 (everything negative; not expressible when the highest score is 1)."""
    distinct = sorted(set(probs))
    mids = [(a + b) / 2 for a, b in zip(distinct, distinct[1:])]
    top = [(distinct[-1] + 1.0) / 2] if distinct[-1] < 1.0 else []
    return [0.0, *mids, *top]


def evaluate_threshold(probs: Sequence[float], labels: Sequence[bool | int], threshold: float) -> CurvePoint:
    ps, ys = _checked(probs, labels)
    decided = [p >= threshold for p in ps]
    pos = sum(ys)
    neg = len(ys) - pos
    tp = sum(d and y for d, y in zip(decided, ys))
    tn = sum((not d) and (not y) for d, y in zip(decided, ys))
    fnr = (pos - tp) / pos if pos else 0.0
    fpr = (neg - tn) / neg if neg else 0.0
    recalls = ([tp / pos] if pos else []) + ([tn / neg] if neg else [])  # per class present
    return CurvePoint(
        threshold=round(threshold, 9), accuracy=(tp + tn) / len(ys), balanced_accuracy=sum(recalls) / len(recalls),
        coverage=sum(decided) / len(ys), false_abstention=fnr, false_acceptance=fpr,
    )


def fit_min_precision(probs: Sequence[float], labels: Sequence[bool | int], precision: float,
                      min_count: int = 3) -> tuple[float | None, list[dict[str, float]]]:
    """The lowest threshold t such that the examples with prob ≥ t are positive at least ``precision`` of
    the time, counting only rules that select at least ``min_count`` examples; None when no rule does.
    Returns it with the curve (threshold, selected share, precision) it was read from."""
    if not 0.0 <= precision <= 1.0:
        raise ValueError(f"precision target must lie in [0, 1], got {precision}")
    ps, ys = _checked(probs, labels)
    curve, best = [], None
    for t in candidate_thresholds(ps):
        picked = [y for p, y in zip(ps, ys) if p >= t]
        if not picked:
            continue
        prec = sum(picked) / len(picked)
        curve.append({"threshold": round(t, 9), "selected": round(len(picked) / len(ps), 4),
                      "precision": round(prec, 4)})
        if best is None and len(picked) >= min_count and prec >= precision:
            best = t
    return (None if best is None else round(best, 9)), curve


def threshold_curve(probs: Sequence[float], labels: Sequence[bool | int]) -> list[CurvePoint]:
    """Every distinct decision rule on this data, by increasing threshold."""
    ps, ys = _checked(probs, labels)
    return [evaluate_threshold(ps, ys, t) for t in candidate_thresholds(ps)]


def rate_upper_bound(errors: int, n: int, confidence: float) -> float:
    """The one-sided Wilson upper confidence bound on a rate seen as ``errors`` of ``n`` (1.0 when n = 0):
    the rate a fresh sample of the same population stays under with probability ``confidence``, roughly.
    Fitting a threshold under this bound instead of the rate itself leaves a margin that shrinks as the dev
    set grows, so the bound holds out of sample more often than a rule fitted exactly at it."""
    if n <= 0:
        return 1.0
    z = NormalDist().inv_cdf(confidence)
    p = errors / n
    centre = p + z * z / (2 * n)
    spread = z * sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return min(1.0, (centre + spread) / (1 + z * z / n))


def _within(rate: float, n: int, limit: float, confidence: float | None) -> bool:
    """Whether a rate over ``n`` examples meets ``limit``: the rate itself, or its upper confidence bound."""
    if confidence is None:
        return rate <= limit + 1e-12
    return rate_upper_bound(round(rate * n), n, confidence) <= limit + 1e-12


def fit_threshold(probs: Sequence[float], labels: Sequence[bool | int],
                  objective: Objective = "accuracy") -> ThresholdFit:
    """Choose the threshold for ``objective`` on a dev set.

    ``"accuracy"`` / ``"balanced_accuracy"`` maximise that; ``("max_false_abstention", x)`` maximises
    accuracy among thresholds with false abstention ≤ x (always satisfiable: threshold 0 abstains on
    nothing); ``("max_false_acceptance", x)`` likewise with false acceptance ≤ x. A third element, a
    confidence c (``("max_false_abstention", 0.1, 0.9)``), bounds the rate's upper confidence bound at c
    (:func:`rate_upper_bound`) instead of the rate: a margin against fitting to this sample (with few
    positives only threshold 0, abstaining on nothing, may meet it). Ties go to
    the lowest threshold: of equally accurate rules, the one that abstains least.
    """
    key, bounded, limit, confidence, name = _objective_filter(objective)
    curve = threshold_curve(probs, labels)
    ys = [bool(y) for y in labels]
    counts = {"false_abstention": sum(ys), "false_acceptance": len(ys) - sum(ys)}
    feasible = curve if bounded is None else [
        pt for pt in curve if _within(getattr(pt, bounded), counts[bounded], limit, confidence)
        or (bounded == "false_abstention" and pt.threshold == 0.0)]  # abstaining on nothing: 0 for certain
    if not feasible:
        raise ValueError(f"no threshold reaches {name} on this dev set")
    best = max(feasible, key=lambda pt: (getattr(pt, key), -pt.threshold))
    return ThresholdFit(threshold=best.threshold, objective=name, point=best, curve=curve, n=len(ys),
                        n_positive=sum(ys))


class JointFit(BaseModel):
    """Two thresholds fitted together for the rule "positive when a ≥ ``first`` and b ≥ ``second``"."""

    first: float
    second: float
    objective: str
    point: CurvePoint  # its ``threshold`` field is ``second``; ``first`` is above
    n: int
    n_positive: int
    rules: int  # how many (first, second) pairs were scored


def _objective_filter(objective: Objective) -> tuple[str, str | None, float, float | None, str]:
    """(the accuracy key maximised, the rate bounded or None, its bound, the confidence of the bound or
    None (the rate itself), the objective's name)."""
    if objective in ("accuracy", "balanced_accuracy"):
        return str(objective), None, 1.0, None, str(objective)
    if isinstance(objective, tuple) and len(objective) in (2, 3) and objective[0] in ("max_false_abstention",
                                                                                   "max_false_acceptance"):
        limit = float(objective[1])
        if not 0.0 <= limit <= 1.0:
            raise ValueError(f"{objective[0]} target must lie in [0, 1], got {limit}")
        confidence = float(objective[2]) if len(objective) == 3 else None
        if confidence is not None and not 0.5 <= confidence < 1.0:
            raise ValueError(f"{objective[0]} confidence must lie in [0.5, 1), got {confidence}")
        name = f"{objective[0]}<={limit:g}" + ("" if confidence is None else f"@{confidence:g}")
        return "accuracy", objective[0].removeprefix("max_"), limit, confidence, name
    raise ValueError(f"unknown objective {objective!r}; use 'accuracy', 'balanced_accuracy', "
                     "('max_false_abstention', x[, confidence]) or ('max_false_acceptance', x[, confidence])")


def fit_joint_thresholds(first: Sequence[float], second: Sequence[float], labels: Sequence[bool | int],
                         objective: Objective = "accuracy") -> JointFit:
    """Choose (s, t) together for "positive when first ≥ s and second ≥ t" (e.g. a similarity gate and a
    check behind it), over every distinct decision of each score on this data, for ``objective`` as in
    :func:`fit_threshold`. Ties go to the least false abstention, then the highest s (the cheap first test
    decides more), then the lowest t. Both score lists must lie in [0, 1]."""
    a, ys = _checked(first, labels)
    b, _ = _checked(second, labels)
    key, bounded, limit, confidence, name = _objective_filter(objective)
    av, bv, yv = np.asarray(a), np.asarray(b), np.asarray(ys, dtype=bool)
    ss, ts = np.asarray(candidate_thresholds(a)), np.asarray(candidate_thresholds(b))
    decided = (av[None, None, :] >= ss[:, None, None]) & (bv[None, None, :] >= ts[None, :, None])  # s × t × n
    pos, neg = int(yv.sum()), int((~yv).sum())
    tp = (decided & yv).sum(axis=2)
    tn = (~decided & ~yv).sum(axis=2)
    rates = {"false_abstention": (pos - tp) / pos if pos else np.zeros_like(tp, dtype=float),
             "false_acceptance": (neg - tn) / neg if neg else np.zeros_like(tn, dtype=float)}
    recalls = [r for r, n in ((tp / max(pos, 1), pos), (tn / max(neg, 1), neg)) if n]
    scores = {"accuracy": (tp + tn) / len(ys), "balanced_accuracy": sum(recalls) / len(recalls)}
    if bounded is None:
        feasible = np.ones_like(tp, dtype=bool)
    elif confidence is None:
        feasible = rates[bounded] <= limit + 1e-12
    else:  # the upper confidence bound of each pair's rate, from its error count
        n = pos if bounded == "false_abstention" else neg
        errors = (pos - tp) if bounded == "false_abstention" else (neg - tn)
        bounds = {k: rate_upper_bound(k, n, confidence) for k in range(n + 1)}
        feasible = np.vectorize(lambda k: bounds[int(k)] <= limit + 1e-12, otypes=[bool])(errors)
        if bounded == "false_abstention":
            feasible[0, 0] = True  # (0, 0) abstains on nothing: 0 for certain, however few the examples
    if not feasible.any():
        raise ValueError(f"no pair of thresholds reaches {name} on this dev set")
    best = max(zip(*np.nonzero(feasible)), key=lambda ij: (scores[key][ij], -rates["false_abstention"][ij],
                                                           ss[ij[0]], -ts[ij[1]]))
    i, j = (int(x) for x in best)
    point = CurvePoint(threshold=round(float(ts[j]), 9), accuracy=float(scores["accuracy"][i, j]),
                       balanced_accuracy=float(scores["balanced_accuracy"][i, j]),
                       coverage=float(decided[i, j].mean()),
                       false_abstention=float(rates["false_abstention"][i, j]),
                       false_acceptance=float(rates["false_acceptance"][i, j]))
    return JointFit(first=round(float(ss[i]), 9), second=round(float(ts[j]), 9), objective=name, point=point,
                    n=len(ys), n_positive=pos, rules=int(feasible.size))


# ---------------------------------------------------------------------- calibration error
def _bins(probs: list[float], labels: list[bool], n_bins: int) -> list[tuple[float, float, int]]:
    """(mean prob, share positive, count) per non-empty equal-width bin; 1.0 falls in the last bin."""
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins}")
    sums = [[0.0, 0, 0] for _ in range(n_bins)]
    for p, y in zip(probs, labels):
        b = min(int(p * n_bins), n_bins - 1)
        sums[b][0] += p
        sums[b][1] += int(y)
        sums[b][2] += 1
    return [(s / n, pos / n, n) for s, pos, n in sums if n]


def ece(probs: Sequence[float], labels: Sequence[bool | int], n_bins: int = 10) -> float:
    """Expected calibration error: Σ_b (n_b / N)·|mean prob_b − share positive_b| over equal-width bins."""
    ps, ys = _checked(probs, labels)
    return sum(n / len(ps) * abs(conf - acc) for conf, acc, n in _bins(ps, ys, n_bins))


# ---------------------------------------------------------------------- coverage–accuracy
def coverage_accuracy_curve(confidences: Sequence[float], correct: Sequence[bool | int]) -> list[CoveragePoint]:
    """Answer only when confidence ≥ t, for each distinct confidence t from the highest down: the
    share answered (coverage) and the accuracy of those answers. Ends at coverage 1."""
    ps, ys = _checked(confidences, correct)
    points = []
    for t in sorted(set(ps), reverse=True):
        answered = [y for p, y in zip(ps, ys) if p >= t]
        points.append(CoveragePoint(threshold=t, coverage=len(answered) / len(ps),
                                    accuracy=sum(answered) / len(answered)))
    return points


# ---------------------------------------------------------------------- plots (PNG)
def _figure(width: float = 5.0, height: float = 4.0):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _save(fig, path: str | Path) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, format="png")
    return out


def reliability_diagram(probs: Sequence[float], labels: Sequence[bool | int], path: str | Path,
                        n_bins: int = 10, title: str = "Reliability") -> Path:
    """Write a reliability diagram (share positive against mean prob per bin, the diagonal, ECE in the title)."""
    ps, ys = _checked(probs, labels)
    bins = _bins(ps, ys, n_bins)
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", label="perfect calibration")
    ax.bar([c for c, _, _ in bins], [a for _, a, _ in bins], width=0.8 / n_bins, alpha=0.6, label="share positive")
    ax.plot([c for c, _, _ in bins], [a for _, a, _ in bins], marker="o")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("predicted probability")
    ax.set_ylabel("observed frequency")
    ax.set_title(f"{title} (ECE {ece(ps, ys, n_bins):.3f}, n={len(ps)})")
    ax.legend(loc="upper left")
    return _save(fig, path)


def plot_coverage_accuracy(curves: Mapping[str, Sequence[CoveragePoint]], path: str | Path,
                           title: str = "Coverage–accuracy") -> Path:
    """Write one coverage–accuracy line per program (name → :func:`coverage_accuracy_curve` output)."""
    if not curves:
        raise ValueError("no curves to plot")
    fig = _figure(6.0, 4.0)
    ax = fig.add_subplot(1, 1, 1)
    for name, points in curves.items():
        pts = sorted(points, key=lambda pt: pt.coverage)
        ax.plot([pt.coverage for pt in pts], [pt.accuracy for pt in pts], marker="o", markersize=3, label=name)
    ax.set_xlim(0, 1.02)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("coverage (share answered)")
    ax.set_ylabel("accuracy of answered")
    ax.set_title(title)
    ax.legend(loc="lower left")
    return _save(fig, path)
