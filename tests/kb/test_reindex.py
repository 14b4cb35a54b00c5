"""selfrag reindex: every chunk re-embedded (ids, texts, metadata unchanged) into a new collection that is
swapped in only when complete; an interruption loses nothing; BM25 stays consistent."""

import pytest
from typer.testing import CliRunner

from selfrag.cli.app import app
from selfrag.kb.collection_info import get_description, set_description
from selfrag.kb.embedder import HashEmbedder
from selfrag.kb.factory import build_knowledge_base
from selfrag.kb.reindex import NEW_SUFFIX, OLD_SUFFIX, reindex
from selfrag.settings import KBSettings, RetrievalSettings

DOCS = [(f"Document {i} about bikes number {i}. 第{i}篇关于自行车的文档。", {"source": f"d{i}.md", "doc_id": f"d{i}",
                                                                    "shelf": i % 3}) for i in range(12)]


def open_kb(tmp_path, model="auto", embedder=None, collection="books"):
    return build_knowledge_base(KBSettings(path=tmp_path / "chroma", collection=collection, embedding_model=model),
                                RetrievalSettings(), embedder=embedder)


def snapshot(kb):
    return sorted(kb.store.iter_all())


def names(kb):
    return {c.name for c in kb.store.client.list_collections()}


def test_reindex_keeps_chunks_and_swaps_the_embedder(tmp_path):
    kb = open_kb(tmp_path, "hash-64")
    kb.add_documents(DOCS)
    set_description(kb.store, "bike documents")
    before, bm25_before = snapshot(kb), kb.retrieve("bikes number 3", k=3, mode="bm25")
    report = reindex(kb.store.client, "books", HashEmbedder(32), batch_size=5)
    assert (report.chunks, report.old_embedder, report.new_embedder) == (12, "hash-64", "hash-32")
    after = open_kb(tmp_path)
    assert after.embedder.name == "hash-32" and snapshot(after) == before
    assert get_description(after.store) == "bike documents"
    assert [p.id for p in after.retrieve("bikes number 3", k=3, mode="bm25")] == [p.id for p in bm25_before]
    assert after.retrieve("Document 5", k=1, mode="dense")[0].id in {i for i, *_ in before}
    assert names(after) == {"books"}
    with pytest.raises(Exception, match="was built with embedder 'hash-32'"):
        open_kb(tmp_path, "hash-64").add_documents([("x", {"source": "x.md"})])


class Failing(HashEmbedder):
    def __init__(self, after: int):
        super().__init__(32)
        self.left = after

    def embed(self, texts):
        self.left -= 1
        if self.left < 0:
            raise RuntimeError("killed")
        return super().embed(texts)


def test_an_interrupted_reindex_loses_nothing_and_a_rerun_finishes(tmp_path):
    kb = open_kb(tmp_path, "hash-64")
    kb.add_documents(DOCS)
    before = snapshot(kb)
    with pytest.raises(RuntimeError):
        reindex(kb.store.client, "books", Failing(after=1), batch_size=5)
    left = open_kb(tmp_path)
    assert left.embedder.name == "hash-64" and snapshot(left) == before and len(left.retrieve("bikes", k=2)) == 2
    assert "books" + NEW_SUFFIX in names(left)
    reindex(kb.store.client, "books", HashEmbedder(32))
    assert open_kb(tmp_path).embedder.name == "hash-32" and names(kb) == {"books"}


def test_a_run_killed_between_the_renames_is_restored(tmp_path):
    kb = open_kb(tmp_path, "hash-64")
    kb.add_documents(DOCS)
    before = snapshot(kb)
    kb.store.client.get_collection("books").modify(name="books" + OLD_SUFFIX)  # as if killed after rename 1
    report = reindex(kb.store.client, "books", HashEmbedder(32))
    assert report.recovered and snapshot(open_kb(tmp_path)) == before and names(kb) == {"books"}


def test_a_run_killed_after_the_swap_has_its_old_copy_deleted_and_a_rerun_works(tmp_path):
    kb = open_kb(tmp_path, "hash-64")
    kb.add_documents(DOCS)
    before = snapshot(kb)
    kb.store.client.create_collection("books" + OLD_SUFFIX)  # as if killed after both renames, before the delete
    report = reindex(kb.store.client, "books", HashEmbedder(32))
    assert not report.recovered and names(kb) == {"books"} and snapshot(open_kb(tmp_path)) == before


def test_a_collection_re_created_empty_after_a_kill_between_the_renames_does_not_cost_the_data(tmp_path):
    kb = open_kb(tmp_path, "hash-64")
    kb.add_documents(DOCS)
    before = snapshot(kb)
    kb.store.client.get_collection("books").modify(name="books" + OLD_SUFFIX)  # killed after rename 1
    kb.store.client.create_collection("books")  # then a read re-created it, empty
    report = reindex(kb.store.client, "books", HashEmbedder(32))
    assert report.recovered and names(kb) == {"books"} and snapshot(open_kb(tmp_path)) == before


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SELFRAG_CONFIG", raising=False)
    monkeypatch.setenv("SELFRAG_KB__PATH", str(tmp_path / "chroma"))
    monkeypatch.setenv("COLUMNS", "200")
    return lambda *args: CliRunner().invoke(app, list(args))


def test_the_command(run, tmp_path):
    open_kb(tmp_path, "hash-64").add_documents(DOCS)
    r = run("reindex", "--collection", "books", "--embedder", "hash-32")
    assert r.exit_code == 0 and "re-embedded 12 chunk(s) of 'books': hash-64 → hash-32" in r.output, r.output
    r = run("reindex", "--collection", "books", "--embedder", "hash-32")
    assert r.exit_code == 0 and "already embedded" in r.output
    r = run("search", "bikes number 4", "--collection", "books", "-k", "1")
    assert r.exit_code == 0 and "Document 4" in r.output
    r = run("reindex", "--collection", "nope", "--embedder", "hash-32")
    assert r.exit_code == 2 and "no collection named 'nope'" in r.output
    r = run("reindex", "--collection", "books", "--embedder", "no-such-model")
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "is neither" in r.output
