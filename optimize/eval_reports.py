"""The report files of an evaluation: ``summary.json``, ``summary.md`` (one table row per program)
and ``quality_vs_cost.png`` (quality against seconds and tokens per question)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SUMMARY_JSON = "summary.json"
SUMMARY_MD = "summary.md"
PLOT = "quality_vs_cost.png"


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _triple(stats: dict[str, float | None], digits: int) -> str:
    return " / ".join(_fmt(None if stats[k] is None else float(stats[k]), digits) for k in ("mean", "p50", "p95"))


COLUMNS = (
    ("n", lambda s: s["questions"]),
    ("err", lambda s: s["errors"]),
    ("retrieve acc", lambda s: s["retrieve_accuracy"]),
    ("rel P", lambda s: s["relevance_precision"]),
    ("rel R", lambda s: s["relevance_recall"]),
    ("support acc", lambda s: s["support_accuracy"]),
    ("EM", lambda s: s["em"]),
    ("F1", lambda s: s["f1"]),
    ("sem F1", lambda s: s.get("semantic_f1")),
    ("e2e", lambda s: s["e2e"]),
    ("abstain unans.", lambda s: s["abstain_unanswerable"]),
    ("abstain ans.", lambda s: s["abstain_answerable"]),
    ("cite hit", lambda s: s["citation_hit"]),
    ("cite n", lambda s: s.get("citation_questions")),
    ("grounded", lambda s: s["groundedness"]),
    ("LM calls mean/p50/p95", lambda s: _triple(s["lm_calls"], 1)),
    ("prompt tok mean/p50/p95", lambda s: _triple(s["prompt_tokens"], 0)),
    ("compl. tok mean/p50/p95", lambda s: _triple(s["completion_tokens"], 0)),
    ("s mean/p50/p95", lambda s: _triple(s["seconds"], 1)),
)


def render_markdown(summary: dict[str, Any]) -> str:
    meta = summary.get("meta") or {}
    lines = [f"# Evaluation {meta.get('run_id', '')}".rstrip(), ""]
    for key in ("dataset", "examples", "profile", "model", "program_settings", "started", "finished"):
        if key in meta:
            lines.append(f"- {key}: {meta[key] if not isinstance(meta[key], dict) else json.dumps(meta[key])}")
    lines += ["", "| program | " + " | ".join(c for c, _ in COLUMNS) + " |",
              "|---|" + "---:|" * len(COLUMNS)]
    for name, s in summary["programs"].items():
        lines.append(f"| {name} | " + " | ".join(_fmt(fn(s)) for _, fn in COLUMNS) + " |")
    lines += ["", "EM/F1/cite hit on answerable questions (F1 over words; character-level, one token per CJK "
              "character, when the answer or the gold is Chinese; cite hit over the cite n of them with gold "
              "documents); e2e = F1 if answered (answerable) or 1 if abstained "
              "(unanswerable); rel P/R = relevance grader against gold passages over graded passages; "
              "grounded = answers the support judge accepted (fully/partially); errors are excluded from "
              "averages.", ""]
    return "\n".join(lines)


def plot(summary: dict[str, Any], path: Path | str) -> Path:
    """Quality (e2e, F1) against cost (mean seconds and mean tokens per question), one point per program."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for ax, (xlabel, xfn) in zip(axes, (
        ("mean wall seconds per question", lambda s: s["seconds"]["mean"]),
        ("mean LM tokens per question (prompt + completion)",
         lambda s: (s["prompt_tokens"]["mean"] or 0) + (s["completion_tokens"]["mean"] or 0)),
    )):
        for i, (name, s) in enumerate(summary["programs"].items()):
            x = xfn(s)
            if x is None or s["e2e"] is None:
                continue
            label = f"compiled:{Path(name[9:]).stem}" if name.startswith("compiled:") else name
            ax.scatter([x], [s["e2e"]], s=60, marker="o")
            # staggered labels: programs with equal quality often sit on one line
            ax.annotate(label, (x, s["e2e"]), textcoords="offset points", xytext=(5, 5 + 9 * (i % 4)), fontsize=8)
            if s["f1"] is not None:
                ax.scatter([x], [s["f1"]], s=30, marker="x", color="grey")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("quality (● e2e, × F1 on answerable)")
        ax.set_ylim(-0.05, 1.05)
        ax.grid(alpha=0.3)
    fig.suptitle(f"Quality against cost — {summary.get('meta', {}).get('run_id', '')}")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_reports(out_dir: Path | str, summary: dict[str, Any]) -> dict[str, Path]:
    out_dir = Path(out_dir)
    paths = {"summary_json": out_dir / SUMMARY_JSON, "summary_md": out_dir / SUMMARY_MD, "plot": out_dir / PLOT}
    paths["summary_json"].write_text(json.dumps(summary, indent=2, ensure_ascii=False, default=str) + "\n",
                                     encoding="utf-8")
    paths["summary_md"].write_text(render_markdown(summary), encoding="utf-8")
    plot(summary, paths["plot"])
    return paths
