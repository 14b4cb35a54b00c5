from __future__ import annotations

import os
import re

import pytest

from selfrag.kb.ingest import chunk_id
from programs.types import Passage, Retriever

REQUIRED = {"source", "title", "chunk_index", "content_hash", "language"}


def test_ingest_is_idempotent_and_metadata_complete(make_kb, docs_dir):
    kb = make_kb()
    first = kb.ingest([docs_dir], progress=False)
    assert first.files_loaded == 5 and first.documents == 6
    assert first.chunks_added == first.chunks_total == 6 == kb.count()
    again = kb.ingest([docs_dir], progress=False)
    assert again.chunks_added == 0 and again.chunks_unchanged == 6 and again.chunks_removed == 0
    assert kb.count() == 6
    for mode in ("dense", "bm25", "hybrid"):
        hits = kb.retrieve("capital of France", k=6, mode=mode)
        assert hits and all(isinstance(p, Passage) for p in hits)
        assert all(REQUIRED <= set(p.metadata) for p in hits)
    paris = kb.retrieve("Paris capital France", k=1, mode="bm25")[0]
    assert paris.metadata["doc_id"] == "p1" and paris.metadata["title"] == "Paris"
    assert paris.metadata["content_hash"] and paris.metadata["chunk_index"] == 0
    zh = kb.retrieve("人工智能", k=1, mode="bm25")[0]
    assert zh.metadata["language"] == "zh"


def test_changed_file_replaces_its_chunks_and_removed_file_can_be_deleted(make_kb, tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    f = d / "a.txt"
    f.write_text("Old sentence about apples.")
    (d / "b.txt").write_text("Bananas are yellow.")
    kb = make_kb(chunk_size=50, chunk_overlap=0)
    kb.ingest([d], progress=False)
    assert kb.count() == 2
    f.write_text("New sentence about apricots. " * 4)  # 4 sentences of 29 chars -> 4 chunks of <= 50
    rep = kb.ingest([d], progress=False)
    assert rep.chunks_removed == 1 and rep.chunks_added == 4 and kb.count() == 5
    assert all("apples" not in p.text for p in kb.retrieve("apples", k=10, mode="bm25"))
    f.unlink()
    assert kb.delete_source(f) == 4
    assert kb.count() == 1
    assert kb.delete_source(f) == 0
    assert [p.metadata["source"] for p in kb.retrieve("yellow", k=5, mode="bm25")] == [str((d / "b.txt").resolve())]


class CountingEmbedder:
    """The hashing embedder, counting the texts it embeds."""

    def __init__(self):
        from selfrag.kb.embedder import HashEmbedder

        self.inner, self.texts = HashEmbedder(128), 0
        self.name, self.dim = self.inner.name, self.inner.dim

    def embed(self, texts):
        self.texts += len(texts)
        return self.inner.embed(texts)


def test_values_chroma_stores_in_another_form_are_not_a_change_on_re_ingest(make_kb, tmp_path):
    # Chroma drops a NaN value and keeps a huge int as a float: re-ingesting the same file changes nothing
    # (else every ingest would move the collection's version: BM25 rebuilt, indexes stale, cache missed).
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"text": "Alpha doc.", "big": 12345678901234567890}\n{"text": "Beta doc.", "x": NaN}\n')
    kb = make_kb()
    kb.ingest([rows], progress=False)
    version = kb.fingerprint()
    report = kb.ingest([rows], progress=False)
    assert report.chunks_updated == 0 and kb.fingerprint() == version


def test_changed_metadata_of_unchanged_texts_replaces_the_stored_metadata(make_kb, tmp_path):
    d = tmp_path / "meta"
    d.mkdir()
    rows, page = d / "rows.jsonl", d / "page.html"
    rows.write_text('{"text": "Paris is the capital of France.", "doc_id": "p1", "title": "Paris", '
                    '"country": "FR", "year": 2020}\n')
    page.write_text("<html><head><title>Old title</title></head><body><p>Volcanoes erupt lava.</p></body></html>")
    embedder = CountingEmbedder()
    kb = make_kb(embedder=embedder)
    kb.ingest([d], progress=False)
    assert kb.retrieve("capital", k=1, mode="bm25", filters={"country": "FR"})  # the BM25 index is built
    version, embedded = kb.fingerprint(), embedder.texts

    rows.write_text('{"text": "Paris is the capital of France.", "doc_id": "p1", "title": "Paris, France", '
                    '"country": "FRA"}\n')  # a new title and value, "year" gone
    page.write_text(page.read_text().replace("Old title", "New title"))
    report = kb.ingest([d], progress=False)
    assert (report.chunks_added, report.chunks_updated, report.chunks_unchanged, report.chunks_removed) == (0, 2, 0, 0)
    assert embedder.texts == embedded and kb.count() == 2  # nothing re-embedded, nothing duplicated
    assert kb.fingerprint() != version
    for reader in (kb, make_kb(embedder=embedder)):  # this process, and another one (the BM25 index on disk)
        for mode in ("dense", "bm25", "hybrid"):
            assert reader.retrieve("capital", k=5, mode=mode, filters={"country": "FR"}) == [], mode
            hits = reader.retrieve("capital", k=5, mode=mode, filters={"country": "FRA"})
            assert [p.title for p in hits] == ["Paris, France"] and "year" not in hits[0].metadata, mode
            hits = reader.retrieve("volcanoes lava", k=5, mode=mode, filters={"title": "New title"})
            assert [p.text for p in hits] == ["Volcanoes erupt lava."], mode
    again = kb.ingest([d], progress=False)
    assert (again.chunks_updated, again.chunks_unchanged) == (0, 2) and kb.fingerprint() == make_kb().fingerprint()


