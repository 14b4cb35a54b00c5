"""Label quality of `selfrag data derive` with ClapNQ treated as user data, against the hand-made splits.

    python scripts/example_user_data.py --out /tmp/cu            # Markdown pages + qa.jsonl from ClapNQ
    selfrag ingest /tmp/cu/docs --collection clapnq-user
    selfrag data derive /tmp/cu/qa.jsonl --collection clapnq-user --out /tmp/cu/derived
    .venv/bin/python bench/bench_derive_labels.py /tmp/cu/derived [/tmp/cu/derived-nogold ...]

No LM. Every derived relevance / support record is traced back to the ClapNQ passage its text came from
(the passage sharing most of its words), giving ``(question, passage, label)``; the hand-made splits
(``data/splits/{relevance,support}``, ClapNQ part) give the same triples. Per derived folder and task it
prints: the questions shared with the hand-made split, the (question, passage) pairs both label (shared
items) and the share on which the labels agree, how often the derived positive is the question's ClapNQ
gold passage, and how often a derived negative is (a label error by ClapNQ's own annotation).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.table import Table

from optimize.sources import normalize_question, read_clapnq, read_jsonl
from selfrag.paths import datasets_dir, splits_dir

POSITIVE = {"relevance": "relevant", "support": "fully"}


def passage_index(items) -> tuple[dict[str, set[str]], dict[str, str]]:
    """ClapNQ doc id → its words, and question → gold doc id (answerable questions)."""
    words = {it.doc_id: set(normalize_question(it.text).split()) for it in items}
    gold = {normalize_question(it.question): it.doc_id for it in items if it.answerable}
    return words, gold


def source_doc(text: str, words: dict[str, set[str]]) -> str:
    """The ClapNQ passage sharing the largest share of ``text``'s words."""
    mine = set(normalize_question(text).split())
    return max(words, key=lambda d: (len(mine & words[d]) / (len(mine) or 1), d))


def triples(records: list[dict], task: str, words: dict[str, set[str]]) -> dict[tuple[str, str, str], str]:
    """(question, doc id, answer kind) → label. The answer kind keeps apart support records on one passage."""
    out = {}
    for r in records:
        text = r["passage"] if task == "relevance" else r["passages"]
        kind = "" if task == "relevance" else r.get("how", "gold")
        if task == "support" and kind in ("unrelated_passage", "gold_answer", "gold"):
            kind = "gold"  # the gold answer, on whatever passage
        out[(normalize_question(r["question"]), source_doc(text, words), kind)] = str(r[task]).lower()
    return out


def handmade(task: str, folder: Path) -> list[dict]:
    rows = [r for split in ("train", "dev") for r in read_jsonl(folder / task / f"{split}.jsonl")]
    return [r for r in rows if r.get("source") == "clapnq"]


def derived_rows(task: str, folder: Path) -> list[dict]:
    return [r for split in ("train", "dev") for r in read_jsonl(folder / task / f"{split}.jsonl")]


def measure(folder: Path, task: str, words, gold, hand: dict) -> dict:
    rows = derived_rows(task, folder)
    mine = triples(rows, task, words)
    shared = [k for k in mine if k in hand]
    agree = sum(mine[k] == hand[k] for k in shared)
    pos = [(q, d) for (q, d, kind), lab in mine.items() if lab == POSITIVE[task]]
    neg = [(q, d) for (q, d, kind), lab in mine.items() if lab != POSITIVE[task] and kind in ("", "gold")]
    return {
        "questions": len({q for q, _, _ in mine}), "shared questions": len({q for q, _, _ in mine} & {q for q, _, _ in hand}),
        "records": len(rows), "labels": dict(sorted(Counter(mine.values()).items())),
        "shared items": len(shared), "agree": agree,
        "positive is gold": (sum(gold.get(q) == d for q, d in pos), len(pos)),
        "negative is gold": (sum(gold.get(q) == d for q, d in neg), len(neg)),
        "disagreements": [(k, mine[k], hand[k]) for k in shared if mine[k] != hand[k]][:3],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("derived", nargs="+", type=Path, help="derived data folders")
    parser.add_argument("--splits", type=Path, default=splits_dir())
    parser.add_argument("--datasets", type=Path, default=datasets_dir())
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON too")
    args = parser.parse_args(argv)
    words, gold = passage_index(read_clapnq(args.datasets))
    hand = {task: triples(handmade(task, args.splits), task, words) for task in POSITIVE}
    table = Table(title="derived labels vs the hand-made splits (ClapNQ as user data)")
    for col in ("folder", "task", "questions (shared)", "labels", "shared items", "agreement", "positive = gold",
                "negative = gold (error)"):
        table.add_column(col, justify="left" if col in ("folder", "task", "labels") else "right")
    results = {}
    for folder in args.derived:
        for task in POSITIVE:
            m = measure(folder, task, words, gold, hand[task])
            results[f"{folder.name}/{task}"] = m
            pg, pn = m["positive is gold"]
            ng, nn = m["negative is gold"]
            table.add_row(folder.name, task, f"{m['questions']} ({m['shared questions']})",
                          " ".join(f"{k}:{v}" for k, v in m["labels"].items()), str(m["shared items"]),
                          f"{m['agree'] / m['shared items']:.3f}" if m["shared items"] else "-",
                          f"{pg}/{pn} ({pg / pn:.3f})" if pn else "-", f"{ng}/{nn}" if nn else "-")
    table.add_row("hand-made", "relevance / support", "", " / ".join(
        " ".join(f"{k}:{v}" for k, v in sorted(Counter(hand[t].values()).items())) for t in POSITIVE), "", "", "", "")
    Console(width=200).print(table)
    if args.json:
        print(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
