"""``selfrag ingest --index / --description``, ``selfrag describe``, ``collections`` and ``search --index``
through typer's CliRunner, with the hashing embedder and a scripted LM behind the wiring."""

from __future__ import annotations

import dspy
import pytest

from tests.fakes import scripted_lm


@pytest.fixture
def lm(monkeypatch):
    """The scripted summariser / question writer that ``selfrag.wiring.build_lms`` hands out (counted)."""
    lm, engine = scripted_lm({
        "summarize_texts": lambda inputs: {"summary": "Summary: " + inputs["texts"][:80]},
        "hypothetical_questions": {"questions": ["What does it say?", "Which animal is it about?"]},
    })
    built = []

    def build_lms(settings):
        built.append(settings.lm.profile)
        return lm, None, dspy.JSONAdapter()

    monkeypatch.setattr("selfrag.wiring.build_lms", build_lms)
    engine.built = built
    return engine


def no_lm(monkeypatch):
    def refuse(settings):
        raise AssertionError("this index needs no LM")

    monkeypatch.setattr("selfrag.wiring.build_lms", refuse)


def test_sentence_children_need_no_lm_and_a_rebuild_adds_nothing(run, docs_dir, monkeypatch):
    no_lm(monkeypatch)
    r = run("ingest", str(docs_dir), "-q", "--index", "multi-representation", "--representations", "sentences")
    assert r.exit_code == 0, r.output
    assert "default.children" in r.stdout and "chunks added" in r.stdout
    r = run("ingest", "-q", "--index", "multi-representation", "--representations", "sentences")
    assert r.exit_code == 0, r.output
    rows = {cells[0]: cells[1] for line in r.stdout.splitlines()
            if len(cells := [c.strip() for c in line.split("│") if c.strip()]) == 2}
    assert rows["nodes added"] == "0" and rows["nodes unchanged"] == rows["nodes (total)"] != "0"
    r = run("collections")
    assert "multi-representation (" in r.stdout and "default.children" not in r.stdout


def test_raptor_and_lm_children_use_the_wired_lm_once_and_cache_it(run, docs_dir, lm):
    r = run("ingest", str(docs_dir), "-q", "--index", "raptor", "--index", "multi-representation",
            "--profile", "tiny")
    assert r.exit_code == 0, r.output
    assert lm.built == ["tiny"]  # one LM for both indexes, from the command's settings
    first = lm.count("summarize_texts"), lm.count("hypothetical_questions")
    assert first[0] > 0 and first[1] > 0
    assert "default.raptor" in r.stdout and "default.children" in r.stdout
    r = run("ingest", "-q", "--index", "raptor", "--index", "multi-representation", "--profile", "tiny")
    assert r.exit_code == 0, r.output
    assert (lm.count("summarize_texts"), lm.count("hypothetical_questions")) == first  # nothing summarised again
    r = run("collections")
    assert "raptor (" in r.stdout and "multi-representation (" in r.stdout


def test_the_summaries_progress_bar_is_on_stderr(run, docs_dir, lm):
    r = run("ingest", str(docs_dir), "--index", "raptor")
    assert r.exit_code == 0, r.output
    assert "summarising level 1" in r.stderr and "summarising" not in r.stdout


def test_search_over_an_index_and_retrieval_index_in_the_settings(run, docs_dir, monkeypatch):
    no_lm(monkeypatch)
    assert run("ingest", str(docs_dir), "-q", "--index", "multi-representation",
               "--representations", "sentences").exit_code == 0
    r = run("search", "Cats purr when content", "--index", "multi-representation", "-k", "1")
    assert r.exit_code == 0, r.output
    assert "multi-representation index" in r.stdout and "Cats are small carnivorous mammals" in r.stdout
    monkeypatch.setenv("SELFRAG_RETRIEVAL__INDEX", "raptor")  # configured, never built
    r = run("search", "cats")
    assert r.exit_code == 2 and "selfrag ingest --index raptor" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = run("search", "cats", "--index", "none")
    assert r.exit_code == 0 and "Cats" in r.stdout


