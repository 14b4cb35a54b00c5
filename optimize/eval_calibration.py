"""Calibration in an evaluation run: each judgement's ECE and each program's coverage–accuracy curve.

From the results lines of ``selfrag eval`` (each holds the program's full ``RAGResult``):

- **relevance ECE**: every ``grade_relevance`` trace step with probabilities, P(relevant) against
  whether the judged passage is a gold passage of the question;
- **retrieve ECE**: the P(retrieve) the retrieve decision recorded (dataset questions all need
  retrieval, so the label is 1 — this measures how sure the judge is of the right call);
- **check ECE**: every ``check_answer`` step's P(stated) against whether the question is answerable
  (the judgement abstention rests on);
- **evaluator ECE** (CRAG): every ``evaluate_retrieval`` step's expected score / 10 against whether the
  evaluated passage is a gold passage;
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
from programs.soft_labels import expected_value

COVERAGE_PLOT = "coverage_accuracy.png"


def _steps(row: dict[str, Any]) -> list[dict[str, Any]]:
    return list(((row.get("result") or {}).get("trace")) or [])


def _correct(row: dict[str, Any]) -> bool:
    if row.get("abstained") or not row.get("answerable", True):
        return False
    return float((row.get("scores") or {}).get("precision") or 0.0) >= M.RIGHT_PRECISION


def program_calibration(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """ECEs and the coverage–accuracy curve of one program's qa rows."""
    rel_p, rel_y, ret_p, chk_p, chk_y, ev_p, ev_y = [], [], [], [], [], [], []
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
            if step.get("step") == "check_answer" and "yes" in probs:
                chk_p.append(float(probs["yes"]))
                chk_y.append(bool(row.get("answerable", True)))
            if step.get("step") == "evaluate_retrieval" and probs:
                pid = (step.get("inputs") or {}).get("passage_id")
                if pid is not None:
                    ev_p.append(expected_value({int(k): float(v) for k, v in probs.items()}) / 10.0)
                    ev_y.append(M.document_id(str(pid)) in gold)
        c = (row.get("result") or {}).get("confidence")
        if c is not None or row.get("abstained"):
            conf.append(float(c) if c is not None else 0.0)
            correct.append(_correct(row))
    out: dict[str, Any] = {
        "relevance_ece": round(ece(rel_p, rel_y), 4) if rel_p else None, "relevance_n": len(rel_p),
        "retrieve_ece": round(ece(ret_p, [True] * len(ret_p)), 4) if ret_p else None, "retrieve_n": len(ret_p),
        "check_ece": round(ece(chk_p, chk_y), 4) if chk_p else None, "check_n": len(chk_p),
        "evaluator_ece": round(ece(ev_p, ev_y), 4) if ev_p else None, "evaluator_n": len(ev_p),
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
             "| program | relevance ECE (n) | retrieve ECE (n) | check ECE (n) | evaluator ECE (n) "
             "| acc @50% cov | acc @80% cov | acc @100% cov |",
             "|---|---|---|---|---|---|---|---|"]

    def at(curve: list[dict], coverage: float) -> str:
        pts = [p for p in curve if p["coverage"] >= coverage - 1e-9]
        return f"{min(pts, key=lambda p: p['coverage'])['accuracy']:.2f}" if pts else "—"

    def cell(c: dict[str, Any], name: str) -> str:
        value = c.get(f"{name}_ece")
        return "—" if value is None else f"{value:.3f} ({c[f'{name}_n']})"

    for name, c in calibration.items():
        eces = " | ".join(cell(c, judgement) for judgement in ("relevance", "retrieve", "check", "evaluator"))
        curve = c.get("coverage_accuracy") or []
        lines.append(f"| {name} | {eces} | {at(curve, 0.5)} | {at(curve, 0.8)} | {at(curve, 1.0)} |")
    return "\n".join(lines) + "\n"
