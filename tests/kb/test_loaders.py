from __future__ import annotations

import os

import pytest

from selfrag.kb.loaders import load_paths


def test_loads_every_supported_type_with_titles(docs_dir):
    docs, skipped, loaded = load_paths([docs_dir])
    assert loaded == 5
    by_title = {d.title: d for d in docs}
    assert set(by_title) == {"Cats", "dogs", "zh", "Volcanoes", "Paris", "Berlin"}
    html = by_title["Volcanoes"].text
    assert "erupt lava" in html and "var x" not in html and "p{}" not in html
    paris = by_title["Paris"]
    assert paris.metadata["doc_id"] == "p1" and paris.metadata["country"] == "FR"
    assert paris.source == str((docs_dir / "items.jsonl").resolve())
    assert skipped == []  # a malformed JSONL line is logged, not a skipped file


def test_bad_files_are_skipped_with_reasons(tmp_path):
    (tmp_path / "empty.txt").write_text("   \n")
    (tmp_path / "binary.txt").write_bytes(b"\x00\x01\x02" * 100)
    (tmp_path / "latin1.txt").write_bytes("café au lait".encode("latin-1"))
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4 not really a pdf")
    (tmp_path / "bad.jsonl").write_text('{"no_text": 1}\n')
    (tmp_path / "ignored.bin").write_bytes(b"whatever")
    (tmp_path / "dangling.md").symlink_to(tmp_path / "gone.md")  # unreadable, even for root
    docs, skipped, loaded = load_paths([tmp_path])
    reasons = {os.path.basename(s.path): s.reason for s in skipped}
    assert docs == [] and loaded == 0
    assert reasons["empty.txt"] == "empty"
    assert reasons["binary.txt"] == "binary"
    assert reasons["latin1.txt"].startswith("undecodable")
    assert reasons["broken.pdf"].startswith("unreadable PDF")
    assert reasons["bad.jsonl"].startswith("no valid JSONL")
    assert "ignored.bin" not in reasons  # unsupported types in folders are ignored
    assert reasons["dangling.md"].startswith("unreadable")


def test_explicit_unsupported_file_is_reported(tmp_path):
    f = tmp_path / "data.csv"
    f.write_text("a,b")
    _, skipped, _ = load_paths([f])
    assert "unsupported" in skipped[0].reason


