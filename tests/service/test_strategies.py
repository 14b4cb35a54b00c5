"""The service wired from settings serves the retrieval strategies of a ``StrategyRetrieval`` program:
self-query reads the metadata fields of the collection each question is answered from — the demo corpus
too, when it was just ingested at start-up —, HyDE's passage reaches the hybrid retriever's dense search,
and collection routing, which the per-request collection does not allow, is refused at start-up."""

import dspy
import pytest
from fastapi.testclient import TestClient

from selfrag.errors import ConfigError
from selfrag.service.app import create_app
from selfrag.service.runtime import build_service_runtime
from selfrag.service.settings import ServiceSettings
from selfrag.settings import Settings
from tests.fakes import scripted_lm
from tests.service.conftest import LOCAL

SCRIPT = {
    "extract_filters": {"filters": [{"field": "language", "op": "eq", "value": "en"}]},
    "generate_answer": {"answer": "About 80 km.", "citations": [1], "answerable": True},
    "judge_support": {"support": "fully"},
}


def strategy_settings(tmp_path, monkeypatch, **program):
    """Settings over the default collection at the default path (empty: the demo goes in), a scripted LM."""
    monkeypatch.chdir(tmp_path)
    lm, engine = scripted_lm(dict(SCRIPT))
    monkeypatch.setattr("selfrag.wiring.build_lms", lambda settings: (lm, None, dspy.JSONAdapter()))
    monkeypatch.setattr("selfrag.paths.default_artifact", lambda: tmp_path / "no-default-artifact.json")
    return Settings(kb={"embedding_model": "hash"}, program={"strategy": "iterative", **program}), engine


def test_self_query_in_the_service_sees_the_demo_corpus_ingested_at_start_up(tmp_path, monkeypatch):
    settings, engine = strategy_settings(tmp_path, monkeypatch, self_query=True)
    service = ServiceSettings(demo_corpus=True)
    runtime = build_service_runtime(settings, service)
    with TestClient(create_app(runtime, service), base_url=LOCAL) as client:
        r = client.post("/v1/ask", json={"question": "What is the range of the Heron cargo bike?"})
        assert r.status_code == 200, r.text
    fields = [inputs["metadata_fields"] for role, inputs in engine.calls if role == "extract_filters"]
    assert len(fields) == 1 and "language (str)" in fields[0] and "title (str)" in fields[0]
    assert r.json()["answer"] == "About 80 km."


def test_hyde_in_the_service_embeds_the_passage_while_bm25_keeps_the_question(tmp_path, monkeypatch):
    settings, engine = strategy_settings(tmp_path, monkeypatch, transforms=["hyde"])
    engine.script["hypothetical_passage"] = {"hypothetical_passage": "The Heron has a range of about 80 km."}
    service = ServiceSettings(demo_corpus=True)
    runtime = build_service_runtime(settings, service)
    with TestClient(create_app(runtime, service), base_url=LOCAL) as client:
        r = client.post("/v1/ask", json={"question": "What is the range of the Heron cargo bike?"})
        assert r.status_code == 200, r.text
    searches = [s for s in r.json()["trace"] if s["step"] == "retrieve"]
    assert searches and searches[0]["inputs"]["hyde"] == "split"  # one hybrid search, not two fused


def test_routing_is_refused_at_start_up_in_one_line(tmp_path, monkeypatch):
    settings, engine = strategy_settings(tmp_path, monkeypatch, route_collections=True)
    with pytest.raises(ConfigError, match="route_collections"):
        build_service_runtime(settings, ServiceSettings(demo_corpus=True))
    assert engine.calls == []


def test_the_service_serves_the_program_its_artifact_was_compiled_for(tmp_path, monkeypatch):
    """``serve --program iterative.json`` with no strategy set serves the iterative program (was: built
    as ``selfrag`` and refused the artifact)."""
    from programs.artifacts import save_artifact
    from programs.iterative import IterativeRAG
    from tests.fakes import ListRetriever

    settings, engine = strategy_settings(tmp_path, monkeypatch)
    path = save_artifact(IterativeRAG(ListRetriever([])), tmp_path / "iterative.json")
    settings = Settings(kb={"embedding_model": "hash"}, program_path=path)
    runtime = build_service_runtime(settings, ServiceSettings(demo_corpus=True))
    assert type(runtime.program) is IterativeRAG
    assert runtime.info["strategy"] == "iterative" and runtime.model_id == "selfrag-iterative"
