"""Seconds, LM calls and tokens per question for `selfrag ask` on demo questions (one process, one model load).

    .venv/bin/python bench/bench_ask.py [--profile local] [--threads 2] [--strategy selfrag]

Uses a throwaway knowledge base under a temporary directory (ingests the demo corpus). Prints a table.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from rich.console import Console
from rich.table import Table

from selfrag.paths import offline_environment

QUESTIONS = [
    "What is the range of the Heron cargo bike?",
    "How long is the warranty on the frame?",
    "What is 17 times 3?",
]


def main() -> None:
    offline_environment()
    from selfrag.settings import resolve
    from selfrag.wiring import build_runtime

    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="local")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--strategy", default="selfrag")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        settings = resolve({"lm": {"profile": args.profile, "threads": args.threads},
                            "kb": {"path": os.path.join(tmp, "kb")}, "program": {"strategy": args.strategy}})
        t0 = time.perf_counter()
        runtime = build_runtime(settings, demo=True)  # a temporary knowledge base: give it the demo corpus
        setup = time.perf_counter() - t0
        table = Table(title=f"ask on demo questions ({args.profile}, {args.strategy}, threads={args.threads})")
        for col in ("question", "answer", "retrieved", "abstained", "support", "LM calls", "prompt tok",
                    "compl tok", "seconds"):
            table.add_column(col, overflow="fold")
        for q in QUESTIONS:
            r = runtime.program(question=q).result
            table.add_row(q, r.answer[:80], str(r.retrieved), str(r.abstained), str(r.supported),
                          str(r.usage.lm_calls), str(r.usage.prompt_tokens), str(r.usage.completion_tokens),
                          f"{r.seconds:.1f}")
        Console(width=220).print(table)
        Console().print(f"set-up (KB build + demo ingest + program wiring): {setup:.1f} s")


if __name__ == "__main__":
    main()
