"""Can the retrieval itself, read closer, tell answerable from unanswerable questions? No LM.

    .venv/bin/python bench/bench_retrieval_signals.py [--limit 300] [--split train] [--language en|zh]
                                                      [--embedder use-m3]
                                                      [--lm-rows ROWS.json] [--max-false-abstention 0.1]
                                                      [--rows OUT.json | --from-rows OUT.json]

The similarity gate reads one number of a retrieval: the best passage's dense cosine with the question
(ROC AUC ~0.87–0.89 answerable vs unanswerable on ClapNQ). A passage is a few hundred words; an
answerable question's answer is usually one sentence of it, and an unanswerable question's passages are
about the right topic without that sentence. This bench retrieves, as the program's first round does
(``k`` passages of the e2e collection, questions from the balanced ``qa_en`` split as calibrate takes
them; ``--language zh``: ``qa_zh`` over the ``cmrc-qa`` collection), and scores signals that need only the embedder and the text:

* ``top similarity`` — the gate's signal; ``second similarity``, ``gap`` (top − second), ``mean similarity``;
* ``best sentence similarity`` — the highest cosine of the question with any sentence of the passages
  (the collection's embedder; ``--embedder`` adds the same with another one, and its passage cosine);
* ``window similarity`` — cosine of the question with the window of each passage a judge is shown;
* ``term coverage`` — the largest share of the question's content words that one sentence holds, and that
  one passage holds;
* ``answer type found`` — for who / when / how many / where questions, whether a sentence among the three
  closest to the question holds something of that type (a capitalised name, a year or date, a number, a
  capitalised place word).

Each is scored alone (ROC AUC; the best abstention at false abstention ≤ the bound with the threshold
picked on these questions, which is optimistic; and out of sample: the threshold picked on four fifths and
applied to the fifth left out, 5 folds, averaged over 10 shuffles) and in combinations by a logistic
regression (5-fold cross-validated predictions). ``--lm-rows`` joins the answer check's P(stated) from rows written
by ``bench_check_variants.py --rows`` on the same questions (checked by their top similarity), to see
whether a retrieval signal adds to the check + similarity pair the program routes on.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

import numpy as np

from bench_answerability import best_abstention
from bench_check_variants import _auc, _cv_combined

WH = {
    "who": re.compile(r"\b[A-Z][a-z]+(?:\s+[A-Z][a-z]+)+"),  # a two-word capitalised name
    "when": re.compile(r"\b(1[0-9]{3}|20[0-9]{2})\b|\b(January|February|March|April|May|June|July|August|September|"
                       r"October|November|December)\b"),
    "how many": re.compile(r"\b\d[\d,.]*\b|\b(one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
                           r"hundred|thousand|million|billion)\b", re.I),
    "how much": re.compile(r"\b\d[\d,.]*\b|[$€£]"),
    "where": re.compile(r"\b(in|at|near|from)\s+(the\s+)?[A-Z][a-z]+"),
}


def question_type(question: str) -> str | None:
    q = question.lower()
    for kind in ("how many", "how much", "who", "when", "where"):
        if re.search(rf"\b{kind}\b", q):
            return kind
    return None


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / (np.linalg.norm(a, axis=-1, keepdims=True) + 1e-12)
    b = b / (np.linalg.norm(b, axis=-1, keepdims=True) + 1e-12)
    return b @ a


def _embed_query(embedder, text: str) -> np.ndarray:
    from selfrag.kb.embedder_support import query_vectors

    return np.asarray(query_vectors(embedder, [text])[0])


def signals(question: str, passages: list, embedder, window_chars: int, other=None) -> dict[str, float]:
    """The retrieval signals of one question's retrieved ``passages`` (see the module docstring)."""
    from programs.passages import passage_window, query_terms
    from selfrag.kb.chunking import split_sentences

    sims = sorted((p.similarity for p in passages if p.similarity is not None), reverse=True) or [0.0]
    row = {"top similarity": sims[0], "second similarity": sims[1] if len(sims) > 1 else 0.0,
           "mean similarity": float(np.mean(sims))}
    row["gap"] = row["top similarity"] - row["second similarity"]
    sentences = [s.strip() for p in passages for s in split_sentences(p.text) if len(s.strip()) > 20]
    terms = query_terms(question)
    q = _embed_query(embedder, question)
    if sentences:
        sent_sims = _cos(q, np.asarray(embedder.embed(sentences)))
        row["best sentence similarity"] = float(sent_sims.max())
        closest = [sentences[i] for i in np.argsort(-sent_sims)[:3]]
    else:
        row["best sentence similarity"], closest = 0.0, []
    windows = [passage_window(p.text, question, window_chars) for p in passages]
    row["window similarity"] = float(_cos(q, np.asarray(embedder.embed(windows))).max()) if windows else 0.0

    def coverage(text: str) -> float:
        low = text.lower()
        return sum(t in low for t in terms) / len(terms) if terms else 0.0

    row["term coverage, sentence"] = max((coverage(s) for s in sentences), default=0.0)
    row["term coverage, passage"] = max((coverage(p.text) for p in passages), default=0.0)
    kind = question_type(question)
    row["answer type found"] = (float(any(WH[kind].search(s) for s in closest)) if kind else 1.0)
    row["question type"] = kind or ""
    if other is not None and sentences:
        q2 = _embed_query(other, question)
        row["best sentence similarity, other"] = float(_cos(q2, np.asarray(other.embed(sentences))).max())
        row["passage similarity, other"] = float(_cos(q2, np.asarray(other.embed([p.text for p in passages]))).max())
    return row


