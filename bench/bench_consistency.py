"""Does the drafter answer the same way each time it is asked? Sampled drafts as an answerability signal.

    .venv/bin/python bench/bench_consistency.py [--split dev] [--limit 100] [--samples 3] [--temperature 0.7]
                                                [--profile local] [--program ARTIFACT] [--rows OUT.json]
    .venv/bin/python bench/bench_consistency.py --from-rows OUT.json ... [--check-rows CHECK.json ...]
                                                [--calibration MANIFEST ... [--stage stated@e5-small@en]]

SelfCheckGPT's observation: a model that knows the answer — here, reads it in the passages — gives it again
when sampled; one that guesses gives a different guess each time. On the same passages the program's first
draft reads (balanced ``qa_en``, as ``bench_check_variants.py`` takes them), this bench drafts once greedily
(the program's draft) and ``--samples`` more times at ``--temperature`` (a fresh ``rollout_id`` each: the
same prompt, which llama.cpp's prefix cache evaluates once, so a sample costs its generated tokens in time
but its prompt tokens in the count). Per question:

* ``agree`` — the mean token F1 of each sample's answer with the greedy draft's (a sample that declines,
  fails or says the passages do not answer scores 0; a greedy draft that declines scores 0: the program
  abstains on it anyway);
* ``answered`` — the share of samples that gave an answer;
* ``p_answerable`` — the drafter's own P(answerable) on the greedy draft (free; measured before: weak).

With ``--check-rows`` (rows of ``bench_check_variants.py --rows`` on the same split and limit: the same
questions in the same order, checked by label and top similarity) each row gains the answer check's
``stated``; with ``--calibration`` the rows are paired with the calibration rows of their questions
(``bench_check_variants.pair_with_calibration``) and each signal, and the answer check combined with the
agreement, stands in for P(stated) in the rule calibrate fits (similarity gate + weighted check, 5-fold).
No LM after the run.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bench_check_variants import (_abstention, _auc, _cv_combined, calibration_rows, pair_with_calibration, read_json,
                                  report_rule, rule_table)

SIGNALS = ("agree", "answered", "p_answerable")


def agreement(greedy: str | None, samples: list[str | None]) -> float:
    """The mean token F1 of ``samples`` with ``greedy``; a missing answer (declined or failed) scores 0, and
    every sample scores 0 when the greedy draft is missing."""
    from optimize.metrics import token_f1

    if not greedy or not samples:
        return 0.0
    return sum(token_f1(s, greedy) if s else 0.0 for s in samples) / len(samples)


def _p_answerable(tracer) -> float | None:
    """P(answerable = true) the last draft step recorded (the drafter's own, from its log-probabilities)."""
    drafts = [s for s in tracer.steps if s.step == "generate_answer"]
    probs = drafts[-1].probs if drafts else None
    return None if not probs else probs.get("true")


def draft_samples(program, tracer, question: str, passages: list, samples: int, temperature: float) -> dict:
    """The greedy draft of ``passages`` and ``samples`` sampled ones (``rollout_id`` 1..n at ``temperature``),
    through the program's own draft step; the row fields of this bench."""
    greedy = program._draft(tracer, question, passages)
    p_answerable = _p_answerable(tracer)
    answers: list[str | None] = []
    for i in range(samples):
        cand = program._draft(tracer, question, passages, config={"rollout_id": i + 1, "temperature": temperature})
        answers.append(None if cand is None else cand.answer)
    draft = None if greedy is None else greedy.answer
    return {"draft": draft, "samples": answers, "p_answerable": p_answerable, "agree": agreement(draft, answers),
            "answered": sum(a is not None for a in answers) / max(1, samples)}


def merge_check_rows(rows: list[dict], check_rows: list[dict]) -> list[dict]:
    """``rows`` with the answer check's ``stated`` of ``check_rows`` (another bench's rows on the same questions,
    in the same order); a one-line ValueError at the first question whose label or top similarity differ."""
    if len(check_rows) < len(rows):
        raise ValueError(f"{len(check_rows)} check rows for {len(rows)} questions")
    merged = []
    for i, (row, check) in enumerate(zip(rows, check_rows)):
        sims = (row.get("top_similarity"), check.get("top_similarity"))
        same_sim = sims[0] == sims[1] or None not in sims and abs(sims[0] - sims[1]) < 1e-6
        if bool(row["answerable"]) != bool(check["answerable"]) or not same_sim:
            raise ValueError(f"question {i + 1}: the check rows are about other questions "
                             f"(answerable {check['answerable']}, top similarity {check.get('top_similarity')})")
        merged.append({**row, "stated": check.get("stated")})
    return merged


COMBINED = ("stated × agree", "stated × (0.5 + agree/2)")
RULE_SIGNALS = ("stated", *SIGNALS, *COMBINED)


def combined_signals(row: dict) -> dict[str, float | None]:
    """The signals a row offers the calibrated rule in place of P(stated): each alone, and the answer check
    and the agreement together (their product; their geometric mean orders the same way)."""
    out = {name: row.get(name) for name in ("stated", *SIGNALS) if name in row}
    if row.get("stated") is not None:
        agree = row.get("agree") or 0.0
        out.update(zip(COMBINED, (row["stated"] * agree, row["stated"] * (0.5 + 0.5 * agree))))
    return out


def signal_rows(rows: list[dict], bound: float) -> list[tuple[str, float, float]]:
    """(signal, ROC AUC, best abstention at false abstention ≤ ``bound``) for each signal alone, and for the
    signals with the top similarity by a cross-validated logistic regression."""
    labels = [bool(r["answerable"]) for r in rows]
    sim = [r.get("top_similarity") or 0.0 for r in rows]
    names = [n for n in ("stated", *SIGNALS) if n in rows[0]]
    signals = {"top similarity": sim, **{n: [r.get(n) or 0.0 for r in rows] for n in names}}
    for n in names:
        signals[f"{n} + similarity (cv)"] = _cv_combined([signals[n], sim], labels)
    if "stated" in names:
        signals["stated + agree + similarity (cv)"] = _cv_combined([signals["stated"], signals["agree"], sim], labels)
    return [(n, _auc(s, labels), _abstention(s, labels, bound)) for n, s in signals.items()]


def rule_rows(pairs: list[tuple[dict, dict]], bound: float, confidence: float) -> list[tuple[str, float, float]]:
    """(signal, abstention, false abstention): each of :func:`combined_signals` standing in for P(stated) in the
    calibrated gate + weighted check, with the calibration rows' similarity, 5-fold."""
    return rule_table(with_combined(pairs), bound, confidence, RULE_SIGNALS)


def with_combined(pairs: list[tuple[dict, dict]]) -> list[tuple[dict, dict]]:
    """Each pair with its row's combined signals (:func:`combined_signals`) added to the row."""
    return [({**row, **combined_signals(row)}, cal) for row, cal in pairs]


def report(rows: list[dict], cost: list[int], bound: float) -> None:
    labels = [r["answerable"] for r in rows]
    print(f"\n{len(rows)} questions, {sum(labels)} answerable; abstention at false abstention ≤ {bound}\n")
    print(f"{'signal':34} {'AUC':>6} {'abstain':>8}")
    for name, auc, abstain in signal_rows(rows, bound):
        print(f"{name:34} {auc:6.3f} {abstain:8.2f}")
    if cost:
        print(f"\ndrafts: {cost[0] / max(1, len(rows)):.2f} LM calls, {cost[1] / max(1, len(rows)):.0f} prompt tokens "
              f"({cost[2] / max(1, len(rows)):.0f} reused from the cache) per question")


def main() -> None:
    from judge_program import add_model_args, judge_program

    ap = argparse.ArgumentParser()
    add_model_args(ap)
    ap.add_argument("--split", default="dev")
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("--samples", type=int, default=3)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--max-false-abstention", type=float, default=0.1)
    ap.add_argument("--rows", default="", help="write the per-question rows to this JSON file")
    ap.add_argument("--from-rows", action="append", default=[], help="report rows written by --rows (repeatable)")
    ap.add_argument("--check-rows", action="append", default=[],
                    help="bench_check_variants rows of the same questions, in the same order (one per --from-rows)")
    ap.add_argument("--calibration", action="append", default=[], help="compile manifests with calibration rows")
    ap.add_argument("--stage", default="stated@e5-small@en")
    ap.add_argument("--confidence", type=float, default=0.8)
    args = ap.parse_args()
    if args.samples < 1:
        ap.error("--samples: at least 1")
    if args.from_rows:
        if args.check_rows and len(args.check_rows) != len(args.from_rows):
            ap.error("--check-rows: give one per --from-rows, in the same order")
        rows = []
        for i, path in enumerate(args.from_rows):
            part = read_json(ap, path)
            if args.check_rows:
                try:
                    part = merge_check_rows(part, read_json(ap, args.check_rows[i]))
                except ValueError as exc:
                    ap.error(f"{args.check_rows[i]}: {exc}")
            rows += part
        report(rows, [], args.max_false_abstention)
        if args.calibration:
            if not args.check_rows:
                ap.error("--calibration: needs --check-rows (rows pair with calibration rows by their P(stated))")
            cal = [r for f in args.calibration for r in calibration_rows(ap, f, args.stage)]
            pairs = with_combined(pair_with_calibration(rows, cal))
            report_rule(pairs, args.max_false_abstention, args.confidence, RULE_SIGNALS)
        return
    program = judge_program(args)

    from optimize.eval_examples import balanced
    from optimize.splits import load_split
    from optimize.stages import E2E_COLLECTION, e2e_retriever
    from programs.thresholds import top_similarity
    from programs.tracing import Tracer
    from selfrag import paths, wiring
    from selfrag.settings import resolve

    settings = resolve({"lm": {"profile": args.profile, "threads": args.threads}})
    program.retriever = e2e_retriever(lambda name: wiring.build_knowledge_base(settings, collection=name),
                                      paths.datasets_dir(), None, E2E_COLLECTION,
                                      lambda kb: wiring.build_retriever(settings, kb))
    examples = balanced(balanced(load_split("qa_en", args.split, paths.splits_dir()), None), args.limit)
    rows, cost, start = [], [0, 0, 0], time.perf_counter()
    for i, ex in enumerate(examples):
        tracer = Tracer()
        passages = program._retrieve(tracer, ex.question, program.config.grade_pool or program.config.k)
        first = [p for p, _ in program._first([(p, 1.0) for p in passages])[0]] if passages else []
        row = {"question": ex.question, "answerable": bool(ex.answerable), "top_similarity": top_similarity(passages)}
        t = Tracer()
        row.update(draft_samples(program, t, ex.question, first, args.samples, args.temperature))
        cost[0] += t.usage.lm_calls
        cost[1] += t.usage.prompt_tokens
        cost[2] += sum(s.cached_tokens for s in t.steps)
        rows.append(row)
        print(f"{i + 1}/{len(examples)} {time.perf_counter() - start:.0f}s answerable={row['answerable']} "
              f"agree={row['agree']:.2f} draft={row['draft']!r} samples={row['samples']}", flush=True)
    if args.rows:
        Path(args.rows).write_text(json.dumps(rows, ensure_ascii=False, indent=1))
    report(rows, cost, args.max_false_abstention)


if __name__ == "__main__":
    main()
