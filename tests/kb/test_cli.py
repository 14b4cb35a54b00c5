from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from selfrag.cli.app import app


def test_ingest_search_stats_collections_and_removal(run, docs_dir, tmp_path):
    r = run("ingest", str(docs_dir), "--quiet")
    assert r.exit_code == 0, r.output
    assert "chunks added" in r.output and "6" in r.output
    r = run("ingest", str(docs_dir), "-q")
    assert r.exit_code == 0 and "chunks unchanged" in r.output
    r = run("search", "capital of Germany", "-k", "1", "--mode", "bm25")
    assert r.exit_code == 0 and "Berlin" in r.output and "Paris" not in r.output
    r = run("search", "capital", "--mode", "hybrid", "--where", '{"country": "FR"}')
    assert r.exit_code == 0 and "Paris" in r.output and "Berlin" not in r.output
    r = run("stats")
    assert r.exit_code == 0 and "zh: 1" in r.output and "hash-64" in r.output
    r = run("collections")
    assert r.exit_code == 0 and "default" in r.output
    r = run("remove-source", str(docs_dir / "items.jsonl"))
    assert r.exit_code == 0 and "removed 2 chunk(s)" in r.output
    r = run("remove-source", str(docs_dir / "items.jsonl"))
    assert r.exit_code == 1
    r = run("ingest", str(docs_dir / "cats.md"), "-q", "--collection", "other")
    assert r.exit_code == 0
    r = run("delete-collection", "other", "--yes")
    assert r.exit_code == 0 and "deleted" in r.output
    r = run("collections")
    assert "other" not in r.output
    r = run("delete-collection", "other", "--yes")
    assert r.exit_code == 1


def test_missing_path_exits_2_with_message(run, tmp_path):
    r = run("ingest", str(tmp_path / "nope.txt"))
    assert r.exit_code == 2 and "does not exist" in r.output


def test_all_bad_inputs_exit_nonzero_and_partial_success_exits_zero(run, tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "empty.txt").write_text("")
    (bad / "bin.md").write_bytes(b"\x00\xff" * 50)
    r = run("ingest", str(bad), "-q")
    assert r.exit_code == 1
    assert "empty.txt" in r.output and "bin.md" in r.output and "nothing was ingested" in r.output
    (bad / "good.txt").write_text("Some good text.")
    r = run("ingest", str(bad), "-q")
    assert r.exit_code == 0 and "skipped files" in r.output and "binary" in r.output


def test_bad_mode_is_rejected(run):
    r = run("search", "x", "--mode", "fuzzy")
    assert r.exit_code == 2 and "--mode" in r.output


def test_delete_collection_asks_first(run, docs_dir, monkeypatch):
    assert run("ingest", str(docs_dir / "cats.md"), "-q", "--collection", "other").exit_code == 0
    r = run("delete-collection", "other")  # not a terminal and no --yes: refused, nothing deleted
    assert r.exit_code == 2 and "--yes" in r.output
    monkeypatch.setattr("selfrag.cli.kb.stdin_is_interactive", lambda: True)
    runner = CliRunner()
    r = runner.invoke(app, ["delete-collection", "other"], input="n\n")
    assert r.exit_code == 1 and "delete collection 'other'" in r.output
    assert "other" in run("collections").output
    r = runner.invoke(app, ["delete-collection", "other"], input="y\n")
    assert r.exit_code == 0 and "deleted collection" in r.output
    assert "other" not in run("collections").output


def test_short_c_is_config_and_collection_is_long_only(run, docs_dir, tmp_path):
    cfg = tmp_path / "other.toml"
    cfg.write_text('[kb]\ncollection = "fromfile"\n')
    r = run("ingest", str(docs_dir / "cats.md"), "-q", "-c", str(cfg))
    assert r.exit_code == 0 and "'fromfile'" in r.output
    r = run("stats", "--config", str(cfg))
    assert r.exit_code == 0 and "'fromfile'" in r.output
    r = run("stats", "-c", "fromfile")  # -c is a config file now, not a collection
    assert r.exit_code == 2 and "config file not found: fromfile" in r.output


@pytest.mark.parametrize("command", [
    ["ingest", "."], ["search", "x"], ["collections"], ["stats"], ["remove-source", "x"],
    ["delete-collection", "x", "--yes"],
])
def test_malformed_toml_is_one_line_for_every_kb_command(run, tmp_path, command):
    (tmp_path / "selfrag.toml").write_text('[kb]\ncollection = "x"\nchunk_size = \n')
    r = run(*command)
    assert r.exit_code == 2, r.output
    assert r.output.count("\n") == 1 and "selfrag.toml" in r.output and "line 3" in r.output
    assert "Traceback" not in r.output


