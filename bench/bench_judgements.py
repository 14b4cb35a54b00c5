"""Each judgement's accuracy and macro F1 on its dev split, English and Chinese side by side.

    .venv/bin/python bench/bench_judgements.py [--profile local] [--program artifacts/default.json]
        [--languages en,zh] [--limit 30] [--judgements retrieve,relevance,support,usefulness]

The judges are the program's own predictors (the artifact's instructions and demos), run as
``selfrag compile`` scores them (``optimize.dev_score``). English reads ``retrieve``, ``relevance``,
``support``, ``usefulness``; Chinese the CMRC-derived ``*_zh`` sets (``optimize.records_zh``). Prints one
table: judgement, language, examples, accuracy, macro F1 over the gold labels (usefulness: over useful /
not useful, the side of 3 its tolerant metric reads), errors, seconds, and the confusion ``gold->predicted``.
"""

from __future__ import annotations

import argparse
from collections import Counter

from rich.console import Console
from rich.table import Table


def side(label: str) -> str:
    """A usefulness rating as the tolerant metric reads it: the side of 3 it is on."""
    try:
        return "useful" if float(label) >= 3 else "not useful"
    except ValueError:
        return label


def macro_f1(confusion: dict[str, int], collapse=lambda label: label) -> float | None:
    """Macro F1 over the gold labels of a ``gold->predicted`` count (a failed call predicts ``error``);
    ``collapse`` maps labels first (usefulness: :func:`side`)."""
    pairs: Counter = Counter()
    for key, n in confusion.items():
        gold, _, pred = key.partition("->")
        pairs[(collapse(gold), collapse(pred))] += n
    labels = sorted({g for g, _ in pairs})
    if not labels:
        return None
    scores = []
    for label in labels:
        tp = pairs[(label, label)]
        fp = sum(n for (g, p), n in pairs.items() if p == label and g != label)
        fn = sum(n for (g, p), n in pairs.items() if g == label and p != label)
        scores.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return sum(scores) / len(scores)


def main() -> None:
    from judge_program import add_model_args, judge_program

    ap = argparse.ArgumentParser()
    add_model_args(ap)
    ap.add_argument("--languages", default="en,zh")
    ap.add_argument("--judgements", default="retrieve,relevance,support,usefulness")
    ap.add_argument("--limit", type=int, default=30, help="dev examples per judgement and language (seeded sample)")
    args = ap.parse_args()
    program = judge_program(args)
    import dspy

    from optimize.dev_score import score_on_dev
    from optimize.judgements import JUDGEMENTS, JudgementModule, sample_split
    from optimize.splits import language_loader, load_split
    from selfrag import paths

    table = Table(title=f"judgements on their dev splits ({args.profile}, {args.program or 'uncompiled'})")
    for col in ("judgement", "lang", "n", "accuracy", "macro F1", "errors", "s", "gold->predicted"):
        table.add_column(col, justify="left" if col in ("judgement", "lang", "gold->predicted") else "right")
    base = lambda task, split: load_split(task, split, paths.splits_dir())  # noqa: E731
    for name in [j.strip() for j in args.judgements.split(",") if j.strip()]:
        spec = JUDGEMENTS[name]
        for language in [x.strip() for x in args.languages.split(",") if x.strip()]:
            devset = sample_split(spec.task, "dev", args.limit, language_loader(base, language))
            module = JudgementModule(spec.predictor, getattr(program, spec.predictor).deepcopy())
            with dspy.context(lm=program.critic_lm, adapter=program.adapter):
                score = score_on_dev(module, devset, spec.metric, label=spec.label)
            f1 = macro_f1(score.confusion, side if name == "usefulness" else (lambda label: label))
            table.add_row(name, language, str(score.n), f"{score.score:.3f}", "-" if f1 is None else f"{f1:.3f}",
                          str(score.errors), f"{score.seconds:.0f}",
                          " ".join(f"{k}:{v}" for k, v in score.confusion.items()))
    Console(width=200).print(table)


if __name__ == "__main__":
    main()
