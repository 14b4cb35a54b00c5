"""CRAG's retrieval evaluator on labelled passages: does its argmax score or its expected score tell
relevant from irrelevant passages better, and how do CRAG's thresholds split them?

    .venv/bin/python bench/bench_crag_evaluator.py [--profile local] [--languages en,zh] [--limit 40]
        [--split dev] [--rows OUT.json] [--from-rows ROWS.json] [--fit-rows TRAIN_ROWS.json ...]

The shipped thresholds (``program.crag_upper`` 6.64, ``crag_lower`` 5.84) are fitted on the kept rows of both
splits, English and Chinese, 40 passages each (the local model, uncompiled evaluator):

    .venv/bin/python bench/bench_crag_evaluator.py --from-rows bench/results/crag-evaluator-dev-rows.json \
        --fit-rows bench/results/crag-evaluator-train-rows.json --fit-rows bench/results/crag-evaluator-dev-rows.json

Chinese questions have their own (6.72 / 5.93, ``programs.thresholds.CRAG_DEFAULTS_BY_LANGUAGE``), fitted on the
160 Chinese rows: those two files' Chinese passages and the hard negatives of the Chinese worked example
(``crag-evaluator-zh-hard-{train,dev}-rows.json``, recorded by ``selfrag compile --program crag --calibrate
--data DIR``; ``--languages zh`` keeps the Chinese rows of the files it reads).

The evaluator is CorrectiveRAG's own ``evaluate_retrieval`` predictor (uncompiled unless ``--program``
names a CRAG artifact), asked on a relevance split (``--split``; ``relevance`` and ``relevance_zh``: a question
with its gold passage or another question's) one passage per call, as CRAG asks it. Each call's probabilities
over the scores 0–10 give two scores: the **argmax** and the **expected** score E[score]. Prints per language:
the argmax at the paper's 7 / 4, the expected score at the program's default thresholds and, with
``--fit-rows`` (rows of other splits), at thresholds fitted on those rows (:func:`optimize.calibrate_crag.fit_crag_thresholds`, as ``selfrag compile --program crag --calibrate`` fits them: upper trusts
at most 10% of the irrelevant passages, lower drops at most 5% of the relevant ones — a dropped gold passage
costs more than a web search); for each, ROC AUC against gold relevance and how the thresholds route the
passages — relevant ones "correct" (≥ upper) and "incorrect" (< lower: the gold passage dropped), irrelevant
ones "incorrect" and "correct" (trusted without the web) — the expected score's ECE (E/10 against relevance)
and the cut with the best accuracy (in-sample: a hint, not a fit). ``--rows`` keeps the per-passage rows;
``--from-rows`` re-prints a table from kept rows without an LM call.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from judge_program import NoRetriever, add_model_args
from rich.console import Console
from rich.table import Table


def record_rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Ask the evaluator on each sampled passage (the calibrate stage's sample and rows,
    :mod:`optimize.calibrate_crag`); one row per passage (probabilities, gold)."""
    from selfrag.paths import offline_environment

    offline_environment()
    from optimize import calibrate_crag
    from optimize.judgements import seeded_sample
    from optimize.splits import language_loader, load_split
    from programs.artifacts import load_state_into
    from programs.registry import program_class
    from selfrag import paths, wiring
    from selfrag.settings import resolve

    settings = resolve({"lm": {"profile": args.profile, "threads": args.threads}})
    generator, critic, adapter = wiring.build_lms(settings)
    program = program_class("crag")(NoRetriever(), config=settings.program, generator_lm=generator,
                                    critic_lm=critic, adapter=adapter)
    if args.program:
        load_state_into(program, args.program)
    base = lambda task, split: load_split(task, split, paths.splits_dir())  # noqa: E731
    rows: list[dict[str, Any]] = []
    for language in [x.strip() for x in args.languages.split(",") if x.strip()]:
        examples = seeded_sample("relevance", args.split, args.limit, language_loader(base, language))
        rows += calibrate_crag.record_rows(program, examples, language)[0]
    return rows


def best_threshold(scores: list[float], gold: list[bool]) -> tuple[float, float]:
    """The cut (relevant when score ≥ cut) with the best accuracy, and that accuracy (calibrate's
    :func:`~optimize.calibration.fit_threshold` on score / 10)."""
    from optimize.calibration import fit_threshold

    fit = fit_threshold([v / 10 for v in scores], gold, "accuracy")
    return fit.threshold * 10, fit.point.accuracy


PAPER = (7, 4)  # CRAG's thresholds on the evaluator's argmax score (``crag_score = "argmax"``)