def test_invalid_collection_name_is_a_user_error(run):
    r = run("stats", "--collection", "x")
    assert r.exit_code == 2 and "invalid collection name 'x'" in r.output


def test_bad_filter_operator_is_a_user_error(run, docs_dir):
    assert run("ingest", str(docs_dir), "-q").exit_code == 0
    r = run("search", "capital", "--where", '{"country": {"$like": "F"}}')
    assert r.exit_code == 2 and "unsupported filter operator '$like'" in r.output


def test_search_where_follows_changed_metadata_of_a_re_ingested_file(run, tmp_path):
    f = tmp_path / "rows.jsonl"
    f.write_text('{"text": "Paris is the capital of France.", "doc_id": "p1", "status": "draft"}\n')
    assert run("ingest", str(f), "-q").exit_code == 0
    assert "1 result(s)" in run("search", "capital", "--mode", "bm25", "--where", '{"status": "draft"}').output
    f.write_text('{"text": "Paris is the capital of France.", "doc_id": "p1", "status": "final"}\n')
    r = run("ingest", str(f), "-q")
    assert r.exit_code == 0 and re.search(r"chunks with new metadata\s*│\s*1\s", r.stdout)
    for mode in ("bm25", "dense", "hybrid"):
        assert "0 result(s)" in run("search", "capital", "--mode", mode, "--where", '{"status": "draft"}').output
        r = run("search", "capital", "--mode", mode, "--where", '{"status": "final"}')
        assert r.exit_code == 0 and "1 result(s)" in r.output and "Paris" in r.output, mode


@pytest.mark.parametrize("mode", ["dense", "bm25"])
@pytest.mark.parametrize("where, field", [('{"source": {"$in": "x"}}', "'source': $in"),
                                          ('{"country": [1, 2]}', "'country': a value"),
                                          ('{"country": null}', "'country': a value")])
def test_a_filter_operand_of_the_wrong_type_is_a_user_error(run, docs_dir, mode, where, field):
    assert run("ingest", str(docs_dir), "-q").exit_code == 0
    r = run("search", "capital", "--mode", mode, "--where", where)
    assert r.exit_code == 2 and f"filter on field {field} needs" in r.output and "Traceback" not in r.output
    assert len(r.stderr.strip().splitlines()) == 1


def test_an_unreachable_chroma_server_is_one_line(run, monkeypatch):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("SELFRAG_KB__SERVER", "http")
    monkeypatch.setenv("SELFRAG_KB__PORT", str(port))
    r = run("collections")
    assert r.exit_code == 1 and r.output.startswith(f"error: cannot reach the Chroma server at 127.0.0.1:{port}")


# ---------------------------------------------------------------- hardening (issue 15)


def _collections(tmp_path):
    from selfrag.kb.factory import list_collections
    from selfrag.settings import KBSettings

    return dict(list_collections(KBSettings(path=tmp_path / "chroma")))


@pytest.mark.parametrize("command", [["search", "x"], ["stats"], ["remove-source", "x.md"]])
def test_reading_an_unknown_collection_is_refused_and_does_not_create_it(run, docs_dir, tmp_path, command):
    assert run("ingest", str(docs_dir), "-q").exit_code == 0
    r = run(*command, "--collection", "handbok")
    assert r.exit_code == 2
    assert r.stderr == (f"error: no collection named 'handbok' at {tmp_path / 'chroma'} (existing: default); "
                        "create it with `selfrag ingest PATH --collection NAME`\n")
    assert set(_collections(tmp_path)) == {"default"}


@pytest.mark.parametrize("index", ["raptor", "multi-representation"])
def test_searching_an_index_never_built_is_refused_and_does_not_create_it(run, docs_dir, tmp_path, index):
    assert run("ingest", str(docs_dir), "-q").exit_code == 0
    r = run("search", "cats", "--index", index)
    assert r.exit_code == 2 and f"selfrag ingest --index {index}" in r.stderr
    assert set(_collections(tmp_path)) == {"default"}


def test_an_ingest_where_every_file_is_skipped_creates_no_collection(run, tmp_path):
    (tmp_path / "empty.txt").write_text("  \n")
    r = run("ingest", str(tmp_path / "empty.txt"), "-q", "--collection", "fresh")
    assert r.exit_code == 1 and "nothing was ingested" in r.output
    assert not (tmp_path / "chroma").exists()  # not even the store's folder
    assert run("ingest", str(tmp_path / "empty.txt"), "-q").exit_code == 1 and _collections(tmp_path) == {}
    (tmp_path / "ok.txt").write_text("Some text.")
    assert run("ingest", str(tmp_path / "ok.txt"), "-q").exit_code == 0
    assert run("ingest", str(tmp_path / "empty.txt"), "-q", "--collection", "fresh").exit_code == 1
    assert set(_collections(tmp_path)) == {"default"}


