"""The service wired from settings retrieves over ``retrieval.index`` (through ``selfrag.wiring.build_retriever``,
as ``selfrag ask`` does): refused at start-up when the default collection lacks it, ``index_not_found``
for a question over another collection without it."""

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
from tests.service.conftest import DOCS, GOOD, QUESTION


def summarise(texts):
    return "Summary of " + "; ".join(texts)


def test_the_service_answers_over_retrieval_index_and_refuses_a_missing_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    lm, engine = scripted_lm(dict(GOOD))
    monkeypatch.setattr("selfrag.wiring.build_lms", lambda settings: (lm, None, dspy.JSONAdapter()))
    settings = Settings(kb={"path": str(tmp_path / "kb"), "embedding_model": "hash", "collection": "docs"},
                        retrieval={"index": "raptor"}, program={"k": 3})
    service = ServiceSettings(demo_corpus=False)
    kb = build_knowledge_base(settings)
    kb.add_documents(DOCS)
    with pytest.raises(InputError, match="no raptor index for collection 'docs': run selfrag ingest --index raptor"):
        build_service_runtime(settings, service)  # the line `selfrag serve` exits 2 with, as ask does

    build_index(kb, "raptor", summarise=summarise, progress=False)
    runtime = build_service_runtime(settings, service)
    runtime.collections.get("plain", create=True).add_documents(DOCS[:1])  # a collection without the index
    with TestClient(create_app(runtime, service)) as client:
        r = client.post("/v1/ask", json={"question": QUESTION})
        assert r.status_code == 200, r.text
        graded = [inputs["passages"] for role, inputs in engine.calls if role == "grade_relevance_batch"]
        assert graded and "Summary of" in graded[0]  # RAPTOR's summary nodes were retrieved
        calls = len(engine.calls)
        r = client.post("/v1/ask", json={"question": QUESTION, "collection": "plain"})
        assert r.status_code == 404 and r.json()["error"]["code"] == "index_not_found"
        assert "no raptor index for collection 'plain'" in r.json()["error"]["message"]
        assert len(engine.calls) == calls  # refused before the question was queued
