"""bench/bench_retrieval.py: measure()'s recall@K and gold-first counting on known rankings."""

from types import SimpleNamespace

import pytest

from tests.bench.conftest import import_bench
from tests.fakes import ListRetriever, passage


@pytest.fixture(scope="module")
def bench():
    return import_bench("bench_retrieval")


@pytest.fixture
def clock(bench, monkeypatch):
    """perf_counter advancing 0.25 s a call: each question takes 0.25 s."""
    ticks = iter(range(1, 1000))
    monkeypatch.setattr(bench, "time", SimpleNamespace(perf_counter=lambda: next(ticks) * 0.25))


def _ranked(*doc_ids):
    return [passage(f"c{i}", f"chunk {i}", doc_id=d) for i, d in enumerate(doc_ids)]


RANKINGS = {  # question -> (ranked passages, LM calls)
    "q1": (_ranked("a", "x", "y"), 0),  # gold first
    "q2": (_ranked("x", "y", "b", "b", "z", "w"), 2),  # gold third (two chunks of it)
    "q3": (_ranked("x", "y", "z", "w", "v", "c"), 1),  # gold sixth: outside the first 5
    "q4": ([], 3),  # nothing retrieved; gold absent
}
QUESTIONS = [("q1", "a"), ("q2", "b"), ("q3", "c"), ("q4", "z")]


def test_recall_counts_the_gold_doc_in_the_first_k_and_gold_first_separately(bench, clock, capsys):
    rows = []
    bench.measure("plain", "full", RANKINGS.__getitem__, QUESTIONS, rows)
    assert rows == [("full", "plain", "0.50", "0.25", "1.5", "0.25")]  # 2/4 hits, 1/4 first, calls 6/4
    assert "full plain: recall@5 2/4, gold first 1, 1.5 LM calls/q, 0.25 s/q" in capsys.readouterr().err


def test_no_cut_counts_every_passage_and_cut_1_only_the_first(bench, clock):
    rows = []
    bench.measure("all rounds", "full", RANKINGS.__getitem__, QUESTIONS, rows, cut=None)
    bench.measure("top 1", "full", RANKINGS.__getitem__, QUESTIONS, rows, cut=1)
    assert [r[2:4] for r in rows] == [("0.75", "0.25"), ("0.25", "0.25")]


def test_a_word_overlap_retriever_ties_keep_corpus_order(bench, clock):
    retriever = ListRetriever([passage("c1", "heron battery 630 wh", doc_id="d1"),
                               passage("c2", "frame warranty ten years", doc_id="d2"),
                               passage("c3", "the warranty covers the battery", doc_id="d3")])
    questions = [("how long is the frame warranty", "d2"),  # c2 and c3 share 2 words each: c2 ranks first
                 ("what battery does the heron use", "d3")]  # c1 and c3 share 2 each: c3 second
    rows = []
    bench.measure("plain", "sub", lambda q: (retriever.retrieve(q, k=bench.K), 0), questions, rows)
    bench.measure("plain@1", "sub", lambda q: (retriever.retrieve(q, k=bench.K), 0), questions, rows, cut=1)
    assert rows == [("sub", "plain", "1.00", "0.50", "0.0", "0.25"), ("sub", "plain@1", "0.50", "0.50", "0.0", "0.25")]
