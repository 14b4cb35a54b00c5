"""The service wired from settings retrieves over ``retrieval.index`` (through ``selfrag.wiring.build_retriever``,
as ``selfrag ask`` does), for questions and ``/v1/search`` alike: refused at start-up when the default
collection lacks it, ``index_not_found`` for a question or search over another collection without it."""

import dspy
import pytest
from fastapi.testclient import TestClient

from selfrag.errors import InputError
from selfrag.kb.indexes import build_index
from selfrag.service.app import create_app
from selfrag.service.runtime import build_service_runtime
from selfrag.service.settings import ServiceSettings
from selfrag.settings import Settings
from selfrag.wiring import build_knowledge_base
from tests.fakes import scripted_lm
from tests.service.conftest import DOCS, GOOD, LOCAL, QUESTION


def summarise(texts):
    return "Summary of " + "; ".join(texts)


def raptor_settings(tmp_path, monkeypatch):
    """Settings with ``retrieval.index = raptor`` over collection 'docs' (holding DOCS, no index yet),
    the scripted engine behind the LMs, and that knowledge base."""
    monkeypatch.chdir(tmp_path)
    lm, engine = scripted_lm(dict(GOOD))
    monkeypatch.setattr("selfrag.wiring.build_lms", lambda settings: (lm, None, dspy.JSONAdapter()))
    settings = Settings(kb={"path": str(tmp_path / "kb"), "embedding_model": "hash", "collection": "docs"},
                        retrieval={"index": "raptor"}, program={"k": 3})
    kb = build_knowledge_base(settings)
    kb.add_documents(DOCS)
    return settings, engine, kb


def test_the_service_answers_over_retrieval_index_and_refuses_a_missing_one(tmp_path, monkeypatch):
    settings, engine, kb = raptor_settings(tmp_path, monkeypatch)
    service = ServiceSettings(demo_corpus=False)
    with pytest.raises(InputError, match="no raptor index for collection 'docs': run selfrag ingest --index raptor"):
        build_service_runtime(settings, service)  # the line `selfrag serve` exits 2 with, as ask does

    build_index(kb, "raptor", summarise=summarise, progress=False)
    runtime = build_service_runtime(settings, service)
    runtime.collections.get("plain", create=True).add_documents(DOCS[:1])  # a collection without the index
    with TestClient(create_app(runtime, service), base_url=LOCAL) as client:
        r = client.post("/v1/ask", json={"question": QUESTION})
        assert r.status_code == 200, r.text
        graded = [inputs["passages"] for role, inputs in engine.calls if role == "grade_relevance_batch"]
        assert graded and "Summary of" in graded[0]  # RAPTOR's summary nodes were retrieved
        calls = len(engine.calls)
        r = client.post("/v1/ask", json={"question": QUESTION, "collection": "plain"})
        assert r.status_code == 404 and r.json()["error"]["code"] == "index_not_found"
        assert "no raptor index for collection 'plain'" in r.json()["error"]["message"]
        assert len(engine.calls) == calls  # refused before the question was queued


def test_search_goes_over_retrieval_index_and_refuses_a_collection_without_it(tmp_path, monkeypatch):
    settings, engine, kb = raptor_settings(tmp_path, monkeypatch)
    build_index(kb, "raptor", summarise=summarise, progress=False)
    service = ServiceSettings(demo_corpus=False)
    runtime = build_service_runtime(settings, service)
    runtime.collections.get("plain", create=True).add_documents(DOCS[:1])  # a collection without the index
    with TestClient(create_app(runtime, service), base_url=LOCAL) as client:
        r = client.post("/v1/search", json={"query": "Zephyr bridge river Oda", "k": 5})
        assert r.status_code == 200, r.text
        body = r.json()
        assert (body["collection"], body["index"]) == ("docs", "raptor")
        assert any(p["text"].startswith("Summary of") for p in body["passages"])  # RAPTOR's summary nodes
        bm25 = client.post("/v1/search", json={"query": "Zephyr bridge river Oda", "k": 5, "mode": "bm25"})
        assert bm25.status_code == 200 and bm25.json()["mode"] == "bm25"
        assert any(p["text"].startswith("Summary of") for p in bm25.json()["passages"])  # the index, in that mode
        r = client.post("/v1/search", json={"query": "Zephyr bridge", "collection": "plain"})
        assert r.status_code == 404 and r.json()["error"]["code"] == "index_not_found"
        assert "no raptor index for collection 'plain'" in r.json()["error"]["message"]
    assert engine.calls == []  # searching calls no LM
