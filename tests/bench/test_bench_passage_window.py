"""bench/bench_passage_window.py: the gold answer's share inside the passage window."""

from types import SimpleNamespace

import pytest

from programs.types import Passage
from tests.bench.conftest import import_bench


@pytest.fixture(scope="module")
def bench():
    return import_bench("bench_passage_window")


def test_answer_recall_counts_the_answers_words_found_in_the_text(bench):
    assert bench.answer_recall("The bridge opened in 1937 .", "It opened to traffic in 1937.") == pytest.approx(3 / 5)
    assert bench.answer_recall("", "anything") == 0.0
    # Chinese has no spaces: characters count
    assert bench.answer_recall("一九三七年", "大桥于一九三七年通车", "zh") == 1.0


class OneRetriever:
    def __init__(self, passages):
        self.passages = passages

    def retrieve(self, query, k=3, filters=None):
        return self.passages[:k]


def test_a_window_that_cuts_the_answer_off_scores_below_the_whole_chunk(bench, capsys):
    filler = "Unrelated words about other things fill this part. " * 12
    text = "The Heron bridge crosses the bay. " + filler + "It was painted green in 1990 by the city."
    ex = SimpleNamespace(id="q1", question="what colour is the Heron bridge", answerable=True,
                         answer="It was painted green in 1990 by the city .", gold_doc_ids=["d1"])
    other = SimpleNamespace(id="q2", question="x", answerable=False, answer="", gold_doc_ids=[])
    missing = SimpleNamespace(id="q3", question="y", answerable=True, answer="z", gold_doc_ids=["d9"])
    retriever = OneRetriever([Passage(id="c1", text=text, metadata={"doc_id": "d1"})])
    rows = bench.measure([ex, other, missing], retriever, [100, 2000], "en")
    assert [r["id"] for r in rows] == ["q1", "q3"]  # unanswerable questions are not measured
    assert rows[1]["gold_in_first"] is False
    assert rows[0]["chunk"] == 1.0 and rows[0]["2000"] == 1.0
    assert rows[0]["100"] < 0.5  # the window sits on the query terms at the start, the answer at the end
    bench.report(rows, [100, 2000], 0.8, "t")
    out = capsys.readouterr().out
    assert "gold passage in the first three for 1" in out and "| window 100 chars |" in out
