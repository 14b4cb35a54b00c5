"""bench/bench_kb.py: the nearest-rank percentile, and the cached embedder (on the model-free hash embedder)."""

import numpy as np
import pytest

from selfrag.kb.embedder import HashEmbedder
from tests.bench.conftest import import_bench


@pytest.fixture(scope="module")
def bench():
    return import_bench("bench_kb")


def test_pct_is_the_nearest_rank_of_the_sorted_values(bench):
    xs = [float(x) for x in range(100, 0, -1)]  # 100 … 1, unsorted on purpose
    assert bench.pct(xs, 95) == 95.0  # index round(0.95 * 99) = round(94.05) = 94
    assert bench.pct(xs, 50) == 51.0  # index round(49.5) = 50 (Python rounds half to even)
    assert bench.pct(xs, 0) == 1.0 and bench.pct(xs, 100) == 100.0
    assert bench.pct([10, 30, 20, 40], 50) == 30  # round(1.5) = 2
    assert bench.pct([10, 30, 20, 40, 60, 50], 50) == 30  # round(2.5) = 2: half to even again
    assert bench.pct([2, 2, 2, 9], 50) == 2 and bench.pct([2, 2, 2, 9], 95) == 9  # ties; round(2.85) = 3
    assert bench.pct([4.5], 95) == 4.5


class Counting:
    def __init__(self, inner):
        self.inner, self.name, self.dim, self.calls = inner, inner.name, inner.dim, []

    def embed(self, texts):
        self.calls.append(list(texts))
        return self.inner.embed(texts)


def test_the_cached_embedder_serves_known_texts_and_embeds_the_rest_once(bench):
    inner = Counting(HashEmbedder(16))
    known = np.arange(16, dtype=np.float64)
    cached = bench.CachedEmbedder(inner, {"known text": known})
    assert (cached.name, cached.dim) == ("hash-16", 16)
    out = cached.embed(["known text", "new text"])
    assert out.dtype == np.float32 and out.shape == (2, 16)
    assert np.array_equal(out[0], known.astype(np.float32))
    assert np.array_equal(out[1], HashEmbedder(16).embed(["new text"])[0])
    assert inner.calls == [["new text"]]
    again = cached.embed(["new text", "known text"])  # both cached now: no call to the model
    assert inner.calls == [["new text"]]
    assert np.array_equal(again, out[::-1])
