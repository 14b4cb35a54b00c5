"""bench/bench_retrieval_signals.py: the retrieval signals of one question, question types, the table."""

import numpy as np
import pytest

from programs.types import Passage
from tests.bench.conftest import import_bench


@pytest.fixture(scope="module")
def bench():
    return import_bench("bench_retrieval_signals")


class WordEmbedder:
    """Bag of words over a fixed vocabulary: cosine = shared words, so the expected signals are known."""

    name = "words"
    vocab = ["battery", "heron", "charge", "hours", "colour", "red", "weighs"]

    def embed(self, texts):
        return np.array([[float(w in t.lower()) + 1e-3 for w in self.vocab] for t in texts])


def test_question_types(bench):
    assert bench.question_type("How many wheels does it have?") == "how many"
    assert bench.question_type("who wrote the manual") == "who"
    assert bench.question_type("When was it built?") == "when"
    assert bench.question_type("What colour is the Heron?") is None


def test_signals_read_the_best_sentence_and_the_question_terms(bench):
    passages = [Passage(id="a", text="The Heron is red and light. It weighs twelve kilos on the scale.", similarity=0.6),
                Passage(id="b", text="A full charge of the battery takes four hours at home.", similarity=0.4)]
    row = bench.signals("How long does a battery charge take in hours?", passages, WordEmbedder(), 450)
    assert row["top similarity"] == 0.6 and row["second similarity"] == 0.4
    assert row["gap"] == pytest.approx(0.2) and row["mean similarity"] == pytest.approx(0.5)
    # the question's words (battery, charge, hours) are all in passage b's one sentence
    assert row["best sentence similarity"] == pytest.approx(1.0, abs=1e-2)
    # content words long, battery, charge, take, hours: all but "long" are in passage b's one sentence
    assert row["term coverage, sentence"] == row["term coverage, passage"] == pytest.approx(4 / 5)
    assert row["answer type found"] == 1.0 and row["question type"] == ""
    other = bench.signals("How long does a battery charge take in hours?", passages, WordEmbedder(), 450,
                          other=WordEmbedder())
    assert other["best sentence similarity, other"] == pytest.approx(row["best sentence similarity"])


def test_an_answer_type_missing_from_the_closest_sentences_is_reported(bench):
    passages = [Passage(id="a", text="The Heron battery is red and it weighs little on any scale.", similarity=0.5)]
    assert bench.signals("How many hours does a charge take?", passages, WordEmbedder(), 450)["answer type found"] == 0.0
    passages = [Passage(id="a", text="A full charge takes 4 hours with the standard charger.", similarity=0.5)]
    assert bench.signals("How many hours does a charge take?", passages, WordEmbedder(), 450)["answer type found"] == 1.0


def test_out_of_sample_threshold_keeps_a_perfect_signal_perfect_and_a_random_one_near_the_bound(bench):
    labels = [i % 2 == 0 for i in range(100)]
    perfect = [0.9 if y else 0.1 for y in labels]
    assert bench.cv_threshold(perfect, labels, 0.1) == (1.0, 0.0)
    noise = list(np.random.default_rng(0).random(100))
    abstain, false = bench.cv_threshold(noise, labels, 0.1)
    assert abstain < 0.35 and false < 0.25


def test_table_scores_each_signal_and_the_combinations_it_can_form(bench):
    rng = np.random.default_rng(1)
    rows = [{"answerable": i % 2 == 0, "top similarity": float(0.6 * (i % 2 == 0) + rng.random() * 0.5),
             "best sentence similarity": float(rng.random()), "stated": float(rng.random())} for i in range(40)]
    table = {name: (auc, a, cva, cvf) for name, auc, a, cva, cvf in bench.table(rows, 0.1)}
    assert table["top similarity"][0] > 0.8 and table["best sentence similarity"][0] < 0.8
    assert "top similarity + best sentence similarity (cv)" in table
    assert "stated + top similarity (cv)" in table and "answerable" not in table
