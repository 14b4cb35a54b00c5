"""How much of the gold answer the judges and the draft get to read: the passage window by size (no LM).

The answer check, the draft and the support judge read each passage as a window of ``program.passage_chars``
characters around the query terms (:func:`programs.passages.passage_window`), not the whole chunk. For the
answerable ``qa_en`` questions (balanced, as calibrate takes them) whose gold passage is among the first three
retrieved (what the first draft reads), this prints the share of the gold answer's words inside the window of each
size, and how often the window holds at least ``--enough`` of them, against the whole chunk:

    .venv/bin/python bench/bench_passage_window.py [--split train --limit 300] [--split dev --limit 100]
                                                   [--sizes 450,700,900,1200] [--language zh]
"""

from __future__ import annotations

import argparse
import re
from typing import Any

_WORD = re.compile(r"\w", re.UNICODE)


def words(text: str, language: str = "en") -> list[str]:
    """Lower-cased words (English) or characters (Chinese: no spaces between words)."""
    if language == "zh":
        return [c for c in text if _WORD.match(c)]
    return re.findall(r"\w+", text.lower())


def answer_recall(answer: str, text: str, language: str = "en") -> float:
    """The share of ``answer``'s words (with repeats) that occur in ``text``; 0 for an empty answer."""
    wanted = words(answer, language)
    have = set(words(text, language))
    return sum(w in have for w in wanted) / len(wanted) if wanted else 0.0


def measure(examples: list[Any], retriever: Any, sizes: list[int], language: str, k: int = 3) -> list[dict[str, Any]]:
    """Per answerable example: whether its gold passage is in the first ``k``, and if so the answer recall of
    the chunk and of its window at each size."""
    from programs.passages import passage_window

    rows = []
    for ex in examples:
        if not ex.answerable:
            continue
        gold_ids = set(ex.gold_doc_ids or [])
        gold = [p for p in retriever.retrieve(ex.question, k=k) if p.metadata.get("doc_id") in gold_ids]
        row: dict[str, Any] = {"id": ex.id, "gold_in_first": bool(gold)}
        if gold:
            text = gold[0].text
            row["chars"] = len(text)
            row["chunk"] = answer_recall(ex.answer, text, language)
            for size in sizes:
                row[str(size)] = answer_recall(ex.answer, passage_window(text, ex.question, size), language)
        rows.append(row)
    return rows


def report(rows: list[dict[str, Any]], sizes: list[int], enough: float, label: str) -> None:
    found = [r for r in rows if r["gold_in_first"]]
    if not found:
        print(f"{label}: no gold passage among the first three")
        return
    chars = sorted(r["chars"] for r in found)
    print(f"\n{label}: {len(rows)} answerable questions, gold passage in the first three for {len(found)} "
          f"(chunk length median {chars[len(chars) // 2]} characters)")
    print(f"| shown | mean share of the answer's words | questions with ≥ {enough:.0%} of them |")
    print("|---|---:|---:|")
    for key in [*map(str, sizes), "chunk"]:
        vals = [r[key] for r in found]
        name = "whole chunk" if key == "chunk" else f"window {key} chars"
        print(f"| {name} | {sum(vals) / len(vals):.3f} | {sum(v >= enough for v in vals) / len(vals):.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", action="append", default=[], help="split (repeatable, with --limit each)")
    ap.add_argument("--limit", action="append", type=int, default=[])
    ap.add_argument("--sizes", default="450,700,900,1200")
    ap.add_argument("--language", default="en", choices=["en", "zh"])
    ap.add_argument("--enough", type=float, default=0.8)
    args = ap.parse_args()
    splits = args.split or ["train", "dev"]
    limits = args.limit or [300, 100]
    if len(limits) != len(splits):
        ap.error("give one --limit per --split")
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]

    from bench_retrieval_signals import e2e_setup

    from optimize.eval_examples import balanced
    from optimize.splits import load_split
    from selfrag import paths

    _, retriever = e2e_setup(args.language)
    name = "qa_zh" if args.language == "zh" else "qa_en"
    for split, limit in zip(splits, limits):
        examples = balanced(load_split(name, split, paths.splits_dir()), limit)
        report(measure(examples, retriever, sizes, args.language), sizes, args.enough, f"{name} {split}")


if __name__ == "__main__":
    main()