def test_missing_path_raises(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_paths([tmp_path / "nope"])


def test_pdf_text_is_extracted(tmp_path):
    import pypdf
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = pypdf.PdfWriter()
    page = writer.add_blank_page(width=300, height=200)
    font = DictionaryObject({NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"),
                             NameObject("/BaseFont"): NameObject("/Helvetica")})
    page[NameObject("/Resources")] = DictionaryObject(
        {NameObject("/Font"): DictionaryObject({NameObject("/F1"): writer._add_object(font)})})
    stream = DecodedStreamObject()
    stream.set_data(b"BT /F1 12 Tf 20 100 Td (Glaciers carve valleys.) Tj ET")
    page[NameObject("/Contents")] = writer._add_object(stream)
    writer.add_metadata({"/Title": "Glaciers"})
    with open(tmp_path / "g.pdf", "wb") as fh:
        writer.write(fh)
    docs, skipped, _ = load_paths([tmp_path / "g.pdf"])
    assert skipped == []
    assert docs[0].title == "Glaciers" and "Glaciers carve valleys." in docs[0].text


# ---------------------------------------------------------------- one bad input never aborts the ingest


def _reasons(skipped):
    return {os.path.basename(str(s.path)): s.reason for s in skipped}


def test_symlink_loops_and_non_utf8_names_are_skipped_with_reasons(tmp_path):
    root = tmp_path / "tree"
    root.mkdir()
    (root / "good.md").write_text("# Good\n\nUseful text.\n")
    (root / "a.md").symlink_to(root / "b.md")
    (root / "b.md").symlink_to(root / "a.md")  # a file symlink loop
    os.symlink(str(root), str(root / "loopdir"))  # a folder symlink (to its own parent)
    name = os.fsencode(str(root)) + b"/caf\xe9.txt"
    with open(name, "wb") as fh:
        fh.write(b"latin-1 named file")
    docs, skipped, loaded = load_paths([root])
    reasons = _reasons(skipped)
    assert [d.title for d in docs] == ["Good"] and loaded == 1
    assert reasons["a.md"] == reasons["b.md"] == "unreadable (symlink loop)"
    assert reasons["loopdir"] == "folder symlink (not followed)"
    assert reasons["caf\udce9.txt"] == "file name is not valid UTF-8"
    docs, skipped, _ = load_paths([root / "a.md", root / "good.md"])  # explicitly named: skipped too
    assert _reasons(skipped)["a.md"] == "unreadable (symlink loop)" and len(docs) == 1


def test_file_symlinks_out_of_the_tree_are_not_followed_unless_asked(tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text("Outside the ingested folder.")
    root = tmp_path / "tree"
    root.mkdir()
    (root / "inside.txt").write_text("Inside.")
    (root / "link.txt").symlink_to(outside)
    (root / "samedir.txt").symlink_to(root / "inside.txt")  # within the tree: fine
    docs, skipped, _ = load_paths([root])
    assert sorted(d.text for d in docs) == ["Inside.", "Inside."]
    assert _reasons(skipped)["link.txt"].startswith("symlink to a file outside the ingested folder")
    docs, skipped, _ = load_paths([root], follow_symlinks=True)
    assert "Outside the ingested folder." in [d.text for d in docs] and skipped == []


def test_an_unreadable_explicit_path_and_subfolder_are_skipped(tmp_path, monkeypatch):
    """As root, permissions do not apply: the refusals are simulated where the OS would raise them."""
    root = tmp_path / "tree"
    (root / "locked").mkdir(parents=True)
    (root / "locked" / "inner.txt").write_text("never read")
    (root / "ok.txt").write_text("Readable text.")
    hidden = tmp_path / "private" / "doc.txt"
    hidden.parent.mkdir()
    hidden.write_text("never read either")
    real_stat, real_scandir = os.stat, os.scandir

    def stat(path, *args, **kwargs):
        if str(path) == str(hidden):
            raise PermissionError(13, "Permission denied", str(path))
        return real_stat(path, *args, **kwargs)

    def scandir(path="."):
        if str(path) == str(root / "locked"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "stat", stat)
    monkeypatch.setattr(os, "scandir", scandir)
    docs, skipped, loaded = load_paths([hidden, root])
    reasons = _reasons(skipped)
    assert [d.text for d in docs] == ["Readable text."]
    assert reasons["doc.txt"].startswith("permission denied")
    assert reasons["locked"] == "unreadable folder (Permission denied)"


def test_bad_jsonl_lines_are_listed_by_line_and_the_rest_loaded(tmp_path):
    f = tmp_path / "rows.jsonl"
    f.write_text("\n".join([
        '{"text": "Good row one.", "doc_id": "g1"}',
        '{"text": "Empty key.", "": 1}',
        '{"text": "Dollar key.", "$where": 1}',
        '{"text": "Nested dollar.", "metadata": {"$gt": 2}}',
        '{"text": "Hash key.", "#document": "x"}',
        '{"text": "Lone surrogate \\udcff here."}',
        '"just a string"',
        'not json',
        '{"text": "Good row two.", "doc_id": "g2", "ok$": 1}',
    ]) + "\n")
    lines = []
    docs, skipped, loaded = load_paths([f], skipped_lines=lines)
    assert [d.text for d in docs] == ["Good row one.", "Good row two."] and skipped == [] and loaded == 1
    by_line = {s.path.rsplit(":", 1)[1]: s.reason for s in lines}
    assert by_line["2"].startswith("line 2: metadata key '' is not allowed")
    assert "'$where'" in by_line["3"] and "'$gt'" in by_line["4"] and "'#document'" in by_line["5"]
    assert by_line["6"] == "line 6: invalid Unicode (a lone surrogate escape)"
    assert by_line["7"] == "line 7: not an object with a non-empty 'text'"
    assert by_line["8"] == "line 8: not valid JSON"
    assert all(s.path.startswith(str(f.resolve())) for s in lines)


def test_the_knowledge_base_folder_is_never_ingested(tmp_path):
    (tmp_path / "notes.md").write_text("# Notes\n\nReal notes.\n")
    kb_home = tmp_path / ".selfrag-kb"
    kb_home.mkdir()
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "chunks.jsonl").write_text('{"text": "an index file, not a document"}\n')
    docs, skipped, _ = load_paths([tmp_path], exclude=[tmp_path / "store"])
    assert [d.title for d in docs] == ["Notes"]
    assert _reasons(skipped)["store"] == "the knowledge base's own folder (never ingested)"
    docs, skipped, _ = load_paths([tmp_path / "store" / "chunks.jsonl"], exclude=[tmp_path / "store"])
    assert docs == [] and "knowledge base's own folder" in skipped[0].reason


def test_jsonl_lines_end_at_newlines_only_and_id_zero_is_an_id(tmp_path):
    import json

    rows = [{"doc_id": 0, "text": "first\u2028still the first record"}, {"id": 1, "text": "second\x85same"},
            {"text": "third", "title": "T\u2029x"}]
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n",
                                      encoding="utf-8")
    docs, skipped, _ = load_paths([tmp_path / "d.jsonl"], skipped_lines=(lines := []))
    assert [d.metadata.get("doc_id") for d in docs] == ["0", "1", None] and lines == [] and skipped == []
    assert docs[0].text == "first\u2028still the first record" and [d.metadata["line"] for d in docs] == [1, 2, 3]


