"""Readers of the public datasets, the corpus documents and the hand-written retrieve-decision set."""

from collections import Counter

import pytest

from optimize import sources as D
from selfrag import paths

DATASETS = paths.datasets_dir()
RETRIEVE = paths.data_dir() / D.RETRIEVE_FILE
needs_datasets = pytest.mark.skipif(not (DATASETS / "clapnq").is_dir(), reason="shared datasets not present")


@needs_datasets
def test_corpus_documents_shape():
    en = D.corpus_documents("clapnq", DATASETS)
    assert all(set(m) == {"doc_id", "title", "source"} and t for t, m in en)
    ids = [m["doc_id"] for _, m in en]
    assert len(ids) == len(set(ids)) == len({t for t, _ in en})
    assert Counter(m["source"] for _, m in en)["xquad"] == 240
    assert len(D.corpus_documents("clapnq", DATASETS, distractors=False)) == len(ids) - 240
    zh = D.corpus_documents("cmrc", DATASETS)
    assert len(zh) == 256 and all(m["source"] == "cmrc2018" for _, m in zh)


def test_unknown_corpus_is_a_data_error(tmp_path):
    from optimize.errors import DataError

    with pytest.raises(DataError, match="unknown corpus"):
        D.corpus_documents("wiki", tmp_path)


# ---------------------------------------------------------------- hand-written retrieve decisions


def test_retrieve_file_balanced_and_well_formed():
    rows = D.read_retrieve_file(RETRIEVE)
    assert len(rows) >= 80
    counts = Counter(r["decision"] for r in rows)
    assert set(counts) == {"yes", "no"}
    assert 0.4 <= counts["yes"] / len(rows) <= 0.6
    assert len({r["id"] for r in rows}) == len(rows)
    assert len({r["question"] for r in rows}) == len(rows)
    assert all(r["answer_so_far"] == "" and r["question"].strip() for r in rows)


@needs_datasets
def test_retrieve_file_has_no_dataset_question():
    dataset_questions = D.all_dataset_questions(DATASETS)
    assert len(dataset_questions) > 2000
    for r in D.read_retrieve_file(RETRIEVE):
        assert D.normalize_question(r["question"]) not in dataset_questions, r["question"]
