"""The hybrid retrieve decision (cheap rules first, the model judge for the rest) on the retrieve dev split.

    .venv/bin/python bench/bench_retrieve_decision.py [--profile local] [--program artifacts/default.json] [--limit N]

Prints one table: questions, accuracy, no-retrieval questions that really skip retrieval (skip rate),
factual questions wrongly skipped, judge calls and prompt tokens, with the threshold in force (the
artifact's calibrated δ, else the default). Same program object as `selfrag ask` builds.
"""

from __future__ import annotations

import argparse
import time

from rich.console import Console
from rich.table import Table


def main() -> None:
    from judge_program import add_model_args, judge_program

    ap = argparse.ArgumentParser()
    add_model_args(ap)
    ap.add_argument("--split", default="dev")
    ap.add_argument("--limit", type=int, default=None)
    args = ap.parse_args()
    program = judge_program(args)
    from optimize.splits import load_split
    from selfrag import paths

    examples = load_split("retrieve", args.split, paths.splits_dir())[: args.limit]
    delta = program.thresholds.retrieve
    right = skipped_no = n_no = wrong_skip = by_rule = calls = tokens = 0
    start = time.perf_counter()
    for ex in examples:
        want = ex.decision != "no"
        rule, p, tracer = program.retrieve_probability(ex.question)
        calls += tracer.usage.lm_calls
        tokens += tracer.usage.prompt_tokens
        go = (rule == "yes") if rule is not None else (p is None or p >= delta)
        by_rule += rule is not None
        right += go == want
        if not want:
            n_no += 1
            skipped_no += not go
        wrong_skip += want and not go
    seconds = time.perf_counter() - start
    table = Table(title=f"retrieve decision on retrieve/{args.split} ({args.profile}, δ = {delta:.3f})")
    for col in ("questions", "accuracy", "no-retrieval skip rate", "factual wrongly skipped", "decided by rules",
                "judge calls", "prompt tokens", "seconds"):
        table.add_column(col, justify="right")
    n = len(examples)
    table.add_row(str(n), f"{right / n:.3f}", f"{skipped_no / n_no:.3f}" if n_no else "-", str(wrong_skip),
                  str(by_rule), str(calls), str(tokens), f"{seconds:.1f}")
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
