"""Search, collections, stats, chunks, uploads (replace, unchanged) and source removal."""

NOTES = b"# Heron range\n\nThe Heron cargo bike has a range of 85 km on one battery.\n"


def test_search_in_every_mode(service):
    for mode in ("dense", "bm25", "hybrid"):
        r = service.client.post("/v1/search", json={"query": "Zephyr bridge", "k": 1, "mode": mode})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["mode"] == mode and body["collection"] == "docs"
        assert body["passages"][0]["metadata"]["doc_id"] == "bridge"


def test_search_filters_default_k_and_errors(service):
    r = service.client.post("/v1/search", json={"query": "river", "filters": {"doc_id": "trout"}})
    assert [p["metadata"]["doc_id"] for p in r.json()["passages"]] == ["trout"]
    assert len(service.client.post("/v1/search", json={"query": "the"}).json()["passages"]) <= 3  # retrieval.k
    r = service.client.post("/v1/search", json={"query": "x", "filters": {"$bogus": 1}})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request"
    r = service.client.post("/v1/search", json={"query": "x", "collection": "missing"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "collection_not_found"
    r = service.client.post("/v1/search", json={"query": "x", "collection": "../etc"})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request"


def test_a_filter_operand_of_the_wrong_type_is_a_422_in_every_mode(service):
    for filters in ({"source": {"$in": "x"}}, {"source": [1, 2]}, {"source": None}):
        for mode in ("dense", "bm25", "hybrid"):
            r = service.client.post("/v1/search", json={"query": "Zephyr", "mode": mode, "filters": filters})
            assert r.status_code == 422, (filters, mode, r.text)
            assert r.json()["error"]["code"] == "invalid_request"
            assert r.json()["error"]["message"].startswith("filters: filter on field 'source': ")


def test_collections_and_stats(service):
    body = service.client.get("/v1/collections").json()
    assert body == {"default": "docs", "collections": [{"name": "docs", "chunks": 3}]}
    stats = service.client.get("/v1/collections/docs/stats").json()
    assert stats["collection"] == "docs" and stats["chunks"] == 3 and stats["sources"] == 3
    assert stats["embedder"] == "hash-64" and "bm25_index" not in stats  # no local paths leak
    r = service.client.get("/v1/collections/nope/stats")
    assert r.status_code == 404 and r.json()["error"]["code"] == "collection_not_found"
    assert [c["name"] for c in service.client.get("/v1/collections").json()["collections"]] == ["docs"]  # not created


def test_upload_then_search_ask_replace_and_remove(service):
    c = service.client
    r = c.post("/v1/collections/bikes/documents", files=[("files", ("heron.md", NOTES)),
                                                         ("files", ("../../etc/notes.txt", b"Bikes need oil."))])
    assert r.status_code == 200, r.text
    report = r.json()
    assert report["collection"] == "bikes" and report["files_loaded"] == 2 and report["documents"] == 2
    assert report["chunks_added"] == 2 and report["skipped"] == []
    assert report["sources"] == ["upload:heron.md", "upload:notes.txt"]  # directories stripped
    hits = c.post("/v1/search", json={"query": "Heron range", "collection": "bikes", "mode": "bm25"}).json()
    assert hits["passages"][0]["metadata"]["source"] == "upload:heron.md"
    assert hits["passages"][0]["metadata"]["title"] == "Heron range"
    chunk_id = hits["passages"][0]["id"]
    chunk = c.get(f"/v1/collections/bikes/chunks/{chunk_id}").json()
    assert "85 km" in chunk["text"]
    assert c.get("/v1/collections/bikes/chunks/nope").json()["error"]["code"] == "chunk_not_found"

    again = c.post("/v1/collections/bikes/documents", files={"files": ("heron.md", NOTES)}).json()
    assert again["chunks_added"] == 0 and again["chunks_unchanged"] == 1
    changed = c.post("/v1/collections/bikes/documents",
                     files={"files": ("heron.md", NOTES.replace(b"85", b"90"))}).json()
    assert changed["chunks_added"] == 1 and changed["chunks_removed"] == 1
    hits = c.post("/v1/search", json={"query": "Heron range km", "collection": "bikes", "mode": "bm25"}).json()
    assert "90 km" in hits["passages"][0]["text"] and all("85 km" not in p["text"] for p in hits["passages"])

    gone = c.delete("/v1/collections/bikes/sources/heron.md")
    assert gone.json() == {"collection": "bikes", "source": "upload:heron.md", "chunks_removed": 1}
    again = c.delete("/v1/collections/bikes/sources/heron.md")
    assert again.status_code == 404 and again.json()["error"]["code"] == "source_not_found"
    hits = c.post("/v1/search", json={"query": "Heron range", "collection": "bikes", "mode": "bm25"}).json()
    assert all(p["metadata"]["source"] != "upload:heron.md" for p in hits["passages"])
    assert c.delete("/v1/collections/docs/sources/bridges.md").json()["chunks_removed"] == 1  # an ingested source


def test_an_uploaded_document_is_answerable(service):
    service.engine.script["grade_relevance"] = lambda inp: {
        "relevance": "relevant" if "Heron" in inp["passage"] else "irrelevant"}
    service.client.post("/v1/collections/docs/documents", files={"files": ("heron.md", NOTES)})
    result = service.client.post("/v1/ask", json={"question": "What is the range of the Heron cargo bike?"}).json()
    assert [c["source"] for c in result["citations"]] == ["upload:heron.md"]
    assert not result["abstained"]


def test_removing_the_root_or_an_empty_source_is_a_422_with_its_reason(service):
    for path, reason in (("//", "refusing to remove every source under the filesystem root"),
                         (".", "the source to remove is empty")):
        r = service.client.delete(f"/v1/collections/docs/sources/{path}")
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request", r.text
        assert r.json()["error"]["message"].startswith(reason)
    assert service.client.get("/v1/collections/docs/stats").json()["chunks"] == 3


def test_a_collection_built_with_another_embedder_is_a_409_naming_the_fix(service, tmp_path):
    from selfrag.kb.embedder import HashEmbedder
    from selfrag.kb.factory import build_knowledge_base
    from selfrag.settings import KBSettings, RetrievalSettings

    other = build_knowledge_base(KBSettings(path=tmp_path / "chroma", collection="other"), RetrievalSettings(),
                                 embedder=HashEmbedder(128))
    other.add_documents([("Owls hunt at night.", {"source": "owls"})])
    c = service.client
    for r in (c.post("/v1/search", json={"query": "owls", "collection": "other"}),
              c.post("/v1/ask", json={"question": "When do owls hunt?", "collection": "other"}),
              c.post("/v1/collections/other/documents", files={"files": ("a.txt", b"Owls again.")})):
        assert r.status_code == 409 and r.json()["error"]["code"] == "embedder_mismatch", r.text
        message = r.json()["error"]["message"]
        assert "built with embedder 'hash-128'" in message and "selfrag reindex --collection other" in message
    assert other.count() == 1


def test_uploaded_file_names_lose_their_directories_and_odd_characters():
    import pytest

    from selfrag.service.errors import ServiceError
    from selfrag.service.uploads import safe_filename

    assert safe_filename("../../etc/résumé 2024.txt") == "résumé 2024.txt"
    assert safe_filename("C:\\Users\\me\\notes.md") == "notes.md"
    assert safe_filename("a<script>b.md") == "a_script_b.md"
    for bad in ("", "..", "/", None):
        with pytest.raises(ServiceError):
            safe_filename(bad)


def test_a_failed_re_upload_keeps_the_earlier_version(service):
    c = service.client
    url = "/v1/collections/docs/documents"
    assert c.post(url, files={"files": ("heron.md", NOTES)}).json()["chunks_added"] == 1
    for broken in (b"   \n", "caf\xe9".encode("latin-1")):  # empty, undecodable
        r = c.post(url, files={"files": ("heron.md", broken)})
        assert r.status_code == 422 and r.json()["error"]["code"] == "nothing_ingested"
    r = c.post(url, files={"files": ("heron.jsonl", b'{"text": "Heron owners ride daily."}\n')})
    assert r.status_code == 200
    r = c.post(url, files={"files": ("heron.jsonl", b"not json\n")})
    assert r.status_code == 422
    for query, source in (("Heron range km", "upload:heron.md"), ("Heron owners ride", "upload:heron.jsonl")):
        hits = c.post("/v1/search", json={"query": query, "mode": "bm25"}).json()["passages"]
        assert hits and hits[0]["metadata"]["source"] == source
    assert c.get("/v1/collections/docs/stats").json()["chunks"] == 3 + 2


def test_bad_jsonl_lines_of_an_upload_are_reported_under_its_name(service):
    data = b'{"text": "Owls hunt at night."}\nnot json\n{"notext": 1}\n'
    r = service.client.post("/v1/collections/docs/documents", files={"files": ("owls.jsonl", data)})
    assert r.status_code == 200, r.text
    lines = r.json()["skipped_lines"]
    assert [s["path"] for s in lines] == ["owls.jsonl:2", "owls.jsonl:3"]
    assert "not valid JSON" in lines[0]["reason"] and "selfrag-upload-" not in r.text