def test_markup_and_escapes_in_names_and_texts_never_crash(run, tmp_path):
    folder = tmp_path / "[b]odd["  # with the file names below, each path reads "…[b]odd[/b]…": a closing tag
    folder.mkdir()
    (folder / "b] \x1b[31mnote.md").write_text("# [/b] title [link=x]\n\nText with [/b] markup and \x1b]0;pwn\x07 escapes.\n")
    (folder / "b] empty.txt").write_text("")
    r = run("ingest", str(folder), "-q")
    assert r.exit_code == 0, r.output
    assert "[b]odd[/b] empty.txt" in r.stdout and "\x1b" not in r.stdout  # the skipped file, as text
    r = run("search", "markup", "--mode", "bm25")
    assert r.exit_code == 0 and "[/b] markup" in r.stdout and "[b]odd[/b] note.md" in r.stdout
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout
    r = run("remove-source", str(folder / "b] nothing"))
    assert r.exit_code == 1 and "[b]odd[/b] nothing" in r.stderr
    r = run("stats", "--collection", "[/b]x")
    assert r.exit_code == 2 and "invalid collection name '[/b]x'" in r.stderr


@pytest.mark.parametrize("source", ["", "/"])
def test_remove_source_refuses_empty_and_root(run, docs_dir, tmp_path, source):
    assert run("ingest", str(docs_dir), "-q").exit_code == 0
    r = run("remove-source", source, "--yes")
    assert r.exit_code == 2 and r.stderr.startswith("error: ")
    assert _collections(tmp_path)["default"] == 6


def test_remove_source_of_several_sources_lists_them_and_asks(run, docs_dir, tmp_path, monkeypatch):
    assert run("ingest", str(docs_dir), "-q").exit_code == 0
    r = run("remove-source", str(docs_dir))
    assert r.exit_code == 2 and "5 sources (6 chunks)" in r.stdout and "cats.md" in r.stdout
    assert "--yes" in r.stderr and _collections(tmp_path)["default"] == 6
    monkeypatch.setattr("selfrag.cli.kb.stdin_is_interactive", lambda: True)
    r = CliRunner().invoke(app, ["remove-source", str(docs_dir)], input="n\n")
    assert r.exit_code == 1 and _collections(tmp_path)["default"] == 6
    r = run("remove-source", str(docs_dir), "--yes")
    assert r.exit_code == 0 and "removed 6 chunk(s)" in r.stdout and _collections(tmp_path)["default"] == 0


def test_reingest_prunes_unless_no_prune(run, docs_dir, tmp_path):
    assert run("ingest", str(docs_dir), "-q").exit_code == 0
    (docs_dir / "dogs.txt").unlink()
    r = run("ingest", str(docs_dir), "-q", "--no-prune")
    assert r.exit_code == 0 and "kept with --no-prune" in r.stderr and "dogs.txt" in r.stderr
    assert _collections(tmp_path)["default"] == 6
    r = run("ingest", str(docs_dir), "-q")
    assert r.exit_code == 0 and "pruned" in r.stdout and "dogs.txt" in r.stdout
    assert _collections(tmp_path)["default"] == 5


def test_a_bad_jsonl_line_is_listed_with_file_and_line(run, tmp_path):
    f = tmp_path / "rows.jsonl"
    f.write_text('{"text": "Fine row."}\n{"text": "Bad key.", "$where": 1}\n')
    r = run("ingest", str(f), "-q")
    assert r.exit_code == 0 and "skipped lines" in r.stdout and "rows.jsonl:2" in r.stdout
    assert "'$where'" in r.stdout and _collections(tmp_path)["default"] == 1


def test_an_unusable_embedding_model_is_a_config_error_before_the_store_is_touched(run, docs_dir, tmp_path,
                                                                                   monkeypatch):
    monkeypatch.setenv("SELFRAG_KB__EMBEDDING_MODEL", "no-such-model")
    r = run("ingest", str(docs_dir), "-q")
    assert r.exit_code == 2 and r.stderr.startswith("error: kb.embedding_model 'no-such-model' is neither")
    assert not (tmp_path / "chroma").exists()
    monkeypatch.setenv("SELFRAG_KB__EMBEDDING_MODEL", str(docs_dir))  # a folder, but not a model
    r = run("ingest", str(docs_dir), "-q")
    assert r.exit_code == 2 and "cannot be loaded" in r.stderr and r.stderr.count("\n") == 1