def test_descriptions_at_ingest_and_with_describe_shown_by_collections(run, docs_dir):
    r = run("ingest", str(docs_dir / "cats.md"), "-q", "--collection", "pets", "--description", "  Facts about\n pets ")
    assert r.exit_code == 0, r.output
    assert "Facts about pets" in run("collections").stdout
    r = run("describe", "pets", "Cats, dogs and other animals")
    assert r.exit_code == 0, r.output
    listing = run("collections").stdout
    assert "Cats, dogs and other animals" in listing and "Facts about pets" not in listing
    assert run("ingest", "--description", "Only the description", "--collection", "pets").exit_code == 0
    assert "Only the description" in run("collections").stdout


@pytest.mark.parametrize("args, message", [
    (["ingest"], "nothing to do"),
    (["ingest", "--index", "bogus"], "unknown --index"),
    (["ingest", "--index", "raptor", "--representations", "summary"], "goes with --index multi-representation"),
    (["ingest", "--index", "multi-representation", "--representations", "pictures"], "--representations takes"),
    (["ingest", "--description", "x" * 301], "at most 300 characters"),
    (["ingest", "--index", "raptor", "--collection", "nothing-here"], "no collection named 'nothing-here'"),
    (["describe", "nothing-here", "text"], "no collection named 'nothing-here'"),
    (["search", "x", "--index", "trees"], "retrieval.index"),
])
def test_bad_index_and_description_options_are_one_line_exit_2(run, args, message):
    r = run(*args)
    assert r.exit_code == 2, r.output
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.output


def test_delete_collection_deletes_its_indexes_too_and_says_so(run, docs_dir, lm):
    """The indexes live in sibling collections: deleting a collection must not leave them behind, where
    the raptor copy of the deleted chunks would serve a re-created collection (issue 15, 7 and 8)."""
    built = run("ingest", str(docs_dir), "-q", "--index", "raptor", "--index", "multi-representation")
    assert built.exit_code == 0, built.output
    r = run("delete-collection", "default", "--yes")
    assert r.exit_code == 0, r.output
    assert "raptor" in r.stdout and "multi-representation" in r.stdout  # what will be deleted
    assert run("collections").stdout.count("default") == 0
    (docs_dir.parent / "new").mkdir()
    (docs_dir.parent / "new" / "trains.md").write_text("# Trains\n\nTrains run on rails between stations.\n")
    assert run("ingest", str(docs_dir.parent / "new"), "-q").exit_code == 0
    r = run("search", "Cats purr", "--index", "raptor")
    assert r.exit_code == 2 and "no raptor index" in r.stderr  # not the deleted collection's chunks


def test_removing_a_source_or_reingesting_warns_that_the_indexes_are_stale_until_rebuilt(run, docs_dir, lm, caplog):
    """Found in the issue-15 review: a RAPTOR index kept serving copies of removed chunks, silently."""
    assert run("ingest", str(docs_dir), "-q", "--index", "raptor").exit_code == 0
    r = run("remove-source", str(docs_dir / "dogs.txt"))
    assert r.exit_code == 0, r.output
    assert "the raptor index of collection 'default'" in r.stderr
    assert "selfrag ingest --index raptor --collection default" in r.stderr
    with caplog.at_level("WARNING"):
        assert run("search", "Dogs bark", "--index", "raptor").exit_code == 0
    assert "selfrag ingest --index raptor" in caplog.text  # still served, with the warning (logged to stderr)
    r = run("ingest", str(docs_dir), "-q")  # the file comes back: the chunks the index was built over
    assert r.exit_code == 0 and "the raptor index" not in r.stderr
    (docs_dir / "birds.md").write_text("# Birds\n\nBirds fly south in winter.\n")
    r = run("ingest", str(docs_dir), "-q")  # a new file: not in the index
    assert r.exit_code == 0 and "the raptor index" in r.stderr
    r = run("ingest", str(docs_dir), "-q", "--index", "raptor")  # rebuilt in the same command: no warning
    assert r.exit_code == 0 and "warning" not in r.stderr
    caplog.clear()
    with caplog.at_level("WARNING"):
        assert run("search", "Dogs bark", "--index", "raptor").exit_code == 0
    assert "raptor index" not in caplog.text
