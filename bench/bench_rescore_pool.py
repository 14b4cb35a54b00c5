"""Does a deeper candidate pool, re-ranked by the re-scoring embedder, help the gate or the judges? No LM.

    .venv/bin/python bench/bench_rescore_pool.py [--limit 300] [--splits train,dev] [--pools 3,4,5,6,8,10,12]
                                                 [--rows OUT.json | --from-rows OUT.json]

The similarity gate reads the best re-scored (e5-small, ``retrieval.similarity_embedder``) cosine of the
first ``k`` hybrid candidates, and the judges read those ``k`` passages in the hybrid order. This bench
retrieves the largest pool once per question (the balanced ``qa_en`` questions of each split, as the
signals bench takes them, under the default settings: hybrid, re-scored) and reports per pool size N:

* the gate's signal over N candidates — the best cosine among them: ROC AUC answerable vs unanswerable, and
  out-of-sample abstention at false abstention ≤ the bound (threshold picked on 4/5, applied to 1/5);
* the gold passage's recall in the three passages the judges read: the first 3 in the hybrid order, the
  first 3 of the N re-ordered by the cosine, and anywhere in the N.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from bench_check_variants import _auc
from bench_retrieval_signals import cv_threshold, e2e_setup

READ = 3  # the passages one draft and the answer check read (program.draft_passages)


def _hit(docs: list, gold: list) -> bool:
    return any(d in gold for d in docs)


def pool_table(rows: list[dict], pools: list[int], bound: float) -> list[tuple[int, float, float, float, float, float, float]]:
    """Per pool size: (N, AUC of the best cosine in the pool, out-of-sample abstention, false abstention, gold
    recall in the hybrid first 3, in the cosine-ordered first 3 of the pool, in the pool)."""
    labels = [bool(r["answerable"]) for r in rows]
    answerable = [r for r in rows if r["answerable"]]
    out = []
    for n in pools:
        best = [max(r["sims"][:n], default=0.0) for r in rows]
        abstain, false = cv_threshold(best, labels, bound)
        reordered = [sorted(range(min(n, len(r["sims"]))), key=lambda i, r=r: -r["sims"][i]) for r in answerable]
        hybrid3 = np.mean([_hit(r["docs"][:READ], r["gold"]) for r in answerable])
        cosine3 = np.mean([_hit([r["docs"][i] for i in order[:READ]], r["gold"]) for r, order in zip(answerable, reordered)])
        in_pool = np.mean([_hit(r["docs"][:n], r["gold"]) for r in answerable])
        out.append((n, _auc(best, labels), abstain, false, float(hybrid3), float(cosine3), float(in_pool)))
    return out


def report(rows: list[dict], pools: list[int], bound: float) -> None:
    for split in [*dict.fromkeys(r["split"] for r in rows), None]:
        part = [r for r in rows if split is None or r["split"] == split]
        print(f"\n{split or 'all'}: {len(part)} questions, {sum(r['answerable'] for r in part)} answerable\n")
        print(f"| pool N | ROC AUC, best cosine | abstention, out of sample | false abstention | gold in hybrid "
              f"first {READ} | gold in cosine-ordered first {READ} | gold in pool |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for n, auc, abstain, false, hybrid3, cosine3, in_pool in pool_table(part, pools, bound):
            print(f"| {n} | {auc:.3f} | {abstain:.2f} | {false:.2f} | {hybrid3:.2f} | {cosine3:.2f} | {in_pool:.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--splits", default="train,dev")
    ap.add_argument("--limit", type=int, default=300, help="balanced questions per split")
    ap.add_argument("--pools", default="3,4,5,6,8,10,12")
    ap.add_argument("--max-false-abstention", type=float, default=0.1)
    ap.add_argument("--rows", default="", help="write the per-question rows to this JSON file")
    ap.add_argument("--from-rows", default="", help="report rows written by --rows")
    args = ap.parse_args()
    pools = sorted({int(p) for p in args.pools.split(",")})
    if args.from_rows:
        report(json.loads(Path(args.from_rows).read_text()), pools, args.max_false_abstention)
        return

    _, retriever = e2e_setup("en")
    from optimize.eval_examples import balanced
    from optimize.splits import load_split
    from selfrag import paths

    rows, start = [], time.perf_counter()
    for split in args.splits.split(","):
        for ex in balanced(balanced(load_split("qa_en", split, paths.splits_dir()), None), args.limit):
            passages = retriever.retrieve(ex.question, k=max(pools))
            rows.append({"split": split, "answerable": bool(ex.answerable), "gold": list(ex.gold_doc_ids),
                         "docs": [p.metadata.get("doc_id") for p in passages],
                         "sims": [round(float(p.similarity or 0.0), 5) for p in passages]})
            if len(rows) % 50 == 0:
                print(f"{len(rows)} questions {time.perf_counter() - start:.0f}s", flush=True)
    if args.rows:
        Path(args.rows).write_text(json.dumps(rows, ensure_ascii=False, indent=1))
    report(rows, pools, args.max_false_abstention)


if __name__ == "__main__":
    main()
