"""bench/bench_embedders.py: recall@5 on known rankings, the deterministic subsample, the weight parser."""

import argparse

import pytest

from tests.bench.conftest import import_bench
from tests.fakes import passage


@pytest.fixture(scope="module")
def bench():
    return import_bench("bench_embedders")


class RankedRetriever:
    """Returns each question's fixed ranking cut to k; records the k asked for."""

    def __init__(self, rankings):
        self.rankings, self.ks = rankings, []

    def retrieve(self, query, k=5):
        self.ks.append(k)
        return [passage(f"{query}-{i}", "t", doc_id=d) for i, d in enumerate(self.rankings[query][:k])]


def test_recall_at_5_is_the_share_with_the_gold_doc_in_the_top_5(bench):
    retriever = RankedRetriever({"q1": ["x", "y", "z", "w", "g1"],  # fifth: a hit
                                 "q2": ["x", "y", "z", "w", "v", "g2"],  # sixth: a miss
                                 "q3": ["x", "x", "y"],  # absent
                                 "q4": ["g4", "g4", "x"]})  # first, in two chunks: one hit
    questions = [("q1", "g1"), ("q2", "g2"), ("q3", "g3"), ("q4", "g4")]
    assert bench.recall_at_5(retriever, questions) == 0.5
    assert retriever.ks == [5, 5, 5, 5]
    assert bench.recall_at_5(retriever, [("q3", "g3")]) == 0.0


def test_subsample_is_the_first_by_sha256_of_seed_and_question(bench):
    qs = [("alpha", "a"), ("beta", "b"), ("gamma", "c"), ("delta", "d")]
    # sha256("s:alpha") = 83e7…, "s:gamma" = b577…, "s:delta" = be8d…, "s:beta" = c22a…
    assert bench.subsample(qs, 2, "s") == [("alpha", "a"), ("gamma", "c")]
    # sha256("t:gamma") = 2b53…, "t:alpha" = 36f8…, "t:delta" = 377c…, "t:beta" = 44df…
    assert bench.subsample(qs, 3, "t") == [("gamma", "c"), ("alpha", "a"), ("delta", "d")]
    assert bench.subsample(qs, 0, "s") == []
    assert bench.subsample(qs, None, "s") is qs  # no limit, or one at least as large: all, in their order
    assert bench.subsample(qs, 4, "s") is qs


def test_parse_weights(bench):
    assert bench.parse_weights("1:1") == (1.0, 1.0)
    assert bench.parse_weights("0.5:2") == (0.5, 2.0)
    assert bench.parse_weights("0:3") == (0.0, 3.0)  # one weight may be 0
    for bad in ("0:0", "-1:2", "1", "1:2:3", "a:b", "", "nan:1", "inf:0"):
        with pytest.raises(argparse.ArgumentTypeError):
            bench.parse_weights(bad)
