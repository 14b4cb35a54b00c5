"""An ingest killed with SIGKILL half-way and run again ends with every chunk present once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from selfrag.kb.chunking import RecursiveChunker
from selfrag.kb.ingest import chunk_documents
from selfrag.kb.loaders import load_paths

SCRIPT = textwrap.dedent(
    """
    import logging, sys, time
    from selfrag.kb.embedder import HashEmbedder
    from selfrag.kb.factory import build_knowledge_base
    from selfrag.settings import KBSettings, RetrievalSettings

    class SlowHash(HashEmbedder):
        def embed(self, texts):
            time.sleep(0.03)  # so the test can kill us between batches
            return super().embed(texts)

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")
    logging.getLogger("selfrag.kb.ingest").setLevel(logging.INFO)
    kb = build_knowledge_base(
        KBSettings(path=sys.argv[1], collection="crash", chunk_size=200, chunk_overlap=20, write_batch_size=25),
        RetrievalSettings(), embedder=SlowHash(64))
    rep = kb.ingest([sys.argv[2]], progress=False)
    print("DONE", kb.count(), flush=True)
    """
)


def _corpus(root, n_files=120):
    root.mkdir()
    for i in range(n_files):
        sentences = [f"File {i} sentence {j} talks about topic {(i * 7 + j) % 13} in some detail." for j in range(12)]
        (root / f"f{i:03d}.txt").write_text(" ".join(sentences))


def test_sigkill_midway_then_rerun_converges(tmp_path):
    docs = tmp_path / "docs"
    _corpus(docs)
    expected = {r.id for r in chunk_documents(load_paths([docs])[0], RecursiveChunker(200, 20))}
    assert len(expected) > 400
    script = tmp_path / "ingest_script.py"
    script.write_text(SCRIPT)
    db = tmp_path / "chroma"
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    proc = subprocess.Popen([sys.executable, str(script), str(db), str(docs)], stderr=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            if line.startswith("wrote batch 5 "):
                os.kill(proc.pid, signal.SIGKILL)
                break
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL, "the ingest finished before it could be killed"

    rerun = subprocess.run([sys.executable, str(script), str(db), str(docs)], capture_output=True, text=True,
                           env=env, timeout=120)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert rerun.stdout.split() == ["DONE", str(len(expected))]

    from selfrag.kb.embedder import HashEmbedder
    from selfrag.kb.factory import build_knowledge_base
    from selfrag.settings import KBSettings, RetrievalSettings

    kb = build_knowledge_base(KBSettings(path=db, collection="crash", chunk_size=200, chunk_overlap=20),
                              RetrievalSettings(), embedder=HashEmbedder(64))
    ids = kb.store.all_ids()
    assert len(ids) == len(set(ids)) == len(expected)
    assert set(ids) == expected
    assert len(kb.bm25_index()) == len(expected)
