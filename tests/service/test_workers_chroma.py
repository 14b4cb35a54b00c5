"""Scale-out: two service workers (each its own knowledge-base objects, BM25 index and local kb.path)
against one real ``chroma run`` server on 127.0.0.1. A document uploaded through one is answerable
through the other, and each worker's BM25 index follows writes made through the other one — including
a replacement that keeps the chunk count."""

from __future__ import annotations

import httpx

from selfrag.settings import KBSettings
from tests.kb.test_chroma_server import chroma_server  # noqa: F401 - the real server fixture
from tests.service.conftest import GOOD, build_service, LiveServer

TIMEOUT = 60  # generous: the machine may be busy
HERON = b"The Heron cargo bike has a range of 85 km on one battery."


def heron_script():
    grade = lambda inp: {"relevance": "relevant" if "Heron" in inp["passage"] else "irrelevant"}  # noqa: E731
    return dict(GOOD, grade_relevance=grade,
                generate_answer={"answer": "About 85 km.", "citations": [1], "answerable": True})


def worker(tmp_path, name: str, port: int):
    kb = KBSettings(server="http", host="127.0.0.1", port=port, path=tmp_path / name, collection="shared")
    service = build_service(tmp_path, script=heron_script(), kb=kb, docs=None)
    return service, LiveServer(service.app).__enter__()


def bm25(url: str, query: str) -> list[str]:
    r = httpx.post(url + "/v1/search", json={"query": query, "mode": "bm25", "k": 5, "collection": "shared"},
                   timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return [p["text"] for p in r.json()["passages"]]


def test_upload_through_one_worker_is_answerable_through_the_other(tmp_path, chroma_server):  # noqa: F811
    (a, server_a), (b, server_b) = worker(tmp_path, "a", chroma_server), worker(tmp_path, "b", chroma_server)
    try:
        assert httpx.get(server_b.url + "/readyz", timeout=TIMEOUT).status_code == 200
        up = httpx.post(server_a.url + "/v1/collections/shared/documents",
                        files={"files": ("heron.txt", HERON)}, timeout=TIMEOUT)
        assert up.status_code == 200 and up.json()["chunks_added"] == 1, up.text

        answer = httpx.post(server_b.url + "/v1/ask", json={"question": "What is the range of the Heron?",
                                                            "collection": "shared"}, timeout=TIMEOUT).json()
        assert not answer["abstained"] and [c["source"] for c in answer["citations"]] == ["upload:heron.txt"]
        assert b.engine.count("generate_answer") == 1 and a.engine.calls == []  # B's model answered

        # both workers have built a BM25 index holding the document
        assert any("85 km" in t for t in bm25(server_a.url, "Heron range"))
        assert any("85 km" in t for t in bm25(server_b.url, "Heron range"))
        # A replaces it (same number of chunks): B's index must not keep serving the old text
        httpx.post(server_a.url + "/v1/collections/shared/documents",
                   files={"files": ("heron.txt", HERON.replace(b"85", b"120"))}, timeout=TIMEOUT)
        texts = bm25(server_b.url, "Heron range")
        assert any("120 km" in t for t in texts) and not any("85 km" in t for t in texts)
        # B removes it: A's BM25 forgets it
        gone = httpx.delete(server_b.url + "/v1/collections/shared/sources/heron.txt", timeout=TIMEOUT)
        assert gone.status_code == 200
        assert bm25(server_a.url, "Heron range") == []
        # the BM25 indexes are each worker's own (local kb.path), keyed by the server address
        assert a.collections.get("shared").bm25_dir.is_relative_to(tmp_path / "a")
        assert b.collections.get("shared").bm25_dir.is_relative_to(tmp_path / "b")
    finally:
        server_a.__exit__()
        server_b.__exit__()
