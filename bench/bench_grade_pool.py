"""How many candidates SelfRAG should grade: recall of the gold passage at each pool size.

Each graded passage costs ~120 prompt tokens in the batched grading call (its 450-character window),
so the pool (``program.grade_pool``, default k + 1) trades tokens for the chance that the gold passage
is among the graded ones. This prints, for the answerable ClapNQ dev questions over the evaluation
collection (``eval-clapnq``, the one ``selfrag eval --dataset clapnq`` builds, XQuAD distractors
included), recall@n of the gold document with the configured retrieval (hybrid by default). No LM.

Run: ``.venv/bin/python bench/bench_grade_pool.py [--sizes 2 3 4 5 6 8] [--collection eval-clapnq]``
(after one ``selfrag eval --dataset clapnq`` has built the collection).
"""

from __future__ import annotations

import argparse

from optimize import metrics as M
from optimize.splits import load_split
from selfrag.paths import offline_environment, splits_dir
from selfrag.settings import resolve
from selfrag.wiring import build_knowledge_base


def main() -> None:
    offline_environment()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[2, 3, 4, 5, 6, 8])
    ap.add_argument("--collection", default="eval-clapnq")
    args = ap.parse_args()
    settings = resolve()
    kb = build_knowledge_base(settings, collection=args.collection)
    if kb.is_empty():
        raise SystemExit(f"collection {args.collection!r} is empty: run `selfrag eval --dataset clapnq` once first")
    retriever = kb.retriever()
    questions = [ex for ex in load_split("qa_en", "dev", splits_dir()) if M.field_value(ex, "answerable", True)]
    depth = max(args.sizes)
    ranks: list[int | None] = []
    for ex in questions:
        gold = {M.document_id(str(g)) for g in M.field_value(ex, "gold_doc_ids", [])}
        found = [i for i, p in enumerate(retriever.retrieve(str(ex.question), k=depth))
                 if M.document_id(p.id) in gold or M.document_id(str(p.metadata.get("doc_id", ""))) in gold]
        ranks.append(found[0] if found else None)
    print(f"{len(questions)} answerable ClapNQ dev questions, retrieval mode {settings.retrieval.mode}, "
          f"collection {args.collection}")
    print("| pool size | recall of the gold passage |")
    print("|---|---|")
    for n in args.sizes:
        hit = sum(1 for r in ranks if r is not None and r < n)
        print(f"| {n} | {hit / len(ranks):.3f} ({hit}/{len(ranks)}) |")


if __name__ == "__main__":
    main()
