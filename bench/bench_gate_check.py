"""The similarity gate and the answer check, fitted alone, in sequence, or jointly: which abstains most?

    .venv/bin/python bench/bench_gate_check.py MANIFEST [MANIFEST ...] [--stage stated] [--run RUN_ID]
                                               [--reports reports] [--max-false-abstention 0.1]
                                               [--confidence 0.9 ...]

MANIFEST is a compile manifest (several: their rows pooled) whose ``stated`` calibration stage (``--stage
stated@KEY`` for a per-embedder set) recorded ``rows`` (each question's
P(stated) without the gate, its first retrieval's top dense similarity and whether it is answerable;
``selfrag compile --calibrate --cal-stated N``). Each rule is fitted on those rows for the most
abstention on unanswerable questions at false abstention ≤ the bound:

* check alone — abstain when P(stated) < t;
* gate alone — abstain when the top similarity < s;
* gate, then check — s as compiled in the manifest, t fitted on what the gate lets through;
* joint — s and t searched together (over the scores themselves);
* weighted — what ``calibrate``'s stated stage fits when the gate is on
  (:func:`optimize.calibrate.fit_gate_and_check`): the check scores (1 − w)·P(stated) + w·similarity, w
  from a logistic regression, and the gate and the threshold on that score are searched together.

With ``--confidence C`` (repeatable), the weighted rule is fitted again with the false abstention's
upper confidence bound at C held under the bound instead of the rate itself (``selfrag compile
--answer-objective max-false-abstention=X@C``): the margin against fitting to the calibration sample.

The weighted rule is also cross-validated on the rows (fitted on four fifths, applied to the fifth left out,
over five shuffles): the estimate for new questions that ``calibrate`` records as ``cross_validated``.

The rows are read, and every rule is applied, as calibrate reads and applies them
(:class:`optimize.gate_check.RecordedRows`, :func:`~optimize.gate_check.answers`): the check's value is
:func:`~optimize.gate_check.row_value` (P(stated), or less its prior in rows recorded with ``check_prior``),
a row whose check was not taken is answered unless the gate stops it, and a row without a similarity is
never gated.

With ``--run``, the fitted rules are replayed on the first-round signals of that eval run's compiled
program (out of sample; a question whose first round the gate stopped has no P(stated): counted as 0 there).
No LM.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench_answerability import SIGNALS  # the same first-round signals the answerability bench reads

from optimize.errors import CompileError
from optimize.gate_check import (RecordedRows, answers, cross_validate_gate_and_check, fit_gate_and_check,
                                 row_value)

Rows = list[dict]  # gate_check's rows: p_stated, top_similarity, answerable (and p_prior with check_prior)


def _point(rows: Rows, s: float, t: float, w: float = 0.0) -> tuple[float, float]:
    """(abstention on unanswerable, false abstention) of "abstain when similarity < s or the check's score
    (1 − w)·value + w·similarity < t" (:func:`optimize.gate_check.answers`)."""
    abstain = [(not answers(r, s, w, t), bool(r["answerable"])) for r in rows]
    pos = sum(a for _, a in abstain) or 1
    neg = (len(abstain) - sum(a for _, a in abstain)) or 1
    return sum(d for d, a in abstain if not a) / neg, sum(d for d, a in abstain if a) / pos


def _best(rows: Rows, pairs: list[tuple[float, float]], bound: float) -> tuple[float, float]:
    """The (s, t) of ``pairs`` with the most abstention at false abstention ≤ ``bound`` (ties: the least false
    abstention, then the lowest t, then the highest s — the rule that gates more and calls the check less)."""
    points = {st: _point(rows, *st) for st in pairs}
    feasible = [st for st in pairs if points[st][1] <= bound + 1e-12]  # (0, 0) abstains on nothing: always there
    return max(feasible, key=lambda st: (points[st][0], -points[st][1], -st[1], st[0]))


def fit_rules(rows: Rows, gate: float, bound: float, confidences: tuple[float, ...] = ()
              ) -> dict[str, tuple[float, float, float]]:
    """(s, t, w) of each rule, fitted on ``rows`` for the most abstention at false abstention ≤ ``bound``
    (the weighted rule: for the most accuracy at that bound, as ``calibrate`` fits it; once more per
    confidence with the bound on the rate's upper confidence bound)."""
    ss = [0.0, *sorted({r["top_similarity"] for r in rows if r["top_similarity"] is not None})]
    ts = [0.0, *sorted({v for v in map(row_value, rows) if v is not None})]
    rules = {"check alone": _best(rows, [(0.0, t) for t in ts], bound),
             "gate alone": _best(rows, [(s, 0.0) for s in ss], bound),
             "gate, then check": _best(rows, [(gate, t) for t in ts], bound),
             "joint": _best(rows, [(s, t) for s in ss for t in ts], bound)}
    out = {name: (s, t, 0.0) for name, (s, t) in rules.items()}
    for confidence in (None, *confidences):
        objective = ("max_false_abstention", bound) if confidence is None else ("max_false_abstention", bound,
                                                                                 confidence)
        fit = fit_gate_and_check(rows, objective)
        if fit is not None:
            name = "weighted (calibrate)" if confidence is None else f"weighted, upper bound at {confidence:g}"
            out[name] = (fit["similarity"], fit["stated"], fit["stated_similarity_weight"])
    return out


