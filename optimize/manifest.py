"""The compile manifest (what was compiled, with which LMs, data, optimizer, scores and cost) and
its rows for a summary table."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import dspy

from optimize.optimizers import BUDGET_KNOB
from optimize.splits import dataset_hash
from optimize.stages import StageReport
from optimize.usage import UsageMeter
from programs.artifacts import PROGRAM_VERSION, signature_hash


def _model_id(lm: Any) -> str | None:
    return None if lm is None else str(getattr(lm, "model", lm))


def build_manifest(program: dspy.Module, settings: Any, *, optimizer: str, budget: int | None,
                   params: dict[str, Any], stages: list[StageReport], meter: UsageMeter, seconds: float,
                   generator: Any, critic: Any, reflection: Any, name: str, seed: int,
                   splits_dir: Path, teacher: Any = None) -> dict[str, Any]:
    """The manifest of one compile; ``settings`` gives the LM profile, temperature and threads. The
    student LMs are ``generator`` / ``critic``; ``teacher`` (None without one) bootstrapped the demos."""
    cost = meter.snapshot()
    return {
        "name": name,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "dspy_version": dspy.__version__,
        "program": type(program).__name__,
        "program_version": PROGRAM_VERSION,
        "signature_hash": signature_hash(program),
        "lm": {
            "profile": settings.lm.profile,
            "generator": _model_id(generator),
            "critic": _model_id(critic or generator),
            "reflection": _model_id(reflection),
            "teacher": _model_id(teacher),
            "adapter": type(program.adapter).__name__ if program.adapter is not None else None,
            "temperature": settings.lm.temperature,
            "threads": settings.lm.threads,
        },
        "dataset_hash": dataset_hash(splits_dir),
        "optimizer": {"name": optimizer, "budget": budget, "budget_knob": BUDGET_KNOB[optimizer], "params": params,
                      "seed": seed},
        "scores": {s.name: {"metric": s.metric, "dev": s.dev, "before": s.before, "after": s.after} for s in stages},
        "stages": [asdict(s) for s in stages],
        "cost": {**cost, "seconds": seconds},
    }


def summary_rows(manifest: dict[str, Any]) -> list[tuple[str, str, str, str, str, str, str]]:
    """(stage, metric, train/dev, before, after, change, demos) for a table."""
    rows = []
    for s in manifest.get("stages", []):
        before, after = s.get("before"), s.get("after")
        change = "" if before is None or after is None else f"{after - before:+.3f}"
        rows.append((s["name"], s["metric"], f"{s['train']}/{s['dev']}",
                     "" if before is None else f"{before:.3f}", "" if after is None else f"{after:.3f}", change,
                     str(sum(s.get("demos", {}).values()))))
    for name, s in (manifest.get("calibration") or {}).get("stages", {}).items():
        if name == "crag":
            rows += crag_rows(s)
            continue
        if "threshold" not in s:
            rows.append((f"calibrate {name}", "threshold", str(s.get("n", 0)), f"{s.get('default', 0.5):.3f}",
                         "kept", "", ""))
            continue
        before, after = s["accuracy_default"], s["accuracy_fitted"]
        rows.append((f"calibrate {name}", f"accuracy (threshold {s['threshold']:.3f}, ECE {s['ece']:.3f})",
                     str(s["n"]), f"{before:.3f}", f"{after:.3f}", f"{after - before:+.3f}", ""))
        if "joint" in s:  # the stated stage refitted the similarity gate with the check
            j = s["joint"]
            rows.append(("calibrate gate + check", f"abstention {j['abstention_unanswerable']:.2f} at false "
                         f"abstention {j['false_abstention']:.2f} (similarity {j['similarity']:.3f}, stated "
                         f"{j['stated']:.3f})", str(len(s.get("rows", []))), "", f"{j['accuracy']:.3f}", "", ""))
            cv = j.get("cross_validated")
            if cv:  # the same fit on k − 1 folds, applied to the fold left out: the estimate for new questions
                rows.append(("  out of sample", f"abstention {cv['abstention_unanswerable']:.2f} at false abstention "
                             f"{cv['false_abstention']:.2f} ({cv['folds']}-fold, {cv['repeats']} shuffles)",
                             str(cv["n"]), "", "", "", ""))
    return rows


def crag_rows(s: dict[str, Any]) -> list[tuple[str, str, str, str, str, str, str]]:
    """The table rows of CRAG's calibrate stage (:mod:`optimize.calibrate_crag`): its thresholds before and
    after, and the shares of irrelevant passages trusted and relevant ones dropped at each."""
    start, n = s.get("start") or {}, str(s.get("n", 0))
    before = f"{start.get('upper', 0):g} / {start.get('lower', 0):g}"
    name = "calibrate crag" + (f" ({s['language']} questions)" if s.get("language") else "")
    if "upper" not in s:
        return [(name, f"upper / lower on the {s.get('score', 'expected')} score", n, before, "kept", "", "")]
    auc = s.get(f"auc_{s['score']}")
    rows = [(name, f"upper / lower on the {s['score']} score" + (f" (ROC AUC {auc:.3f})" if auc else ""),
             n, before, f"{s['upper']:g} / {s['lower']:g}", "", "")]
    for label, key, target in (("irrelevant trusted", "irrelevant_correct", s.get("max_trusted")),
                               ("relevant dropped", "relevant_incorrect", s.get("max_dropped"))):
        was, now = s["routing_start"][key], s["routing_fitted"][key]
        rows.append((f"  {label}", f"share (target <= {target:g})", n, f"{was:.3f}", f"{now:.3f}", f"{now - was:+.3f}", ""))
    return rows
