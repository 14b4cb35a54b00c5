"""Concurrency: two ingests and two search loops on one collection at once, in separate processes (as two
terminals would run them), bounded in time and count. No process crashes, every chunk is present exactly
once afterwards, and the BM25 index on disk is consistent with the collection (the searchers rebuild and
save it concurrently while the ingests change the collection under them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from selfrag.kb.chunking import RecursiveChunker
from selfrag.kb.ingest import chunk_documents
from selfrag.kb.loaders import load_paths

WORKER = textwrap.dedent(
    """
    import json, sys, time
    from selfrag.kb.embedder import HashEmbedder
    from selfrag.kb.factory import build_knowledge_base
    from selfrag.settings import KBSettings, RetrievalSettings

    mode, db = sys.argv[1], sys.argv[2]
    kb = build_knowledge_base(
        KBSettings(path=db, collection="shared", chunk_size=200, chunk_overlap=20, write_batch_size=20),
        RetrievalSettings(mode="hybrid"), embedder=HashEmbedder(64))
    if mode == "ingest":
        report = kb.ingest([sys.argv[3]], progress=False)
        print(json.dumps({"added": report.chunks_added, "skipped": len(report.skipped)}))
    else:
        deadline, searches, errors = time.time() + float(sys.argv[3]), 0, []
        while time.time() < deadline and searches < int(sys.argv[4]):
            for mode in ("bm25", "hybrid"):
                try:
                    kb.retrieve("topic 3 in some detail", k=3, mode=mode)
                    searches += 1
                except Exception as exc:  # a crash of one search is what this test looks for
                    errors.append(f"{type(exc).__name__}: {exc}")
        print(json.dumps({"searches": searches, "errors": errors[:5], "n_errors": len(errors)}))
    """
)


def _corpus(root: Path, prefix: str, n: int) -> None:
    root.mkdir(parents=True)
    for i in range(n):
        sentences = [f"File {prefix}{i} sentence {j} talks about topic {(i * 7 + j) % 13} in some detail."
                     for j in range(12)]
        (root / f"{prefix}{i:03d}.txt").write_text(" ".join(sentences))


def test_two_ingests_and_two_search_loops_at_once(tmp_path):
    docs = tmp_path / "docs"
    _corpus(docs / "a", "a", 40)
    _corpus(docs / "b", "b", 40)
    _corpus(docs / "seed", "s", 2)
    (docs / "b" / "shared.txt").write_text((docs / "a" / "a000.txt").read_text())  # the same text in both
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    db = tmp_path / "chroma"
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}

    def start(*args: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, str(script), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env)

    # a collection that exists (Chroma's reader in another process cannot follow a collection created empty)
    seed = start("ingest", str(db), str(docs / "seed"))
    assert seed.wait(timeout=120) == 0, seed.stderr.read()[-2000:]
    procs = [start("search", str(db), "25", "400"), start("search", str(db), "25", "400"),
             start("ingest", str(db), str(docs / "a")), start("ingest", str(db), str(docs / "b"))]
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=180)
            assert p.returncode == 0, err[-3000:]
            outs.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for searcher in outs[:2]:
        assert searcher["n_errors"] == 0, searcher["errors"]
        assert searcher["searches"] > 0

    from selfrag.kb.bm25 import BM25Index
    from selfrag.kb.embedder import HashEmbedder
    from selfrag.kb.factory import build_knowledge_base
    from selfrag.kb.store import ids_fingerprint
    from selfrag.settings import KBSettings, RetrievalSettings

    expected = {r.id for r in chunk_documents(load_paths([docs])[0], RecursiveChunker(200, 20))}
    kb = build_knowledge_base(KBSettings(path=db, collection="shared", chunk_size=200, chunk_overlap=20),
                              RetrievalSettings(), embedder=HashEmbedder(64))
    ids = kb.store.all_ids()
    assert len(ids) == len(set(ids)) == kb.count()  # every chunk exactly once
    assert set(ids) == expected  # and every chunk of every file
    on_disk = BM25Index.load(kb.bm25_dir)
    assert on_disk is None or on_disk.consistent()  # whatever the searchers left is whole (or absent)
    index = kb.bm25_index()
    assert index.fingerprint == ids_fingerprint(ids) and index.consistent()
    assert kb.retrieve("topic 3", k=3, mode="bm25")
    leftovers = [p.name for p in kb.bm25_dir.parent.iterdir() if ".tmp-" in p.name or ".old-" in p.name]
    assert leftovers == []
