"""A service around a real SelfRAG program over the scripted LM engine and a HashEmbedder knowledge
base in a temp Chroma directory; plus a real uvicorn server on 127.0.0.1 for live streaming tests."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import dspy
import pytest
from fastapi.testclient import TestClient

from programs.selfrag import SelfRAG
from programs.settings import ProgramSettings
from selfrag.kb.embedder import HashEmbedder
from selfrag.service.app import create_app
from selfrag.service.process import free_port
from selfrag.service.knowledge import Collections
from selfrag.service.runtime import ServiceRuntime
from selfrag.service.settings import ServiceSettings
from selfrag.settings import KBSettings, RetrievalSettings
from tests.fakes import ScriptedEngine, scripted_lm
from tests.programs.test_selfrag import GOOD  # the happy-path script: grades the Zephyr passage relevant

DOCS = [
    ("The Zephyr bridge opened in 1931 and spans the river Oda.",
     {"source": "bridges.md", "title": "Bridges", "doc_id": "bridge"}),
    ("Oda river trout season runs from April to June.",
     {"source": "fishing.md", "title": "Fishing", "doc_id": "trout"}),
    ("Glass recycling in Norwich is collected every second Tuesday.",
     {"source": "waste.md", "title": "Waste", "doc_id": "glass"}),
]

QUESTION = "When did the Zephyr bridge open?"
LOCAL = "http://127.0.0.1"  # the Host a loopback service without a token answers (TestClient's own is "testserver")


class Gate:
    """A scripted reply that blocks its LM call until released (and tells when it was reached)."""

    def __init__(self, reply):
        self.reply = reply
        self.reached = threading.Event()
        self.release = threading.Event()

    def __call__(self, inputs):
        self.reached.set()
        assert self.release.wait(20), "the test never released the scripted LM"
        return self.reply


@dataclass
class Service:
    app: Any
    client: TestClient
    engine: ScriptedEngine
    collections: Collections
    runtime: ServiceRuntime

    def auth(self, token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}


def build_service(tmp_path, script: dict | None = None, settings: ServiceSettings | None = None,
                  token: str | None = None, kb: KBSettings | None = None, program_cfg: dict | None = None,
                  docs=DOCS) -> Service:
    kb = kb or KBSettings(path=tmp_path / "chroma", collection="docs")
    collections = Collections(kb, RetrievalSettings(mode="hybrid", k=3), embedder=HashEmbedder(64))
    if docs:
        collections.get(create=True).add_documents(docs)
    lm, engine = scripted_lm(dict(script or GOOD))  # a copy: tests may change their own script
    program = SelfRAG(collections.retriever(), config=ProgramSettings(**({"k": 2} | (program_cfg or {}))),
                      generator_lm=lm, adapter=dspy.JSONAdapter())
    runtime = ServiceRuntime(program=program, collections=collections)
    app = create_app(runtime, settings or ServiceSettings(), token=token)
    return Service(app=app, client=TestClient(app, base_url=LOCAL, raise_server_exceptions=False), engine=engine,
                   collections=collections, runtime=runtime)


@pytest.fixture
def make_service(tmp_path):
    made: list[Service] = []

    def _make(**kwargs) -> Service:
        service = build_service(tmp_path, **kwargs)
        service.client.__enter__()  # runs the lifespan
        made.append(service)
        return service

    yield _make
    for service in made:
        service.client.__exit__(None, None, None)


@pytest.fixture
def service(make_service) -> Service:
    return make_service()


def parse_sse(text: str) -> list[tuple[str, Any]]:
    """``(event, data)`` pairs of a server-sent event stream (comments skipped)."""
    import json

    events = []
    for block in text.split("\n\n"):
        name, data = "message", None
        for line in block.splitlines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
        if data is not None:
            events.append((name, data if data == "[DONE]" else json.loads(data)))
    return events


class LiveServer:
    """The app under a real uvicorn server on 127.0.0.1, in a thread."""

    def __init__(self, app):
        import uvicorn

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                                    lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> "LiveServer":
        self.thread.start()
        deadline = time.time() + 20
        while not self.server.started:
            if time.time() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture
def live(tmp_path):
    servers: list[LiveServer] = []

    def _live(**kwargs) -> tuple[Service, LiveServer]:
        service = build_service(tmp_path, **kwargs)
        server = LiveServer(service.app).__enter__()
        servers.append(server)
        return service, server

    yield _live
    for server in servers:
        server.__exit__()