def test_delete_source_of_a_folder(make_kb, docs_dir):
    kb = make_kb()
    kb.ingest([docs_dir], progress=False)
    assert kb.delete_source(docs_dir) == 6 and kb.is_empty()


def test_add_documents_preserves_doc_id_and_is_idempotent(make_kb):
    kb = make_kb()
    docs = [("Mount Everest is the highest mountain.", {"doc_id": "e1", "title": "Everest"}),
            ("The Nile is a long river in Africa.", {"doc_id": 7, "title": "Nile", "split": "dev"}),
            ("   ", {"doc_id": "blank"})]
    rep = kb.add_documents(docs)
    assert rep.chunks_added == 2 and kb.count() == 2
    assert kb.add_documents(docs).chunks_added == 0 and kb.count() == 2
    hit = kb.retrieve("Nile river", k=1, mode="dense")[0]
    assert hit.metadata["doc_id"] == "7" and hit.metadata["split"] == "dev" and hit.title == "Nile"
    assert REQUIRED <= set(hit.metadata)
    # same text under another doc_id is another document
    kb.add_documents([("Mount Everest is the highest mountain.", {"doc_id": "e2"})])
    assert kb.count() == 3


@pytest.mark.parametrize("where, message", [
    ({"source": {"$in": "x"}}, "field 'source': $in needs a non-empty list"),
    ({"source": [1, 2]}, "field 'source': a value needs a str, int, float or bool"),
    ({"source": None}, "field 'source': a value needs a str, int, float or bool"),
    ({"$or": [{"chunk_index": {"$gt": "0"}}, {"title": "x"}]}, "field 'chunk_index': $gt needs a number"),
])
def test_a_filter_operand_of_the_wrong_type_is_refused_in_every_mode(make_kb, docs_dir, where, message):
    from selfrag.errors import InputError

    kb = make_kb()
    kb.ingest([docs_dir], progress=False)
    for mode in ("dense", "bm25", "hybrid"):
        with pytest.raises(InputError, match=re.escape(message)):
            kb.retrieve("capital", k=3, mode=mode, filters=where)


def test_filters_apply_to_dense_bm25_and_hybrid(make_kb, docs_dir):
    kb = make_kb()
    kb.ingest([docs_dir], progress=False)
    for mode in ("dense", "bm25", "hybrid"):
        hits = kb.retrieve("capital", k=5, mode=mode, filters={"country": "DE"})
        assert [p.metadata["doc_id"] for p in hits] == ["b1"], mode
        hits = kb.retrieve("自然语言 cats capital", k=10, mode=mode, filters={"language": {"$in": ["zh"]}})
        assert hits and all(p.metadata["language"] == "zh" for p in hits), mode
    with pytest.raises(ValueError, match="unsupported filter operator"):
        kb.retrieve("x", k=1, mode="bm25", filters={"n": {"$regex": "a"}})


def test_retrievers_satisfy_protocol_and_hybrid_fuses(make_kb, docs_dir):
    kb = make_kb(dense_weight=1.0, bm25_weight=1.0, rrf_k=60)
    kb.ingest([docs_dir], progress=False)
    for mode in ("dense", "bm25", "hybrid"):
        assert isinstance(kb.retriever(mode), Retriever)
    dense = kb.retrieve("Dogs bark", k=6, mode="dense")
    bm25 = kb.retrieve("Dogs bark", k=6, mode="bm25")
    hybrid = kb.retrieve("Dogs bark", k=3, mode="hybrid")
    rank = lambda lst, pid: next((i for i, p in enumerate(lst, 1) if p.id == pid), None)
    top = hybrid[0]
    expected = sum(1 / (60 + r) for r in (rank(dense, top.id), rank(bm25, top.id)) if r)
    assert top.score == pytest.approx(expected)
    assert "Dogs" in top.text
    with pytest.raises(ValueError, match="mode"):
        kb.retriever("fuzzy")