def test_html_inline_tags_join_their_words_and_blocks_are_paragraphs(tmp_path):
    (tmp_path / "p.html").write_text(
        "<html><head><title>Heron</title></head><body><p>The <b>Heron</b> has a range of <a href='#'>120 km</a>\n"
        "on one charge.</p><p>红隼<b>工坊</b>在上海。</p><ul><li>one</li><li>two<br>three</li></ul></body></html>",
        encoding="utf-8")
    doc = load_paths([tmp_path / "p.html"])[0][0]
    assert doc.text == "The Heron has a range of 120 km on one charge.\n\n红隼工坊在上海。\n\none\n\ntwo\nthree"


def test_markdown_title_from_front_matter_then_a_heading_outside_code(tmp_path):
    (tmp_path / "a.md").write_text("---\ntitle: Setup guide\n---\n\n```bash\n# install the deps\n```\n# Later\n")
    (tmp_path / "b.md").write_text("```sh\n# not a heading\n```\n\n## Real heading\ntext\n")
    (tmp_path / "c.md").write_text("---\n# Intro\ntext\n---\n## Next\n")  # horizontal rules, not front matter
    (tmp_path / "d.md").write_text("```js``` is inline code\n# Title after\n")
    (tmp_path / "e.md").write_bytes(b"---\r\ntitle: CRLF title\r\n---\r\n# H\r\n")
    titles = {d.source.rsplit("/", 1)[1]: d.title for d in load_paths([tmp_path])[0]}
    assert titles == {"a.md": "Setup guide", "b.md": "Real heading", "c.md": "Intro", "d.md": "Title after",
                      "e.md": "CRLF title"}


def test_html_pre_keeps_its_lines_and_indentation(tmp_path):
    (tmp_path / "c.html").write_text("<body>Code:<pre>def f():\n    return 1</pre>after</body>", encoding="utf-8")
    assert load_paths([tmp_path / "c.html"])[0][0].text == "Code:\n\ndef f():\n    return 1\n\nafter"