COMBOS = [
    ["top similarity", "best sentence similarity"],
    ["top similarity", "gap", "mean similarity"],
    ["top similarity", "best sentence similarity", "window similarity", "term coverage, sentence",
     "term coverage, passage", "answer type found"],
]


def cv_threshold(scores: list[float], labels: list[bool], bound: float, shuffles: int = 10) -> tuple[float, float]:
    """(abstention on unanswerable, false abstention) of a threshold picked on four fifths of the questions
    for the most abstention at false abstention ≤ ``bound`` and applied to the fifth left out; 5 folds,
    averaged over ``shuffles`` shuffles."""
    from sklearn.model_selection import StratifiedKFold

    s, y = np.asarray(scores, dtype=float), np.asarray(labels, dtype=bool)
    folds = max(2, min(5, int(y.sum()), int((~y).sum())))
    abstain = false = 0.0
    for seed in range(shuffles):
        for train, test in StratifiedKFold(folds, shuffle=True, random_state=seed).split(s, y):
            _, t = best_abstention(list(s[train][y[train]]), list(s[train][~y[train]]), bound)
            abstain += float((s[test][~y[test]] < t).sum())
            false += float((s[test][y[test]] < t).sum())
    return abstain / (shuffles * (~y).sum()), false / (shuffles * y.sum())


def table(rows: list[dict], bound: float) -> list[tuple[str, float, float, float, float]]:
    """(signal, ROC AUC, best abstention in sample, out-of-sample abstention, out-of-sample false abstention)."""
    labels = [bool(r["answerable"]) for r in rows]
    names = [k for k, v in rows[0].items() if isinstance(v, float) and k != "answerable"]
    out = {n: [float(r.get(n) or 0.0) for r in rows] for n in names}
    combos = [c for c in COMBOS if all(n in out for n in c)]
    if "best sentence similarity, other" in out:
        combos.append(["top similarity", "best sentence similarity, other", "passage similarity, other"])
    if "stated" in out:
        combos += [["stated", "top similarity"], ["stated", "top similarity", "best sentence similarity"],
                   ["stated"] + COMBOS[-1]]
        if "passage similarity, other" in out:
            combos.append(["stated", "passage similarity, other"])
    for combo in (c for c in combos if all(n in out for n in c)):
        out[" + ".join(combo) + " (cv)"] = _cv_combined([out[n] for n in combo], labels)
    result = []
    for name, scores in out.items():
        ans = [s for s, y in zip(scores, labels) if y]
        un = [s for s, y in zip(scores, labels) if not y]
        result.append((name, _auc(scores, labels), best_abstention(ans, un, bound)[0],
                       *cv_threshold(scores, labels, bound)))
    return result


