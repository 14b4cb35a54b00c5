"""Fault-injection benchmark: every program, question after question, on a scripted LM engine that fails
a share of its calls like real backends do (timeout, HTTP 429, connection refused, refused key, garbage
JSON, empty output, context overflow), and a knowledge base whose embedder fails a share of write batches.

Per program and failure rate it counts the faults injected, the questions answered, honest abstentions,
errors reported (``RAGResult.error``: the calls that decide the answer failed), errors *missed* (the
deciding calls failed but the result claims an answer or an honest abstention) and errors *invented*,
crashes (a program raising) and runs over the program's LM-call bound — the last four must be 0. The
knowledge-base rows count the chunks lost or duplicated after interrupted ingests are re-run (must be 0).

No real LLM: the scripted engine of tests/faults. Run: ``.venv/bin/python bench/bench_faults.py [--questions 40]``.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def offline_environment() -> None:
    from selfrag.paths import offline_environment as setup

    setup()


def program_rows(questions: int, rates: list[float], seed: int) -> list[tuple]:
    from programs.settings import ProgramSettings
    from tests.faults.engine import share
    from tests.faults.scenario import PROGRAMS, Behaviour, deciding_calls_failed, lm_call_bound, run_question

    rng = random.Random(seed)
    rows = []
    for name in PROGRAMS:
        for rate in rates:
            c = dict(faults=0, calls=0, answered=0, abstained=0, errors=0, missed=0, invented=0, crashes=0,
                     over=0)
            start = time.perf_counter()
            for q in range(questions):
                behaviour = Behaviour(relevant=rng.random() < 0.7, support=rng.choice(["fully", "partially", "no"]),
                                      answerable=rng.random() < 0.8,
                                      web=rng.choice(["none", "passages", "failing"]),
                                      stated=rng.random() < 0.8, on_draft=rng.choice(["continue", "no"]))
                config = ProgramSettings(max_rewrites=rng.randint(0, 1), max_web_rounds=rng.randint(0, 1),
                                         continue_retrieval=rng.random() < 0.5)
                run = run_question(name, share(rate, seed=seed * 1000 + q), config, behaviour)
                c["faults"] += len(run.engine.failed_roles())
                c["calls"] += run.calls
                if run.raised is not None:
                    c["crashes"] += 1
                    continue
                r = run.result
                failed = deciding_calls_failed(run.engine.log)
                c["errors"] += r.error is not None
                c["missed"] += failed and r.error is None
                c["invented"] += (not failed) and r.error is not None
                c["answered"] += (not r.abstained) and r.error is None
                c["abstained"] += r.abstained and r.error is None
                c["over"] += run.calls > lm_call_bound(name, config)
            rows.append((name, f"{rate:.0%}", questions, c["calls"], c["faults"], c["answered"], c["abstained"],
                         c["errors"], c["missed"], c["invented"], c["crashes"], c["over"],
                         f"{time.perf_counter() - start:.1f}"))
    return rows


class FlakyEmbedder:
    """A hash embedder whose ``embed`` fails a share of its batches (a crash in the middle of an ingest)."""

    def __init__(self, rate: float, seed: int):
        from selfrag.kb.embedder import HashEmbedder

        self.inner, self.rate, self.rng, self.failures = HashEmbedder(64), rate, random.Random(seed), 0

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def name(self) -> str:
        return self.inner.name

    def embed(self, texts):
        if self.rng.random() < self.rate:
            self.failures += 1
            raise RuntimeError("embedder crashed mid-ingest")
        return self.inner.embed(texts)


def kb_rows(rates: list[float], seed: int, files: int = 60) -> list[tuple]:
    from selfrag.kb.chunking import RecursiveChunker
    from selfrag.kb.factory import build_knowledge_base
    from selfrag.kb.ingest import chunk_documents
    from selfrag.kb.loaders import load_paths
    from selfrag.settings import KBSettings, RetrievalSettings

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        docs = Path(tmp) / "docs"
        docs.mkdir()
        for i in range(files):
            (docs / f"f{i:03d}.txt").write_text(" ".join(
                f"File {i} sentence {j} is about topic {(i * 7 + j) % 13}." for j in range(15)))
        (docs / "empty.txt").write_text("")
        (docs / "bad.jsonl").write_text('{"text": "ok"}\n{"text": "bad key", "$where": 1}\nnot json\n')
        expected = {r.id for r in chunk_documents(load_paths([docs])[0], RecursiveChunker(200, 20))}
        for rate in rates:
            embedder = FlakyEmbedder(rate, seed)
            kb = build_knowledge_base(KBSettings(path=Path(tmp) / f"kb-{rate}", collection="bench", chunk_size=200,
                                                 chunk_overlap=20, write_batch_size=16),
                                      RetrievalSettings(), embedder=embedder)
            attempts, crashes = 0, 0
            while attempts < 200:
                attempts += 1
                try:
                    kb.ingest([docs], progress=False)
                    break
                except RuntimeError:
                    crashes += 1
            ids = kb.store.all_ids()
            lost = len(expected - set(ids))
            duplicated = len(ids) - len(set(ids))
            bm25_ok = kb.bm25_index().consistent() and len(kb.bm25_index()) == len(ids)
            rows.append((f"{rate:.0%}", attempts, embedder.failures, len(expected), len(set(ids)), lost, duplicated,
                         "yes" if bm25_ok else "NO"))
    return rows


def main() -> None:
    offline_environment()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--questions", type=int, default=40, help="questions per program and failure rate")
    ap.add_argument("--rates", type=float, nargs="+", default=[0.0, 0.1, 0.3, 0.6, 1.0])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import logging

    logging.disable(logging.WARNING)  # every injected fault logs a warning; the table says it all
    from rich.console import Console
    from rich.table import Table

    console = Console(width=200)
    table = Table(title=f"programs under injected LM faults ({args.questions} questions per row, "
                        "faults: timeout, 429, refused, auth, garbage JSON, empty, context overflow)")
    for col in ("program", "fail rate", "questions", "LM calls", "faults injected", "answered", "abstained",
                "errors reported", "errors missed", "errors invented", "crashes", "over LM bound", "s"):
        table.add_column(col, justify="left" if col == "program" else "right")
    prows = program_rows(args.questions, args.rates, args.seed)
    for row in prows:
        table.add_row(*map(str, row))
    console.print(table)

    kb_table = Table(title="knowledge base: ingests crashed by a failing embedder, re-run until done")
    for col in ("batch fail rate", "ingest runs", "crashes injected", "chunks expected", "chunks present",
                "data lost", "duplicated", "BM25 consistent"):
        kb_table.add_column(col, justify="right")
    krows = kb_rows(args.rates[:-1] or [0.0], args.seed)  # a 100% failing embedder never finishes
    for row in krows:
        kb_table.add_row(*map(str, row))
    console.print(kb_table)

    bad = sum(r[8] + r[9] + r[10] + r[11] for r in prows) + sum(r[5] + r[6] for r in krows)
    console.print(f"errors missed + invented + crashes + over bound + data lost + duplicated = {bad}")
    raise SystemExit(1 if bad else 0)


if __name__ == "__main__":
    main()