def test_dense_similarity_survives_fusion_and_the_retrievers_name_their_embedder(make_kb, docs_dir, hash_embedder):
    """The similarity gate reads each passage's dense cosine after RRF replaced its score."""
    from programs.retriever_calls import retriever_embedder

    kb = make_kb()
    kb.ingest([docs_dir], progress=False)
    dense = {p.id: p.score for p in kb.retrieve("Dogs bark", k=20, mode="dense")}
    hybrid = kb.retrieve("Dogs bark", k=5, mode="hybrid")
    assert all(p.similarity == pytest.approx(dense[p.id]) for p in hybrid if p.id in dense)
    assert hybrid[0].similarity is not None and hybrid[0].score != hybrid[0].similarity
    assert all(p.similarity is None for p in kb.retrieve("Dogs bark", k=5, mode="bm25"))
    assert retriever_embedder(kb.retriever("hybrid")) == hash_embedder.name
    assert retriever_embedder(kb.retriever("dense")) == hash_embedder.name
    assert retriever_embedder(kb.retriever("bm25")) is None
    assert retriever_embedder(make_kb(dense_weight=0.0).retriever("hybrid")) is None


def test_bm25_index_survives_restart_and_rebuilds_when_stale(make_kb, docs_dir, tmp_path):
    kb = make_kb()
    kb.ingest([docs_dir], progress=False)
    kb.retrieve("cats", k=1, mode="bm25")
    stored = kb.bm25_dir / "selfrag_bm25.json"
    assert stored.exists()
    # a new process (new objects) loads the saved index without rebuilding
    kb2 = make_kb()
    index = kb2.bm25_index()
    assert len(index) == 6 and index.fingerprint == kb.bm25_index().fingerprint
    # another writer changes the collection behind kb2's back -> kb2 notices and rebuilds
    make_kb().add_documents([("Quokkas live on Rottnest Island.", {"doc_id": "q"})])
    hits = kb2.retrieve("quokkas", k=1, mode="bm25")
    assert hits and hits[0].metadata["doc_id"] == "q"
    # a saved index whose fingerprint does not match is ignored
    kb3 = make_kb()
    kb3.store.delete([hits[0].id])
    kb4 = make_kb()
    assert kb4.retrieve("quokkas", k=1, mode="bm25") == []
    assert len(kb4.bm25_index()) == kb4.count() == 6


def test_collections_are_separate_and_deletable(make_kb, docs_dir):
    a = make_kb("alpha")
    b = make_kb("beta")
    a.ingest([docs_dir], progress=False)
    assert b.is_empty() and a.count() == 6
    a.retrieve("x", k=1, mode="bm25")
    a.delete_collection()
    assert make_kb("alpha").is_empty()
    assert not a.bm25_dir.exists()


def test_invalid_collection_name(make_kb):
    with pytest.raises(ValueError, match="invalid collection name 'x'"):
        make_kb("x")


def test_semantic_chunker_setting(make_kb, tmp_path):
    kb = make_kb(chunker="semantic", semantic_threshold=0.99)
    kb.add_documents([("Cats purr. Stocks fell sharply. 北京是首都。", {"doc_id": "s"})])
    assert kb.count() == 3


def test_chunk_ids_depend_on_source_key_index_and_text():
    base = chunk_id("s", "k", 0, "t")
    assert base == chunk_id("s", "k", 0, "t")
    assert len({base, chunk_id("s2", "k", 0, "t"), chunk_id("s", "k2", 0, "t"),
                chunk_id("s", "k", 1, "t"), chunk_id("s", "k", 0, "t2")}) == 5


def test_empty_knowledge_base_returns_no_passages(make_kb):
    kb = make_kb("empty-kb")
    assert kb.is_empty() and kb.count() == 0
    for mode in ("dense", "bm25", "hybrid"):
        assert kb.retrieve("anything", mode=mode) == []
    with pytest.raises(ValueError, match="k must be a positive int"):
        kb.retriever("bm25").retrieve("x", k=0)


def test_default_k_and_mode_come_from_settings(make_kb, docs_dir):
    kb = make_kb(k=2, mode="bm25")
    kb.ingest([docs_dir], progress=False)
    hits = kb.retrieve("capital")
    assert len(hits) == 2 and {p.metadata["doc_id"] for p in hits} == {"p1", "b1"}


# ---------------------------------------------------------------- reconcile, self-heal, refuse footguns


