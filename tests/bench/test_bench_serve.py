"""bench/bench_serve.py: the nearest-rank percentile and summing a Prometheus metric from /metrics text."""

import math

import pytest

from tests.bench.conftest import import_bench


@pytest.fixture(scope="module")
def bench():
    return import_bench("bench_serve")


def test_percentile_is_the_nearest_rank_of_the_sorted_values(bench):
    assert bench.percentile([3.0, 1.0, 2.0], 0.5) == 2.0  # index round(0.5 * 2) = 1
    assert bench.percentile([4.0, 1.0, 3.0, 2.0], 0.5) == 3.0  # round(1.5) = 2
    assert bench.percentile([5.0, 1.0, 4.0, 2.0, 3.0], 0.95) == 5.0  # round(3.8) = 4
    assert bench.percentile([5.0, 1.0, 4.0, 2.0, 3.0], 0.6) == 3.0  # round(2.4) = 2
    assert bench.percentile([1.0, 1.0, 1.0, 9.0], 0.5) == 1.0  # ties
    assert bench.percentile([7.0], 0.95) == 7.0
    assert bench.percentile([2.0, 8.0], 0.0) == 2.0 and bench.percentile([2.0, 8.0], 1.0) == 8.0
    assert math.isnan(bench.percentile([], 0.5))


def test_metric_sums_every_labelled_sample_and_skips_comments(bench):
    text = ("# HELP selfrag_tokens_total LM tokens\n"
            "# TYPE selfrag_tokens_total counter\n"
            'selfrag_tokens_total{kind="prompt"} 100.0\n'
            'selfrag_tokens_total{kind="completion"} 20.5\n'
            "selfrag_tokens_created 1.7e+09\n"
            "selfrag_lm_calls_total 7.0\n")
    assert bench.metric(text, "selfrag_tokens_total") == 120.5
    assert bench.metric(text, "selfrag_lm_calls_total") == 7.0
    assert bench.metric(text, "selfrag_abstentions_total") == 0.0  # absent
    assert bench.metric("", "selfrag_lm_calls_total") == 0.0


def test_metric_reads_the_services_own_exposition(bench):
    from selfrag.service.metrics import Metrics

    m = Metrics()
    m.lm_calls.inc(3)
    m.lm_calls.inc(4)
    m.tokens.labels(kind="prompt").inc(100)
    m.tokens.labels(kind="completion").inc(25)
    text = m.render().decode()
    assert bench.metric(text, "selfrag_lm_calls_total") == 7.0
    assert bench.metric(text, "selfrag_tokens_total") == 125.0
