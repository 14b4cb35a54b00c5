"""bench/bench_derive_labels.py: tracing a record's text to its ClapNQ passage, the triples, the agreement
and the "positive / negative is gold" accounting."""

import json
from types import SimpleNamespace

import pytest

from tests.bench.conftest import import_bench


@pytest.fixture(scope="module")
def bench():
    return import_bench("bench_derive_labels")


ITEMS = [  # ClapNQ items: the third question is unanswerable, so it has no gold passage
    SimpleNamespace(doc_id="d1", text="The Heron battery is 630 Wh.", question="What is the battery?", answerable=True),
    SimpleNamespace(doc_id="d2", text="The frame warranty lasts ten years.", question="How long is the warranty?",
                    answerable=True),
    SimpleNamespace(doc_id="d3", text="The Swift bike folds in half.", question="Which bike folds?", answerable=False),
]
Q1, Q2, Q3 = "what is the battery", "how long is the warranty", "which bike folds"


@pytest.fixture(scope="module")
def index(bench):
    return bench.passage_index(ITEMS)


def test_the_passage_index_keeps_normalised_words_and_answerable_gold_only(bench, index):
    words, gold = index
    assert words["d1"] == {"the", "heron", "battery", "is", "630", "wh"}
    assert gold == {Q1: "d1", Q2: "d2"}


def test_the_source_doc_is_the_largest_share_of_words_ties_to_the_greatest_id(bench, index):
    words, _ = index
    assert bench.source_doc("The Heron battery: 630 Wh.", words) == "d1"  # 5/5 words against 1/5, 1/5
    assert bench.source_doc("Frame warranty -- ten years", words) == "d2"
    assert bench.source_doc("heron frame", words) == "d2"  # 1/2 each for d1 and d2: the greater id
    assert bench.source_doc("the", words) == "d3"  # in all three
    assert bench.source_doc("", words) == "d3"  # no words: share 0 everywhere, still a doc


def test_support_triples_keep_answer_kinds_apart_and_fold_the_gold_ones(bench, index):
    words, _ = index
    records = [
        {"question": "What is the battery?", "passages": "Heron battery 630 Wh", "support": "Fully", "how": "gold_answer"},
        {"question": "What is the battery?", "passages": "Heron battery 630 Wh", "support": "partially",
         "how": "wrong_answer"},
        {"question": "What is the battery?", "passages": "frame warranty", "support": "no", "how": "unrelated_passage"},
        {"question": "How long is the warranty?", "passages": "warranty ten years", "support": False},  # no "how"
    ]
    assert bench.triples(records, "support", words) == {
        (Q1, "d1", "gold"): "fully", (Q1, "d1", "wrong_answer"): "partially", (Q1, "d2", "gold"): "no",
        (Q2, "d2", "gold"): "false"}


def _write(folder, task, train, dev):
    (folder / task).mkdir(parents=True)
    for split, rows in (("train", train), ("dev", dev)):
        (folder / task / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_relevance_agreement_and_gold_accounting(bench, index, tmp_path):
    words, gold = index
    train = [{"question": "What is the battery?", "passage": "The Heron battery: 630 Wh.", "relevance": "relevant"},
             {"question": "What is the battery?", "passage": "Frame warranty: ten years", "relevance": "irrelevant"}]
    dev = [{"question": "How long is the warranty?", "passage": "The Heron battery 630 Wh", "relevance": "Relevant"},
           {"question": "How long is the warranty?", "passage": "frame warranty ten years", "relevance": "irrelevant"},
           {"question": "Which bike folds?", "passage": "the bike folds in half", "relevance": "relevant"}]
    _write(tmp_path, "relevance", train, dev)
    hand = {(Q1, "d1", ""): "relevant", (Q2, "d2", ""): "relevant", (Q2, "d1", ""): "irrelevant",
            ("a question only the hand made split has", "d3", ""): "relevant"}
    m = bench.measure(tmp_path, "relevance", words, gold, hand)
    assert m == {
        "questions": 3, "shared questions": 2, "records": 5, "labels": {"irrelevant": 2, "relevant": 3},
        "shared items": 3, "agree": 1,  # (Q1, d1) agrees; (Q2, d1) and (Q2, d2) are flipped
        "positive is gold": (1, 3),  # Q1→d1 is gold; Q2→d1 is not; Q3 has no gold passage
        "negative is gold": (1, 2),  # Q2→d2 labelled irrelevant is ClapNQ's gold: a label error
        "disagreements": [((Q2, "d1", ""), "relevant", "irrelevant"), ((Q2, "d2", ""), "irrelevant", "relevant")],
    }


def test_support_negatives_count_only_on_the_gold_answer(bench, index, tmp_path):
    words, gold = index
    train = [{"question": "What is the battery?", "passages": "Heron battery 630 Wh", "support": "fully",
              "how": "gold_answer"},
             {"question": "What is the battery?", "passages": "Heron battery 630 Wh", "support": "no",
              "how": "wrong_answer"}]  # a wrong answer unsupported by the gold passage: not a label error
    dev = [{"question": "What is the battery?", "passages": "frame warranty", "support": "no", "how": "unrelated_passage"},
           {"question": "How long is the warranty?", "passages": "frame warranty ten years", "support": "no"}]
    _write(tmp_path, "support", train, dev)
    m = bench.measure(tmp_path, "support", words, gold, {})
    assert (m["records"], m["labels"], m["shared items"], m["agree"], m["shared questions"]) == (
        4, {"fully": 1, "no": 3}, 0, 0, 0)
    assert m["positive is gold"] == (1, 1)
    assert m["negative is gold"] == (1, 2)  # Q2→d2 "no" is the error; Q1→d2 is not gold; wrong_answer not counted
    assert m["disagreements"] == []