def test_a_torn_bm25_index_on_disk_heals_itself(make_kb, docs_dir):
    kb = make_kb()
    kb.ingest([docs_dir], progress=False)
    assert kb.retrieve("capital of Germany", k=1, mode="bm25")
    chunks = kb.bm25_dir / "chunks.jsonl"
    chunks.write_text("".join(chunks.read_text().splitlines(keepends=True)[:2]))  # torn: 2 of 6 rows
    fresh = make_kb()  # another process
    hits = fresh.retrieve("capital of Germany", k=1, mode="bm25")
    assert hits and "Berlin" in hits[0].text
    assert len(fresh.retrieve("capital", k=5, mode="hybrid")) >= 2
    assert len(chunks.read_text().splitlines()) == 6  # rewritten whole


def test_reingesting_a_folder_prunes_vanished_and_unusable_files(make_kb, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("keep.md", "gone.md", "emptied.md", "garbled.txt"):
        (docs / name).write_text(f"# {name}\n\nSome text about {name}.\n")
    kb = make_kb()
    kb.ingest([docs], progress=False)
    ids_before = set(kb.store.all_ids())
    (docs / "gone.md").unlink()
    (docs / "emptied.md").write_text("")
    (docs / "garbled.txt").write_bytes("caf\xe9".encode("latin-1"))
    kept = make_kb().ingest([docs], progress=False, prune=False)
    assert sorted(os.path.basename(s) for s in kept.stale_sources) == ["emptied.md", "garbled.txt", "gone.md"]
    assert set(kb.store.all_ids()) == ids_before  # --no-prune: still served
    report = make_kb().ingest([docs], progress=False)
    assert sorted(os.path.basename(s) for s in report.pruned_sources) == ["emptied.md", "garbled.txt", "gone.md"]
    assert report.chunks_pruned == 3
    sources = {m["source"] for _, _, m in kb.store.iter_all(include_sources_only=True)}
    assert [os.path.basename(s) for s in sources] == ["keep.md"]
    assert not kb.retrieve("emptied", k=3, mode="bm25")


def test_reingesting_a_file_that_became_empty_drops_its_chunks(make_kb, tmp_path):
    f = tmp_path / "note.txt"
    f.write_text("Old content that must stop being served.")
    kb = make_kb()
    kb.ingest([f], progress=False)
    f.write_text("   ")
    report = kb.ingest([f], progress=False)
    assert report.nothing_ingested and report.chunks_pruned == 1 and kb.count() == 0


def test_hidden_files_of_an_ingested_folder_are_not_pruned(make_kb, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / ".hidden.md").write_text("# Hidden\n\nIngested on purpose, by name.\n")
    (docs / "open.md").write_text("# Open\n\nVisible.\n")
    kb = make_kb()
    kb.ingest([docs / ".hidden.md", docs], progress=False)
    assert kb.ingest([docs], progress=False).pruned_sources == []
    assert kb.count() == 2


def test_the_knowledge_base_folder_inside_the_tree_is_not_ingested(tmp_path, hash_embedder):
    from selfrag.kb.factory import build_knowledge_base
    from selfrag.settings import KBSettings, RetrievalSettings

    (tmp_path / "notes.md").write_text("# Notes\n\nReal notes.\n")
    kb = build_knowledge_base(KBSettings(path=tmp_path / "kbdata", collection="own"), RetrievalSettings(),
                              embedder=hash_embedder)
    kb.ingest([tmp_path], progress=False)
    kb.retrieve("notes", mode="bm25")  # writes the BM25 files (chunks.jsonl) into kbdata/
    report = kb.ingest([tmp_path], progress=False)
    sources = {m["source"] for _, _, m in kb.store.iter_all(include_sources_only=True)}
    assert [os.path.basename(s) for s in sources] == ["notes.md"]
    assert any("knowledge base's own folder" in s.reason for s in report.skipped)


@pytest.mark.parametrize("path", ["", "   ", "/", "//", "/.."])
def test_remove_source_refuses_empty_and_root(make_kb, docs_dir, path):
    from selfrag.errors import InputError

    kb = make_kb()
    kb.ingest([docs_dir], progress=False)
    with pytest.raises(InputError):
        kb.delete_source(path)
    assert kb.count() == 6


def test_sources_matching_a_folder_lists_each_source(make_kb, docs_dir):
    kb = make_kb()
    kb.ingest([docs_dir], progress=False)
    plan = kb.sources_matching(docs_dir)
    assert sorted(os.path.basename(s) for s in plan) == ["cats.md", "dogs.txt", "items.jsonl", "page.html", "zh.txt"]
    assert sum(len(v) for v in plan.values()) == 6 and kb.count() == 6  # nothing deleted by asking
