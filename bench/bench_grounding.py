"""Does the draft come from the passages or from the model's memory? Pointwise mutual information of a draft.

For each question an eval run drafted on, the local model scores the draft's answer tokens (teacher-forced,
the program's own answer prompt: adapter, instructions and demos of the artifact) three ways:

- ``with``: the passages the draft read (the program's context, re-retrieved by id);
- ``empty``: the same prompt with no passages;
- ``closed``: the closed-book ``AnswerDirectly`` prompt (question only).

``pmi`` = mean log-probability with − without (empty) passages: an answer copied from the passages is much
likelier with them; an answer the model makes up from memory (a hallucination a yes/no judge lets through)
is about as likely without them. The table gives each signal's ROC AUC for answerable vs unanswerable
questions — over the drafted questions and over the answered ones (what a new abstention rule could still
catch) — alone and cross-validated together with the answer check's score, and the abstention a threshold on
it adds at the run's own false abstention + ``--extra-false-abstention``.

    python bench/bench_grounding.py RUN_ID [RUN_ID …] --rows bench/results/grounding.json
    python bench/bench_grounding.py --from-rows bench/results/grounding.json

Costs LM time (two to three scoring passes per drafted question, ~10 s each on 2 cores): one at a time.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from bench_check_variants import _auc, _cv_combined

SIGNALS = ("with", "empty", "closed", "pmi", "pmi_closed")


def drafted(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The questions of a run whose first draft was made: question, answerable, the draft, the passage ids it
    read, the answer check's route score and whether the run abstained."""
    out = []
    for row in rows:
        steps = (row.get("result") or {}).get("trace") or []
        names = [s.get("step") for s in steps]
        if "generate_answer" not in names:
            continue
        draft = steps[names.index("generate_answer")]
        if not draft.get("ok") or not str(draft.get("output") or "").strip():
            continue
        retrieve = [s for s in steps[: names.index("generate_answer")] if s.get("step") == "retrieve"]
        routes = [s for s in steps[: names.index("generate_answer")]
                  if s.get("step") == "route" and "stated_score" in (s.get("inputs") or {})]
        if not retrieve or not routes:
            continue
        out.append({"id": str(row["id"]), "question": row["question"], "answerable": bool(row["answerable"]),
                    "draft": str(draft["output"]), "ids": list(retrieve[-1].get("output") or []),
                    "shown": str((draft.get("inputs") or {}).get("passages", "")),
                    "stated_score": float(routes[-1]["inputs"]["stated_score"]),
                    "abstained": bool(row.get("abstained")), "text_logprob": draft.get("text_logprob")})
    return out


class Scorer:
    """Teacher-forced mean log-probability of an answer's tokens after a chat prompt, on the local GGUF."""

    def __init__(self, llama: Any, formatter: Any):
        self.llama, self.formatter = llama, formatter

    @classmethod
    def load(cls, model_path: str, threads: int, n_ctx: int = 4096) -> "Scorer":
        from llama_cpp import Llama
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        llama = Llama(model_path=model_path, n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads,
                      logits_all=True, verbose=False)
        eos = llama.detokenize([llama.token_eos()]).decode("utf-8", "ignore")
        return cls(llama, Jinja2ChatFormatter(template=llama.metadata["tokenizer.chat_template"], eos_token=eos,
                                              bos_token=""))

    def mean_logprob(self, messages: list[dict[str, str]], prefix: str, answer: str) -> float:
        import numpy as np

        prompt = self.formatter(messages=messages).prompt + prefix
        head = self.llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
        full = self.llama.tokenize((prompt + answer).encode("utf-8"), add_bos=False, special=True)
        start = next((i for i, (a, b) in enumerate(zip(head, full)) if a != b), len(head))
        # keep the evaluated prefix this prompt shares with the last one (llama.cpp's KV cache)
        past = list(self.llama._input_ids[: self.llama.n_tokens])
        keep = next((i for i, (a, b) in enumerate(zip(past, full)) if a != b), min(len(past), len(full)))
        keep = min(keep, len(full) - 1)  # the rows of the kept tokens stay in scores (logits_all)
        self.llama.n_tokens = keep
        self.llama.eval(full[keep:])
        rows = self.llama.scores[start - 1 : len(full) - 1].astype(np.float64)
        rows -= rows.max(axis=1, keepdims=True)
        logz = np.log(np.exp(rows).sum(axis=1))
        picked = rows[np.arange(len(rows)), full[start:]] - logz
        return float(picked.mean()) if len(picked) else float("nan")


