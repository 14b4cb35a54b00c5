"""bench/bench_rescore_pool.py: the gate's signal and the gold recall per candidate pool size."""

import json

import pytest

from tests.bench.conftest import import_bench


@pytest.fixture(scope="module")
def bench():
    return import_bench("bench_rescore_pool")


def _rows() -> list[dict]:
    rows = []
    for i in range(20):
        answerable = i % 2 == 0
        # answerable: the gold passage is 4th in the hybrid order but has the best cosine (0.9); unanswerable:
        # every candidate sits at 0.5 except a 5th at 0.95, so a pool of 5 lets them all through the gate
        docs = [f"d{i}-{j}" for j in range(6)]
        sims = [0.6, 0.55, 0.5, 0.9, 0.4, 0.3] if answerable else [0.5, 0.5, 0.5, 0.5, 0.95, 0.5]
        rows.append({"split": "dev", "answerable": answerable, "gold": [docs[3]] if answerable else [],
                     "docs": docs, "sims": sims})
    return rows


def test_a_deeper_pool_reordered_by_the_cosine_puts_the_gold_passage_among_those_read(bench):
    by_pool = {row[0]: row for row in bench.pool_table(_rows(), [3, 4, 5], 0.1)}
    n, auc, _abstain, _false, hybrid3, cosine3, in_pool = by_pool[3]
    assert (hybrid3, cosine3, in_pool) == (0.0, 0.0, 0.0)  # the gold passage is 4th
    assert auc == 1.0  # 0.6 against 0.5: the pool of 3 separates the two kinds
    _, auc4, _, _, hybrid3, cosine3, in_pool = by_pool[4]
    assert (hybrid3, cosine3, in_pool) == (0.0, 1.0, 1.0) and auc4 == 1.0
    _, auc5, abstain5, _, _, _, _ = by_pool[5]
    assert auc5 < 0.5 and abstain5 == 0.0  # the unanswerable questions' 0.95 at 5th now beats every answerable one


def test_rows_written_by_a_run_are_reported_without_retrieving(bench, tmp_path, monkeypatch, capsys):
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(_rows()))
    monkeypatch.setattr("sys.argv", ["bench_rescore_pool.py", "--from-rows", str(path), "--pools", "3,4"])
    bench.main()
    out = capsys.readouterr().out
    assert "dev: 20 questions, 10 answerable" in out and "all: 20 questions" in out
    assert "| 4 | 1.000 |" in out
