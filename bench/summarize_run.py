"""Summarise an eval run that was stopped before its end, on the questions every program finished.

    .venv/bin/python bench/summarize_run.py RUN_ID [--reports reports]

``selfrag eval`` interleaves programs question by question (``results.jsonl``), so a stopped run holds
the same questions for every program up to the last one started. This keeps the questions every
program answered, summarises them exactly as the finished run would (``optimize.eval_summary``) and
writes ``summary-partial.md`` next to the run's results; it prints the table. No LM.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from optimize.eval_calibration import calibration_markdown, calibration_summary
from optimize.eval_reports import render_markdown
from optimize.eval_summary import summarize


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_id")
    ap.add_argument("--reports", default="reports")
    args = ap.parse_args()
    run = Path(args.reports) / args.run_id
    config = json.loads((run / "config.json").read_text(encoding="utf-8"))
    programs = list(config["programs"])
    rows = [json.loads(line) for line in (run / "results.jsonl").read_text(encoding="utf-8").splitlines() if line]
    done: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        if row.get("task", "qa") == "qa":
            done[row["id"]].add(row["program"])
    complete = {qid for qid, progs in done.items() if progs >= set(programs)}
    kept = [r for r in rows if r.get("task", "qa") != "qa" or r["id"] in complete]
    meta = {"run_id": args.run_id, "dataset": config.get("dataset"), "examples": len(complete),
            "note": f"partial: {len(complete)} of {len(config.get('example_ids', []))} questions finished by every program"}
    summary = summarize(kept, programs, meta)
    summary["calibration"] = calibration_summary(kept, programs)
    text = render_markdown(summary) + calibration_markdown(summary["calibration"])
    (run / "summary-partial.md").write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