def summarize(rows: list[dict[str, Any]], upper: float | None = None, lower: float | None = None,
              fitted: tuple[float, float] | None = None,
              argmax_at: tuple[float, float] = PAPER) -> list[dict[str, Any]]:
    """Per language: ``argmax`` routed at ``argmax_at``, ``expected`` at (upper, lower) — unset: the program's
    defaults for questions in that language (:func:`programs.thresholds.default_crag`) — and
    ``expected_fitted`` at ``fitted``."""
    from sklearn.metrics import roc_auc_score

    from optimize.calibrate_crag import routing, scores_of
    from optimize.calibration import ece
    from programs.thresholds import default_crag

    out = []
    for language in sorted({r["language"] for r in rows}):
        scored = [(scores_of(r), r["relevant"]) for r in rows if r["language"] == language]
        ok = [(s, g) for s, g in scored if s is not None]
        gold = [g for _, g in ok]
        line: dict[str, Any] = {"language": language, "n": len(scored), "failed": len(scored) - len(ok)}
        if ok and 0 < sum(gold) < len(gold):
            default = default_crag(language)
            at = (default.upper if upper is None else upper, default.lower if lower is None else lower)
            variants = [("argmax", 0, argmax_at), ("expected", 1, at)]
            if fitted is not None:
                variants.append(("expected_fitted", 1, fitted))
            for name, i, (up, low) in variants:
                vals = [s[i] for s, _ in ok]
                cut, acc = best_threshold(vals, gold)
                line[name] = {"auc": round(float(roc_auc_score(gold, vals)), 3), "upper": up, "lower": low,
                              **routing(vals, gold, up, low), "best_cut": round(cut, 2), "best_accuracy": round(acc, 3)}
            line["expected_ece"] = round(ece([s[1] / 10 for s, _ in ok], gold), 3)
        out.append(line)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    add_model_args(ap)
    ap.set_defaults(program="")  # CRAG ships no artifact: its uncompiled evaluator
    ap.add_argument("--languages", default="en,zh")
    ap.add_argument("--split", default="dev", choices=["train", "dev"])
    ap.add_argument("--limit", type=int, default=40, help="passages per language (seeded sample, balanced splits)")
    ap.add_argument("--rows", type=Path, help="write the per-passage rows here")
    ap.add_argument("--from-rows", type=Path, help="summarize rows written by --rows (no LM call)")
    ap.add_argument("--fit-rows", type=Path, action="append",
                    help="fit the expected score's thresholds on these rows (another split; repeatable: pooled)")
    ap.add_argument("--max-trusted", type=float, default=0.1, help="fit: share of irrelevant passages upper may call correct")
    ap.add_argument("--max-dropped", type=float, default=0.05,
                    help="fit: share of relevant passages lower may call incorrect (a dropped gold passage costs more "
                         "than a web search)")
    args = ap.parse_args()
    from optimize.calibrate_crag import fit_crag_thresholds

    languages = {x.strip() for x in args.languages.split(",") if x.strip()}
    rows = json.loads(args.from_rows.read_text()) if args.from_rows else record_rows(args)
    if args.rows:
        args.rows.write_text(json.dumps(rows, ensure_ascii=False, indent=1))
    rows = [row for row in rows if row["language"] in languages]
    fit_rows = [row for path in args.fit_rows or [] for row in json.loads(path.read_text())
                if row["language"] in languages]
    fitted = fit_crag_thresholds(fit_rows, args.max_trusted, args.max_dropped) if fit_rows else None
    table = Table(title="CRAG evaluator on labelled passages (relevance splits)")
    for col in ("lang", "n", "failed", "score", "upper / lower", "ROC AUC", "rel. → correct", "rel. → incorrect",
                "irr. → incorrect", "irr. → correct", "best cut (acc.)", "ECE E/10"):
        table.add_column(col, justify="left" if col in ("lang", "score") else "right")
    for line in summarize(rows, fitted=fitted):
        for name in ("argmax", "expected", "expected_fitted"):
            m = line.get(name)
            if m is None:
                if name != "expected_fitted":
                    table.add_row(line["language"], str(line["n"]), str(line["failed"]), name, *["-"] * 8)
                continue
            table.add_row(line["language"], str(line["n"]), str(line["failed"]), name.replace("_", ", "),
                          f"{m['upper']:g} / {m['lower']:g}", f"{m['auc']:.3f}",
                          *(f"{m[k]:.2f}" for k in ("relevant_correct", "relevant_incorrect", "irrelevant_incorrect",
                                                    "irrelevant_correct")),
                          f"{m['best_cut']:g} ({m['best_accuracy']:.2f})",
                          f"{line['expected_ece']:.3f}" if name == "expected" else "")
    Console(width=220).print(table)
    if fitted is not None:
        print(f"fitted on {', '.join(map(str, args.fit_rows))} ({len(fit_rows)} passages): program.crag_score = \"expected\", crag_upper = {fitted[0]:g}, "
              f"crag_lower = {fitted[1]:g}")
    secs = [r["seconds"] for r in rows if r.get("seconds") is not None]
    if secs and not args.from_rows:
        print(f"{len(rows)} evaluator calls, {sum(secs) / len(secs):.1f} s each")


if __name__ == "__main__":
    main()