def score_rows(items: list[dict[str, Any]], program: Any, scorer: Scorer, retriever: Any, chars: int) -> None:
    from programs.passages import format_passages
    from signatures.answer import AnswerDirectly

    adapter = program.adapter
    gen = program.generate_answer
    prefix = '{"answer": "'
    for n, it in enumerate(items, 1):
        found = {p.id: p for p in retriever.retrieve(it["question"], k=20)}
        if any(i not in found for i in it["ids"]):
            it["skipped"] = "passages not re-retrieved"
            continue
        shown = format_passages([found[i] for i in it["ids"]], chars, query=it["question"])
        it["context_matches"] = shown.startswith(it["shown"].rstrip("…")[:80])
        answer = json.dumps(it["draft"], ensure_ascii=False)[1:-1]  # as the JSON string's content
        msgs = adapter.format(gen.signature, gen.demos, {"question": it["question"], "passages": shown})
        empty = adapter.format(gen.signature, gen.demos, {"question": it["question"], "passages": ""})
        closed = adapter.format(AnswerDirectly, [], {"question": it["question"]})
        it["with"] = scorer.mean_logprob(msgs, prefix, answer)
        it["empty"] = scorer.mean_logprob(empty, prefix, answer)
        it["closed"] = scorer.mean_logprob(closed, prefix, answer)
        it["pmi"] = it["with"] - it["empty"]
        it["pmi_closed"] = it["with"] - it["closed"]
        print(f"  {n}/{len(items)} {'A' if it['answerable'] else 'U'} pmi {it['pmi']:+.2f} "
              f"closed {it['pmi_closed']:+.2f} {it['draft'][:50]!r}", flush=True)


def report(items: list[dict[str, Any]], extra: float) -> None:
    rows = [it for it in items if "pmi" in it and not any(math.isnan(it[s]) for s in SIGNALS)]
    print(f"\n{len(rows)} drafted questions scored ({sum(it['answerable'] for it in rows)} answerable); "
          f"{sum(1 for it in items if it.get('skipped'))} skipped; context re-built as drafted: "
          f"{sum(1 for it in rows if it.get('context_matches'))}")
    print("| signal | AUC drafted | AUC answered | with check score (5-fold) drafted | answered |")
    print("|---|---:|---:|---:|---:|")
    answered = [it for it in rows if not it["abstained"]]
    for name in ("stated_score", *SIGNALS):
        cells = []
        for group in (rows, answered):
            labels = [it["answerable"] for it in group]
            if len(set(labels)) < 2:
                cells += ["—", "—"]
                continue
            alone = _auc([it[name] for it in group], labels)
            both = _auc(_cv_combined([[it[name] for it in group], [it["stated_score"] for it in group]], labels),
                        labels) if name != "stated_score" else alone
            cells += [f"{alone:.3f}", f"{both:.3f}"]
        print(f"| {name} | {cells[0]} | {cells[2]} | {cells[1]} | {cells[3]} |")
    _abstention_table(rows, extra)


def _abstention_table(rows: list[dict[str, Any]], extra: float) -> None:
    """What a threshold on each signal over the answered questions adds: abstain also when signal < t, with t
    the largest that adds at most ``extra`` false abstention (in-sample: an upper bound on what it can give)."""
    answered = [it for it in rows if not it["abstained"]]
    n_ans = sum(it["answerable"] for it in rows) or 1
    n_un = sum(not it["answerable"] for it in rows) or 1
    print(f"\nOn the drafted questions, abstaining also when a signal is below t (in-sample t, at most "
          f"+{extra:.2f} false abstention):")
    print("| signal | t | unanswerable newly abstained | answerable newly abstained |")
    print("|---|---:|---:|---:|")
    for name in SIGNALS:
        best = (0, 0, float("-inf"))
        for t in sorted({it[name] for it in answered}):
            fa = sum(1 for it in answered if it["answerable"] and it[name] < t)
            caught = sum(1 for it in answered if not it["answerable"] and it[name] < t)
            if fa / n_ans <= extra and caught > best[0]:
                best = (caught, fa, t)
        print(f"| {name} | {best[2]:+.2f} | {best[0]} of {n_un} | {best[1]} of {n_ans} |")


def main() -> None:
    from judge_program import add_model_args, judge_program

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="*")
    ap.add_argument("--reports", default="reports")
    ap.add_argument("--limit", type=int, default=0, help="at most this many drafted questions per run")
    ap.add_argument("--rows", default="", help="write the scored rows to this JSON file")
    ap.add_argument("--from-rows", default="", help="report rows written by --rows")
    ap.add_argument("--extra-false-abstention", type=float, default=0.05)
    add_model_args(ap)
    args = ap.parse_args()
    if args.from_rows:
        report(json.loads(Path(args.from_rows).read_text()), args.extra_false_abstention)
        return
    if not args.runs:
        ap.error("name an eval run (or --from-rows)")
    from bench_retrieval_signals import e2e_setup

    from selfrag.lm.model_files import gguf_path

    settings, retriever = e2e_setup("en")
    program = judge_program(args)
    scorer = Scorer.load(str(gguf_path(settings.lm.profile, settings.lm.model, settings.lm.model_cache)), args.threads)
    items: list[dict[str, Any]] = []
    for run in args.runs:
        rows = [json.loads(line) for line in (Path(args.reports) / run / "results.jsonl").read_text().splitlines()
                if line.strip()]
        got = drafted(rows)[: args.limit or None]
        for it in got:
            it["run"] = run
        score_rows(got, program, scorer, retriever, settings.program.passage_chars)
        items += got
        if args.rows:
            Path(args.rows).write_text(json.dumps(items, ensure_ascii=False, indent=1))
    report(items, args.extra_false_abstention)


if __name__ == "__main__":
    main()
