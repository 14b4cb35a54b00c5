"""Which signal in a program's trace tells an answerable question from an unanswerable one?

    .venv/bin/python bench/bench_answerability.py RUN_ID [--reports reports] [--max-false-abstention 0.1]

Abstention is only as good as the score it thresholds. For every program of an eval run (``selfrag
eval``; a stopped run works too), this reads each question's trace and scores the signals a program
could abstain on: the best relevance probability of the graded passages, their mean, the support
judge's expected support P(fully) + 0.5 P(partially) of the first and of the best draft, the drafter's
P(answerable), the candidate confidence the program used, the answer check's P(stated) (first round), the
score the program routed on (P(stated) mixed with the similarity by ``stated_similarity_weight``) and
the first retrieval's top dense similarity (the similarity gate's signal), and the mean and minimum
log-probability of the first draft's answer tokens (questions that reached a draft). For each it prints the ROC AUC of
answerable vs unanswerable (0.5 = no information) and the best abstention on unanswerable questions
any threshold reaches while keeping false abstention (answerable questions abstained on) at or below
the bound. No LM.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sklearn.metrics import roc_auc_score

Row = dict[str, Any]


def _steps(row: Row, name: str) -> list[dict[str, Any]]:
    trace = (row.get("result") or {}).get("trace") or []
    return [s for s in trace if s.get("step") == name and s.get("probs")]


def _relevance(row: Row) -> list[float]:
    return [float(s["probs"].get("relevant", 0.0)) for s in _steps(row, "grade_relevance")]


def _support(row: Row) -> list[float]:
    return [float(s["probs"].get("fully", 0.0)) + 0.5 * float(s["probs"].get("partially", 0.0))
            for s in _steps(row, "judge_support")]


def _similarities(row: Row) -> list[float]:
    trace = (row.get("result") or {}).get("trace") or []
    return [float(s["inputs"]["top_similarity"]) for s in trace
            if s.get("step") == "retrieve" and "top_similarity" in (s.get("inputs") or {})]


def _stated_scores(row: Row) -> list[float]:
    trace = (row.get("result") or {}).get("trace") or []
    return [float(s["inputs"]["stated_score"]) for s in trace
            if s.get("step") == "route" and "stated_score" in (s.get("inputs") or {})]


def _draft_logprob(row: Row, key: str) -> float | None:
    """The first draft's answer-token log-probability statistic (``mean`` or ``min``), if recorded."""
    trace = (row.get("result") or {}).get("trace") or []
    return _first([float(s["text_logprob"][key]) for s in trace
                   if s.get("step") == "generate_answer" and s.get("text_logprob")])


def _first(values: list[float]) -> float | None:
    return values[0] if values else None


SIGNALS: dict[str, Callable[[Row], float | None]] = {
    "max P(relevant)": lambda r: max(_relevance(r), default=None),
    "mean P(relevant)": lambda r: (sum(v) / len(v)) if (v := _relevance(r)) else None,
    "support, first draft": lambda r: _first(_support(r)),
    "support, best draft": lambda r: max(_support(r), default=None),
    "drafter P(answerable)": lambda r: _first([float(s["probs"].get("true", 0.0))
                                              for s in _steps(r, "generate_answer")]),
    "confidence used": lambda r: (r.get("result") or {}).get("confidence"),
    "top dense similarity": lambda r: _first(_similarities(r)),
    "answer check P(stated)": lambda r: _first([float(s["probs"].get("yes", 0.0)) for s in _steps(r, "check_answer")]),
    "answer check score": lambda r: _first(_stated_scores(r)),  # P(stated) mixed with the similarity, as routed
    "draft answer mean token logprob": lambda r: _draft_logprob(r, "mean"),
    "draft answer min token logprob": lambda r: _draft_logprob(r, "min"),
}


def best_abstention(answerable: list[float], unanswerable: list[float], max_false: float) -> tuple[float, float]:
    """The highest share of unanswerable scores below a threshold whose share of answerable scores
    below it stays ≤ ``max_false``; returns (abstention on unanswerable, threshold)."""
    best = (0.0, 0.0)
    for t in sorted(set(answerable) | set(unanswerable)) + [float("inf")]:
        false = sum(a < t for a in answerable) / len(answerable)
        if false <= max_false:
            hit = sum(u < t for u in unanswerable) / len(unanswerable)
            if hit > best[0]:
                best = (hit, t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_id")
    ap.add_argument("--reports", default="reports")
    ap.add_argument("--max-false-abstention", type=float, default=0.1)
    args = ap.parse_args()
    path = Path(args.reports) / args.run_id / "results.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    by_program: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        if row.get("task", "qa") == "qa" and row.get("ok", True) and "answerable" in row:
            by_program[row["program"]].append(row)
    print(f"run {args.run_id}: AUC of answerable vs unanswerable, and the best abstention on unanswerable "
          f"at false abstention ≤ {args.max_false_abstention:g}")
    print("| program | signal | n (ans/unans) | AUC | best abstention | at threshold |")
    print("|---|---|---|---:|---:|---:|")
    for program, prog_rows in by_program.items():
        for name, signal in SIGNALS.items():
            scored = [(bool(r["answerable"]), signal(r)) for r in prog_rows]
            scored = [(y, float(v)) for y, v in scored if v is not None]
            ans = [v for y, v in scored if y]
            unans = [v for y, v in scored if not y]
            if not ans or not unans:
                continue
            auc = roc_auc_score([1] * len(ans) + [0] * len(unans), ans + unans)
            hit, t = best_abstention(ans, unans, args.max_false_abstention)
            print(f"| {program} | {name} | {len(ans)}/{len(unans)} | {auc:.2f} | {hit:.2f} | {t:.3f} |")


if __name__ == "__main__":
    main()
