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
the steps before the judge are the same); F1 of a changed answer needs the gold answers (``--qa``: the QA
file the run was made from; else the dev answers of the run's dataset, ClapNQ or CMRC), else it is left out
and counted.
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path
from typing import Any

from bench_check_variants import _auc

RIGHT_F1 = 0.3


def _steps(row: dict[str, Any]) -> list[dict[str, Any]]:
    trace = row["result"]["trace"]
    return trace if isinstance(trace, list) else trace["steps"]


def _probs(step: dict[str, Any]) -> dict[str, float]:
    p = step.get("probs")
    return (ast.literal_eval(p) if isinstance(p, str) else p) or {}


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def replay(rows: list[dict[str, Any]], answer_threshold: float, gold: dict[str, list[str]]) -> dict[str, Any]:
    """The run as it was and as replayed with the check standing in for the support judge (module docstring)."""
    from optimize.metrics import token_f1

    conf, answerable, right, support_tokens = [], [], [], 0
    out = {"actual": {"abstained": [], "f1": [], "tokens": [], "calls": []},
           "replayed": {"abstained": [], "f1": [], "tokens": [], "calls": []}}
    unknown_f1 = 0
    for row in rows:
        steps, yes = _steps(row), bool(row["answerable"])
        names = [s.get("step") for s in steps]
        abstained, f1 = bool(row["abstained"]), float(row["scores"].get("f1") or 0.0)
        tokens, calls = _int(row["usage"]["prompt_tokens"]), _int(row["usage"]["lm_calls"])
        out["actual"]["abstained"].append((yes, abstained))
        out["actual"]["f1"].append(f1 if yes else None)
        out["actual"]["tokens"].append(tokens)
        out["actual"]["calls"].append(calls)
        if "judge_support" in names and "check_answer" in names and "generate_answer" in names:
            judge = names.index("judge_support")
            p_sup = _probs(steps[judge])
            conf.append(p_sup.get("fully", 0.0) + 0.5 * p_sup.get("partially", 0.0))
            answerable.append(yes)
            right.append(yes and f1 >= RIGHT_F1)
            support_tokens += sum(_int(s.get("prompt_tokens")) for s in steps[judge:] if s.get("step") == "judge_support")
            p_stated = _probs(steps[names.index("check_answer")]).get("yes", 0.0)
            draft = str(steps[names.index("generate_answer")].get("output") or "")
            abstained = p_stated < answer_threshold
            if yes and not abstained and draft != row["answer"]:
                golds = gold.get(str(row["id"]))
                f1 = max((token_f1(draft, g) for g in golds), default=0.0) if golds else None
                unknown_f1 += f1 is None
            elif yes:
                f1 = 0.0 if abstained else f1
            tokens = sum(_int(s.get("prompt_tokens")) for s in steps[:judge])
            calls = sum(_int(s.get("lm_calls")) for s in steps[:judge])
        out["replayed"]["abstained"].append((yes, abstained))
        out["replayed"]["f1"].append(f1 if yes else None)
        out["replayed"]["tokens"].append(tokens)
        out["replayed"]["calls"].append(calls)

    def summary(side: dict[str, list]) -> dict[str, float]:
        un = [a for y, a in side["abstained"] if not y]
        ans = [a for y, a in side["abstained"] if y]
        f1s = [f for f in side["f1"] if f is not None]
        n = len(side["tokens"]) or 1
        return {"abstention": sum(un) / max(1, len(un)), "false_abstention": sum(ans) / max(1, len(ans)),
                "f1": sum(f1s) / max(1, len(f1s)), "tokens": sum(side["tokens"]) / n, "calls": sum(side["calls"]) / n}

    total_tokens = sum(out["actual"]["tokens"]) or 1
    return {"questions": len(rows), "judged": len(conf),
            "auc_answerable": _auc(conf, answerable) if len(set(answerable)) == 2 else None,
            "auc_right": _auc(conf, right) if len(set(right)) == 2 else None,
            "support_token_share": support_tokens / total_tokens, "f1_unknown": unknown_f1,
            "actual": summary(out["actual"]), "replayed": summary(out["replayed"])}


def _gold(qa: str | None, dataset: str = "clapnq") -> dict[str, list[str]]:
    """Gold answers by question id: of the QA file ``qa``, else of the dev split of the run's ``dataset``."""
    if qa:
        return {str(d["id"]): list(d.get("answers") or []) for d in map(json.loads, Path(qa).read_text().splitlines())
                if d.get("id") is not None}
    from optimize.splits import load_split
    from selfrag import paths

    task = "qa_zh" if dataset == "cmrc" else "qa_en"
    return {str(e.id): list(e.answers) for e in load_split(task, "dev", paths.splits_dir())}


def _answer_threshold(run_dir: Path) -> float:
    """The answer threshold the run's program used (its artifact's, else the default 0.5)."""
    config = json.loads((run_dir / "config.json").read_text())
    override = (config.get("program_settings") or {}).get("answer_threshold")
    if override is not None:
        return float(override)
    for label in config.get("programs", []):
        if str(label).startswith("compiled:"):
            artifact = json.loads(Path(str(label).split(":", 1)[1]).read_text())
            return float(artifact.get("thresholds", {}).get("answer", 0.5))
    return 0.5


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--reports", default="reports")
    ap.add_argument("--qa", default="", help="the QA file the runs were made from (gold answers of changed drafts)")
    args = ap.parse_args()
    print("| run | questions | support judged | AUC vs answerable | AUC vs right answer | support's share of prompt "
          "tokens | as run: abstention / false abst. / F1 / tokens / calls | check standing in: abstention / "
          "false abst. / F1 / tokens / calls |")
    print("|---|---:|---:|---:|---:|---:|---|---|")
    for run in args.runs:
        run_dir = Path(args.reports) / run
        rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines() if line.strip()]
        dataset = json.loads((run_dir / "config.json").read_text()).get("dataset", "clapnq")
        r = replay(rows, _answer_threshold(run_dir), _gold(args.qa or None, dataset))

        def fmt(s: dict[str, float]) -> str:
            return (f"{s['abstention']:.2f} / {s['false_abstention']:.2f} / {s['f1']:.3f} / {s['tokens']:,.0f} / "
                    f"{s['calls']:.2f}")

        auc = [f"{v:.3f}" if v is not None else "—" for v in (r["auc_answerable"], r["auc_right"])]
        unknown = f" ({r['f1_unknown']} F1 unknown)" if r["f1_unknown"] else ""
        print(f"| {run} | {r['questions']} | {r['judged']} | {auc[0]} | {auc[1]} | {r['support_token_share']:.2f} | "
              f"{fmt(r['actual'])} | {fmt(r['replayed'])}{unknown} |")


if __name__ == "__main__":
    main()
