from __future__ import annotations

import pytest
from typer.testing import CliRunner

from selfrag.kb.embedder import HashEmbedder
from selfrag.kb.factory import build_knowledge_base
from selfrag.settings import KBSettings, RetrievalSettings


@pytest.fixture
def hash_embedder() -> HashEmbedder:
    return HashEmbedder(128)


@pytest.fixture
def make_kb(tmp_path, hash_embedder):
    """Build a KnowledgeBase over a temp Chroma path with the hashing embedder."""

    def _make(collection: str = "test", embedder=None, **kb_fields):
        retrieval_fields = {k: kb_fields.pop(k) for k in list(kb_fields) if k in RetrievalSettings.model_fields}
        kb = KBSettings(path=tmp_path / "chroma", collection=collection, **kb_fields)
        return build_knowledge_base(kb, RetrievalSettings(**retrieval_fields), embedder=embedder or hash_embedder)

    return _make


@pytest.fixture
def docs_dir(tmp_path):
    d = tmp_path / "docs"
    d.mkdir()
    (d / "cats.md").write_text("# Cats\n\nCats are small carnivorous mammals. Cats purr when content.\n")
    (d / "dogs.txt").write_text("Dogs are loyal animals. Dogs bark at strangers and love walks.\n")
    (d / "zh.txt").write_text("自然语言处理是人工智能的一个分支。它研究人与计算机之间用自然语言进行通信的方法。", encoding="utf-8")
    (d / "page.html").write_text(
        "<html><head><title>Volcanoes</title><style>p{}</style></head>"
        "<body><h1>Volcanoes</h1><p>Volcanoes erupt lava and ash.</p><script>var x=1;</script></body></html>"
    )
    (d / "items.jsonl").write_text(
        '{"text": "Paris is the capital of France.", "title": "Paris", "doc_id": "p1", "country": "FR"}\n'
        "not json\n"
        '{"text": "Berlin is the capital of Germany.", "title": "Berlin", "doc_id": "b1", "country": "DE"}\n'
    )
    return d


@pytest.fixture
def run(tmp_path, monkeypatch):
    """``run(*args)``: the CLI over a temp knowledge base with the hashing embedder (no model)."""
    from selfrag.cli.app import app

    monkeypatch.chdir(tmp_path)  # no selfrag.toml from the project
    monkeypatch.delenv("SELFRAG_CONFIG", raising=False)
    monkeypatch.setenv("SELFRAG_KB__PATH", str(tmp_path / "chroma"))
    monkeypatch.setenv("SELFRAG_KB__EMBEDDING_MODEL", "hash-64")
    monkeypatch.setenv("COLUMNS", "200")
    runner = CliRunner()

    def _run(*args: str):
        return runner.invoke(app, list(args))

    return _run
