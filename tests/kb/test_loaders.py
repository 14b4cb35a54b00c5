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
