"""Calibration in an evaluation run: each judgement's ECE and each program's coverage–accuracy curve.

From the results lines of ``selfrag eval`` (each holds the program's full ``RAGResult``):

- **relevance ECE**: every ``grade_relevance`` trace step with probabilities, P(relevant) against
  whether the judged passage is a gold passage of the question;
- **retrieve ECE**: the P(retrieve) the retrieve decision recorded (dataset questions all need
  retrieval, so the label is 1 — this measures how sure the judge is of the right call);
- **coverage–accuracy**: answer only the questions whose ``confidence`` reaches a cut-off; at each
  coverage (share of questions answered) the accuracy is the share of those answers that are right
  (:func:`optimize.metrics.is_right_answer`: answerable and token precision ≥ 0.5 against a gold answer). Programs without a confidence (the baselines) get no curve.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from optimize import metrics as M
from optimize.calibration import coverage_accuracy_curve, ece, plot_coverage_accuracy

COVERAGE_PLOT = "coverage_accuracy.png"


def _steps(row: dict[str, Any]) -> list[dict[str, Any]]:
    return list(((row.get("result") or {}).get("trace")) or [])


def _correct(row: dict[str, Any]) -> bool:
    if row.get("abstained") or not row.get("answerable", True):
        return False
    return float((row.get("scores") or {}).get("precision") or 0.0) >= M.RIGHT_PRECISION


def program_calibration(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """ECEs and the coverage–accuracy curve of one program's qa rows."""
    rel_p, rel_y, ret_p = [], [], []
    conf, correct = [], []
    for row in rows:
        if row.get("task") != "qa" or not row.get("ok"):
            continue
        gold = {M.document_id(str(g)) for g in row.get("gold_doc_ids") or []}
        for step in _steps(row):
            probs = step.get("probs") or {}
            if step.get("step") == "grade_relevance" and "relevant" in probs:
                pid = (step.get("inputs") or {}).get("passage_id")
                if pid is not None:
                    rel_p.append(float(probs["relevant"]))
                    rel_y.append(M.document_id(str(pid)) in gold)
            if step.get("step") == "retrieve_decision" and probs:
                ret_p.append(float(probs.get("yes", 0.0)) + float(probs.get("continue", 0.0)))
        c = (row.get("result") or {}).get("confidence")
        if c is not None or row.get("abstained"):
            conf.append(float(c) if c is not None else 0.0)
            correct.append(_correct(row))
    out: dict[str, Any] = {
        "relevance_ece": round(ece(rel_p, rel_y), 4) if rel_p else None, "relevance_n": len(rel_p),
        "retrieve_ece": round(ece(ret_p, [True] * len(ret_p)), 4) if ret_p else None, "retrieve_n": len(ret_p),
    }
    if conf and any(c > 0 for c in conf):
        out["coverage_accuracy"] = [pt.model_dump() for pt in coverage_accuracy_curve(conf, correct)]
    return out


def calibration_summary(rows: Sequence[dict[str, Any]], programs: Sequence[str]) -> dict[str, Any]:
    return {name: program_calibration([r for r in rows if r.get("program") == name]) for name in programs}


def write_coverage_plot(calibration: dict[str, Any], out_dir: Path | str) -> Path | None:
    from optimize.calibration import CoveragePoint

    curves = {name: [CoveragePoint(**pt) for pt in c["coverage_accuracy"]]
              for name, c in calibration.items() if c.get("coverage_accuracy")}
    if not curves:
        return None
    return plot_coverage_accuracy(curves, Path(out_dir) / COVERAGE_PLOT)


def calibration_markdown(calibration: dict[str, Any]) -> str:
    """A markdown table: per program, the judgements' ECEs and accuracy at 50% / 80% / full coverage."""
    lines = ["", "## Calibration", "",
             "| program | relevance ECE (n) | retrieve ECE (n) | acc @50% cov | acc @80% cov | acc @100% cov |",
             "|---|---|---|---|---|---|"]

    def at(curve: list[dict], coverage: float) -> str:
        pts = [p for p in curve if p["coverage"] >= coverage - 1e-9]
        return f"{min(pts, key=lambda p: p['coverage'])['accuracy']:.2f}" if pts else "—"

    for name, c in calibration.items():
        rel = "—" if c["relevance_ece"] is None else f"{c['relevance_ece']:.3f} ({c['relevance_n']})"
        ret = "—" if c["retrieve_ece"] is None else f"{c['retrieve_ece']:.3f} ({c['retrieve_n']})"
        curve = c.get("coverage_accuracy") or []
        lines.append(f"| {name} | {rel} | {ret} | {at(curve, 0.5)} | {at(curve, 0.8)} | {at(curve, 1.0)} |")
    return "\n".join(lines) + "\n"
