"""Where the prompt tokens go: per program and trace step, from an evaluation run's results.

Reads ``reports/<run-id>/results.jsonl`` (``selfrag eval``) and prints, for each program, each LM
step's share of the prompt tokens: calls per question, mean prompt tokens per call, the share the
llama.cpp prefix cache reused, and tokens per question. Counts come from the trace, so they do not
depend on machine load.

Run: ``.venv/bin/python bench/bench_tokens.py RUN_ID [--reports reports]``
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def breakdown(rows: list[dict]) -> dict[str, dict[str, dict[str, float]]]:
    """program → step → {calls, prompt, cached, completion} summed over its questions (+ ``_questions``)."""
    out: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(float)))
    for row in rows:
        if row.get("task", "qa") != "qa" or not row.get("ok"):
            continue
        prog = out[row["program"]]
        prog["_questions"]["n"] += 1
        for step in (row.get("result") or {}).get("trace") or []:
            calls = step.get("lm_calls") or 0
            if not calls:
                continue
            s = prog[step["step"]]
            s["calls"] += calls
            s["prompt"] += step.get("prompt_tokens") or 0
            s["cached"] += step.get("cached_tokens") or 0
            s["completion"] += step.get("completion_tokens") or 0
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_id")
    ap.add_argument("--reports", default="reports")
    args = ap.parse_args()
    path = Path(args.reports) / args.run_id / "results.jsonl"
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a torn last line of a run still going
    for program, steps in breakdown(rows).items():
        n = steps.pop("_questions")["n"] or 1
        total = sum(s["prompt"] for s in steps.values()) or 1
        print(f"\n{program}: {int(n)} questions, {total / n:,.0f} prompt tokens per question")
        print("| step | calls/q | prompt tok/call | prompt tok/q | share | cache-reused |")
        print("|---|---|---|---|---|---|")
        for name, s in sorted(steps.items(), key=lambda kv: -kv[1]["prompt"]):
            per_call = s["prompt"] / s["calls"] if s["calls"] else 0
            cached = s["cached"] / s["prompt"] if s["prompt"] else 0
            print(f"| {name} | {s['calls'] / n:.2f} | {per_call:,.0f} | {s['prompt'] / n:,.0f} | "
                  f"{s['prompt'] / total:.0%} | {cached:.0%} |")


if __name__ == "__main__":
    main()