def report(rows: list[dict], bound: float) -> None:
    labels = [r["answerable"] for r in rows]
    print(f"\n{len(rows)} questions, {sum(labels)} answerable; abstention at false abstention ≤ {bound}: with "
          f"the threshold picked on these questions, and out of sample (picked on 4/5, applied to 1/5); "
          f"(cv) = a logistic regression's 5-fold cross-validated prediction\n")
    print("| signal | ROC AUC | abstention, in sample | abstention, out of sample | false abstention, out of sample |")
    print("|---|---:|---:|---:|---:|")
    for name, auc, abstain, cv_abstain, cv_false in table(rows, bound):
        print(f"| {name} | {auc:.3f} | {abstain:.2f} | {cv_abstain:.2f} | {cv_false:.2f} |")


def e2e_setup(language: str = "en") -> tuple[object, object]:
    """The default settings (offline) and the retriever the program's first round uses over the e2e collection
    (``en``: ClapNQ + distractors; ``zh``: ``cmrc-qa``), built as ``selfrag eval`` builds it."""
    from selfrag.paths import offline_environment

    offline_environment()
    from optimize.records_zh import QA_CORPUS
    from optimize.stages import E2E_COLLECTION, e2e_retriever
    from selfrag import paths, wiring
    from selfrag.settings import resolve

    settings = resolve({})
    retriever = e2e_retriever(lambda name: wiring.build_knowledge_base(settings, collection=name),
                              paths.datasets_dir(), None, QA_CORPUS if language == "zh" else E2E_COLLECTION,
                              lambda kb: wiring.build_retriever(settings, kb))
    return settings, retriever


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", default="train")
    ap.add_argument("--language", default="en", choices=["en", "zh"],
                    help="zh: the Chinese questions (qa_zh) over the cmrc-qa collection")
    ap.add_argument("--limit", type=int, default=300)
    ap.add_argument("--embedder", default="", help="a second embedder for the sentence signals (use-m3, e5-small)")
    ap.add_argument("--lm-rows", default="", help="rows of bench_check_variants.py --rows on the same questions")
    ap.add_argument("--max-false-abstention", type=float, default=0.1)
    ap.add_argument("--rows", default="", help="write the per-question rows to this JSON file")
    ap.add_argument("--from-rows", default="", help="report rows written by --rows")
    args = ap.parse_args()
    if args.from_rows:
        report(json.loads(Path(args.from_rows).read_text()), args.max_false_abstention)
        return

    from optimize.eval_examples import balanced
    from optimize.splits import load_split
    from selfrag import paths

    settings, retriever = e2e_setup(args.language)
    embedder = getattr(getattr(retriever, "dense", retriever), "embedder")
    other = None
    if args.embedder:
        from selfrag.kb.embedder import make_embedder

        other = make_embedder(args.embedder)
    examples = balanced(balanced(load_split(f"qa_{args.language}", args.split, paths.splits_dir()), None), args.limit)
    lm_rows = json.loads(Path(args.lm_rows).read_text()) if args.lm_rows else []
    cfg = settings.program
    rows, start = [], time.perf_counter()
    for i, ex in enumerate(examples):
        passages = list(retriever.retrieve(ex.question, k=cfg.grade_pool or cfg.k))
        row = {"answerable": bool(ex.answerable),
               **signals(ex.question, passages[:cfg.draft_passages], embedder, cfg.passage_chars, other)}
        row["top similarity"] = max((p.similarity for p in passages if p.similarity is not None), default=0.0)
        if i < len(lm_rows):
            lm = lm_rows[i]
            if lm["answerable"] != row["answerable"] or abs((lm["top_similarity"] or 0) - row["top similarity"]) > 1e-4:
                raise SystemExit(f"--lm-rows {args.lm_rows}: row {i + 1} is not question {ex.question!r}")
            row["stated"] = float(lm.get("stated") or 0.0)
        rows.append(row)
        if (i + 1) % 25 == 0:
            print(f"{i + 1}/{len(examples)} {time.perf_counter() - start:.0f}s", flush=True)
    if lm_rows:
        rows = rows[:len(lm_rows)]
    if args.rows:
        Path(args.rows).write_text(json.dumps(rows, ensure_ascii=False, indent=1))
    report(rows, args.max_false_abstention)


if __name__ == "__main__":
    main()