def _check_prior(manifest: dict, stage: str) -> bool:
    """Whether ``stage`` (else the main ``stated`` stage, which may hold its rows) recorded the check's
    prior."""
    stages = manifest["calibration"]["stages"]
    return bool((stages.get(stage) or stages.get("stated") or {}).get("check_prior", False))


def manifest_rows(paths: list[Path], stage: str = "stated") -> tuple[Rows, float]:
    """The rows the manifests' ``stage`` recorded, pooled and checked as calibrate pools them
    (:class:`optimize.gate_check.RecordedRows`), and the first manifest's compiled gate."""
    try:
        head = json.loads(paths[0].read_text(encoding="utf-8"))
        rows = RecordedRows(paths)(stage, "", _check_prior(head, stage))
    except (OSError, ValueError, CompileError) as exc:  # CompileError names the file
        raise SystemExit(f"{exc} (rows are recorded by selfrag compile --calibrate --cal-stated N)") from None
    first = head["calibration"].get("thresholds") or head.get("thresholds") or {}
    key = stage.partition("@")[2]
    gate = (first.get("by_embedder", {}).get(key) or {}).get("similarity", 0.0) if key else first.get("similarity", 0.0)
    return rows, float(gate)


def run_rows(reports: Path, run_id: str) -> Rows:
    rows = []
    for line in (reports / run_id / "results.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row.get("program", "").startswith("compiled:"):
            p, sim = SIGNALS["answer check P(stated)"](row), SIGNALS["top dense similarity"](row)
            rows.append({"p_stated": p or 0.0, "top_similarity": sim,
                         "answerable": bool(row.get("answerable"))})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("manifest", type=Path, nargs="+", help="compile manifests; their rows are pooled")
    ap.add_argument("--stage", default="stated", help="the stated stage to read (stated@KEY for a per-embedder set)")
    ap.add_argument("--run", default=None)
    ap.add_argument("--reports", type=Path, default=Path("reports"))
    ap.add_argument("--max-false-abstention", type=float, default=0.1)
    ap.add_argument("--confidence", type=float, action="append", default=[],
                    help="also fit the weighted rule on the false abstention's upper confidence bound at this level")
    args = ap.parse_args()
    train, gate = manifest_rows(args.manifest, args.stage)
    if args.run and not (args.reports / args.run / "results.jsonl").is_file():
        ap.error(f"--run {args.run}: no {args.reports / args.run / 'results.jsonl'} (an eval run's directory; --reports)")
    dev = run_rows(args.reports, args.run) if args.run else []
    print(f"fitted on {len(train)} calibration questions at false abstention ≤ {args.max_false_abstention}"
          + (f"; replayed on run {args.run} ({len(dev)} questions)" if dev else ""))
    print("| rule | similarity s | stated t | weight w | train abstention | train false abst. | dev abstention "
          "| dev false abst. |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, (s, t, w) in fit_rules(train, gate, args.max_false_abstention, tuple(args.confidence)).items():
        tr = _point(train, s, t, w)
        dv = _point(dev, s, t, w) if dev else None
        print(f"| {name} | {s:.3f} | {t:.3f} | {w:.3f} | {tr[0]:.2f} | {tr[1]:.2f} | "
              + (f"{dv[0]:.2f} | {dv[1]:.2f} |" if dv else "— | — |"))
    print("\nThe weighted rule fitted on k − 1 folds of the calibration rows, applied to the fold left out (5 folds, "
          "5 shuffles; calibrate's `cross_validated`):")
    print("| objective | abstention | false abst. | abstention range | false abst. range |")
    print("|---|---:|---:|---:|---:|")
    for confidence in (None, *args.confidence):
        objective = (("max_false_abstention", args.max_false_abstention) if confidence is None
                     else ("max_false_abstention", args.max_false_abstention, confidence))
        cv = cross_validate_gate_and_check(train, objective)
        if cv:
            print(f"| false abstention ≤ {args.max_false_abstention:g}"
                  + (f" (upper bound at {confidence:g})" if confidence else "")
                  + f" | {cv['abstention_unanswerable']:.2f} | {cv['false_abstention']:.2f} | "
                  f"{cv['abstention_range'][0]:.2f}–{cv['abstention_range'][1]:.2f} | "
                  f"{cv['false_abstention_range'][0]:.2f}–{cv['false_abstention_range'][1]:.2f} |")


if __name__ == "__main__":
    main()
