"""Does the support judge earn its call after the answer check? Read from an eval run's traces; no LM.

    .venv/bin/python bench/bench_support_judge.py RUN_ID [RUN_ID ...] [--reports reports] [--qa FILE.jsonl]

Behind a passing answer check, a draft goes to the support judge unless the check was surer than the
``verified`` threshold. For each run (``selfrag eval``, one program) this reports, over the questions whose
trace has a support call, how well the judge's confidence P(fully) + 0.5·P(partially) separates answerable
from unanswerable questions and right answers (F1 ≥ 0.3 on an answerable question) from the rest (ROC AUC),
and what share of the run's prompt tokens it took. Then it replays the run as if the check stood in for the
judge on every draft (``verified`` 0, ``selfrag compile --verified-precision 0``): such a question keeps its
first draft — answered when P(stated) reaches the answer threshold (that draft's confidence), else abstained —
and costs the calls before the judge. The replay is exact for abstention, calls and tokens (greedy decoding:
the steps before the judge are the same); F1 of a changed answer is scored on the gold answers of the run's dataset
(ClapNQ or CMRC dev, or the QA file it was made from; ``--qa`` names another); a question without them is left
out of F1 and counted.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench_check_variants import _auc

RIGHT_F1 = 0.3


def _probs(step: dict[str, Any]) -> dict[str, float]:
    return step.get("probs") or {}


def _summary(outcomes: list[tuple[bool, bool, float | None, int, int]]) -> dict[str, float]:
    """Abstention, false abstention, F1 (answerable, known), prompt tokens and LM calls per question, of
    (answerable, abstained, F1, tokens, calls) per question."""
    un = [abstained for yes, abstained, *_ in outcomes if not yes]
    ans = [abstained for yes, abstained, *_ in outcomes if yes]
    f1s = [f1 for yes, _, f1, _, _ in outcomes if yes and f1 is not None]
    n = max(1, len(outcomes))
    return {"abstention": sum(un) / max(1, len(un)), "false_abstention": sum(ans) / max(1, len(ans)),
            "f1": sum(f1s) / max(1, len(f1s)), "tokens": sum(o[3] for o in outcomes) / n,
            "calls": sum(o[4] for o in outcomes) / n}


def replay(rows: list[dict[str, Any]], answer_threshold: float, gold: dict[str, list[str]]) -> dict[str, Any]:
    """The run as it was and as replayed with the check standing in for the support judge (module docstring)."""
    from optimize.metrics import token_f1

    conf, answerable, right, support_tokens, unknown_f1 = [], [], [], 0, 0
    actual, replayed = [], []
    for row in rows:
        steps, yes = row["result"]["trace"], bool(row["answerable"])
        names = [s.get("step") for s in steps]
        abstained, f1 = bool(row["abstained"]), float(row["scores"].get("f1") or 0.0)
        tokens, calls = row["usage"]["prompt_tokens"], row["usage"]["lm_calls"]
        actual.append((yes, abstained, f1, tokens, calls))
        if "judge_support" in names and "check_answer" in names and "generate_answer" in names:
            judge = names.index("judge_support")
            p_sup = _probs(steps[judge])
            conf.append(p_sup.get("fully", 0.0) + 0.5 * p_sup.get("partially", 0.0))
            answerable.append(yes)
            right.append(yes and f1 >= RIGHT_F1)
            support_tokens += sum(s.get("prompt_tokens") or 0 for s in steps if s.get("step") == "judge_support")
            abstained = _probs(steps[names.index("check_answer")]).get("yes", 0.0) < answer_threshold
            draft = str(steps[names.index("generate_answer")].get("output") or "")
            if abstained:
                f1 = 0.0
            elif draft != row["answer"]:
                golds = gold.get(str(row["id"]))
                f1 = max(token_f1(draft, g) for g in golds) if golds else None
                unknown_f1 += yes and f1 is None
            tokens = sum(s.get("prompt_tokens") or 0 for s in steps[:judge])
            calls = sum(s.get("lm_calls") or 0 for s in steps[:judge])
        replayed.append((yes, abstained, f1, tokens, calls))
    return {"questions": len(rows), "judged": len(conf),
            "auc_answerable": _auc(conf, answerable) if len(set(answerable)) == 2 else None,
            "auc_right": _auc(conf, right) if len(set(right)) == 2 else None,
            "support_token_share": support_tokens / max(1, sum(o[3] for o in actual)), "f1_unknown": unknown_f1,
            "actual": _summary(actual), "replayed": _summary(replayed)}


def _gold(dataset: str) -> dict[str, list[str]]:
    """Gold answers by question id of the run's ``dataset`` (clapnq, cmrc: their dev split; a QA file)."""
    from optimize.eval_examples import load_examples
    from optimize.metrics import gold_answers
    from selfrag import paths

    return {str(ex.id): gold_answers(ex) for ex in load_examples(dataset, paths.splits_dir())}


def _answer_threshold(config: dict[str, Any]) -> float:
    """The answer threshold the run's program used (the override, its artifact's, else the default)."""
    from programs.artifacts import read_artifact
    from programs.thresholds import Thresholds

    override = (config.get("program_settings") or {}).get("answer_threshold")
    if override is not None:
        return float(override)
    compiled = [str(p).split(":", 1)[1] for p in config.get("programs", []) if str(p).startswith("compiled:")]
    if compiled:
        return float(read_artifact(compiled[0]).get("thresholds", {}).get("answer", Thresholds().answer))
    return Thresholds().answer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--reports", default="reports")
    ap.add_argument("--qa", default="", help="the gold answers of changed drafts from this QA file (default: the "
                                             "run's dataset)")
    args = ap.parse_args()
    print("| run | questions | support judged | AUC vs answerable | AUC vs right answer | support's share of prompt "
          "tokens | as run: abstention / false abst. / F1 / tokens / calls | check standing in: abstention / "
          "false abst. / F1 / tokens / calls |")
    print("|---|---:|---:|---:|---:|---:|---|---|")
    for run in args.runs:
        run_dir = Path(args.reports) / run
        rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines() if line.strip()]
        config = json.loads((run_dir / "config.json").read_text())
        r = replay(rows, _answer_threshold(config), _gold(args.qa or config.get("dataset", "clapnq")))

        def fmt(s: dict[str, float]) -> str:
            return (f"{s['abstention']:.2f} / {s['false_abstention']:.2f} / {s['f1']:.3f} / {s['tokens']:,.0f} / "
                    f"{s['calls']:.2f}")

        auc = [f"{v:.3f}" if v is not None else "—" for v in (r["auc_answerable"], r["auc_right"])]
        unknown = f" ({r['f1_unknown']} F1 unknown)" if r["f1_unknown"] else ""
        print(f"| {run} | {r['questions']} | {r['judged']} | {auc[0]} | {auc[1]} | {r['support_token_share']:.2f} | "
              f"{fmt(r['actual'])} | {fmt(r['replayed'])}{unknown} |")


if __name__ == "__main__":
    main()
