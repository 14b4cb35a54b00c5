"""The HTTP client path against a real ``chroma run`` server on a free local port."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from selfrag.kb.embedder import HashEmbedder
from selfrag.kb.factory import build_knowledge_base
from selfrag.settings import KBSettings, RetrievalSettings


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _chroma_cli() -> str | None:
    local = Path(sys.executable).with_name("chroma")
    return str(local) if local.exists() else shutil.which("chroma")


@pytest.fixture
def chroma_server(tmp_path):
    cli = _chroma_cli()
    assert cli is not None, "the chroma CLI (installed with chromadb) was not found next to the interpreter"
    port = _free_port()
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False", "CHROMA_TELEMETRY": "False"}
    log = open(tmp_path / "server.log", "w")
    proc = subprocess.Popen([cli, "run", "--path", str(tmp_path / "server-data"), "--host", "127.0.0.1",
                             "--port", str(port)], stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"chroma server exited: {(tmp_path / 'server.log').read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                time.sleep(0.2)
        else:
            pytest.fail("chroma server did not start within 30 s")
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_http_server_roundtrip(chroma_server, tmp_path, docs_dir):
    settings = KBSettings(server="http", host="127.0.0.1", port=chroma_server, path=tmp_path / "local",
                          collection="served")
    kb = build_knowledge_base(settings, RetrievalSettings(), embedder=HashEmbedder(64))
    rep = kb.ingest([docs_dir], progress=False)
    assert rep.chunks_added == 6 and kb.count() == 6
    assert kb.ingest([docs_dir], progress=False).chunks_added == 0
    for mode in ("dense", "bm25", "hybrid"):
        hits = kb.retrieve("capital of Germany", k=1, mode=mode, filters={"country": "DE"})
        assert hits[0].metadata["doc_id"] == "b1"
    # the BM25 index lives locally, keyed by server address
    assert kb.bm25_dir.is_relative_to(tmp_path / "local") and str(chroma_server) in str(kb.bm25_dir)
    # a second client sees the same data
    again = build_knowledge_base(settings, RetrievalSettings(), embedder=HashEmbedder(64))
    assert again.count() == 6 and len(again.bm25_index()) == 6
    assert not (tmp_path / "local" / "chroma.sqlite3").exists()
