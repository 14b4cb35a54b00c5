"""How the cheap retrieve rules (programs/retrieve_rules.py) do on the labelled retrieve-decision data.

    .venv/bin/python bench/bench_retrieve_rules.py

No LM. For each file: factual (`yes`) questions the rules would wrongly skip (must be 0), `yes`
questions the documents rule sends straight to retrieval, the skip rate on `no` questions (judge
calls saved), and `no` questions the rules wrongly force to retrieve. Prints a table.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.table import Table

from programs.retrieve_rules import match_rule

ROOT = Path(__file__).resolve().parents[1]
FILES = ["data/splits/retrieve/train.jsonl", "data/splits/retrieve/dev.jsonl", "data/retrieve_decision.jsonl"]


def main() -> None:
    table = Table(title="retrieve rules on labelled questions")
    columns = ("file", "yes", "yes skipped (wrong)", "yes by rule", "no", "no skipped", "skip rate",
               "no → yes (wrong)", "rules fired")
    for col in columns:
        table.add_column(col, justify="left" if col in ("file", "rules fired") else "right")
    for name in FILES:
        rows = [json.loads(line) for line in (ROOT / name).read_text(encoding="utf-8").splitlines() if line.strip()]
        fired = Counter()
        cells = Counter()
        for row in rows:
            match = match_rule(row["question"])
            if match:
                fired[match.rule] += 1
            cells[(row["decision"], match.decision if match else None)] += 1
        n_yes = sum(v for (gold, _), v in cells.items() if gold == "yes")
        n_no = sum(v for (gold, _), v in cells.items() if gold == "no")
        table.add_row(name, str(n_yes), str(cells[("yes", "no")]), str(cells[("yes", "yes")]), str(n_no),
                      str(cells[("no", "no")]), f"{cells[('no', 'no')] / n_no:.2f}" if n_no else "-",
                      str(cells[("no", "yes")]), ", ".join(f"{k} {v}" for k, v in sorted(fired.items())))
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
