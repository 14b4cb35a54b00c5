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
