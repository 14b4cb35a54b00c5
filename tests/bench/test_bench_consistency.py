"""bench/bench_consistency.py: the agreement of sampled drafts, the draft calls, pairing with the check's rows."""

import json
import sys

import pytest

from tests.bench.conftest import BENCH, import_bench


@pytest.fixture(scope="module")
def bench():
    return import_bench("bench_consistency")


def test_agreement_is_the_mean_token_f1_with_the_greedy_draft(bench):
    assert bench.agreement("80 km", ["80 km", "about 80 km"]) == pytest.approx((1.0 + 0.8) / 2)
    assert bench.agreement("80 km", ["80 km", None]) == 0.5  # a sample that declined scores 0
    assert bench.agreement(None, ["80 km"]) == 0.0  # the greedy draft declined: the program abstains anyway
    assert bench.agreement("80 km", []) == 0.0


def test_the_greedy_draft_and_each_sample_go_through_the_programs_draft_step(bench):
    """One greedy call, then one per sample with its own rollout_id at the temperature; the drafter's
    P(answerable) is read from the greedy draft's trace step."""
    from programs.tracing import Tracer
    from programs.scoring import Candidate

    class Program:
        def __init__(self):
            self.configs = []

        def _draft(self, tracer, question, passages, origin="kb", config=None):
            self.configs.append(config)
            step = tracer.note("generate_answer", "x")
            step.probs = {"true": 0.75, "false": 0.25}
            answer = {None: "80 km", 1: "80 km", 2: "120 km", 3: None}[None if config is None else config["rollout_id"]]
            return None if answer is None else Candidate(answer=answer, passages=passages)

    program = Program()
    row = bench.draft_samples(program, Tracer(), "What is the range?", ["p"], 3, 0.7)
    assert program.configs == [None] + [{"rollout_id": i, "temperature": 0.7} for i in (1, 2, 3)]
    assert row["draft"] == "80 km" and row["samples"] == ["80 km", "120 km", None]
    assert row["agree"] == pytest.approx((1.0 + 0.5 + 0.0) / 3)
    assert row["answered"] == pytest.approx(2 / 3)
    assert row["p_answerable"] == 0.75


def test_check_rows_are_merged_by_order_and_must_be_about_the_same_questions(bench):
    rows = [{"answerable": True, "top_similarity": 0.8, "agree": 1.0},
            {"answerable": False, "top_similarity": 0.7, "agree": 0.2}]
    check = [{"answerable": True, "top_similarity": 0.8, "stated": 0.9},
             {"answerable": False, "top_similarity": 0.7, "stated": 0.3}]
    assert [r["stated"] for r in bench.merge_check_rows(rows, check)] == [0.9, 0.3]
    with pytest.raises(ValueError, match="question 2"):
        bench.merge_check_rows(rows, [check[0], {**check[1], "top_similarity": 0.71}])
    with pytest.raises(ValueError, match="1 check rows for 2 questions"):
        bench.merge_check_rows(rows, check[:1])


def _pairs(n: int = 60):
    """Half answerable; the check separates weakly, the agreement perfectly; the similarity is uninformative."""
    pairs = []
    for i in range(n):
        answerable = i % 2 == 0
        row = {"answerable": answerable, "top_similarity": 0.8, "stated": 0.5 + 0.002 * i,
               "agree": 0.9 if answerable else 0.1, "answered": 1.0, "p_answerable": 0.9}
        pairs.append((row, {"p_stated": row["stated"], "top_similarity": 0.8, "answerable": answerable}))
    return pairs


def test_the_rule_table_scores_each_signal_and_the_check_with_the_agreement(bench):
    table = {name: (abstain, false) for name, abstain, false in bench.rule_rows(_pairs(), 0.1, 0.8)}
    assert table["agree"] == (1.0, 0.0)
    assert table["stated × agree"] == (1.0, 0.0)  # the perfect signal survives the product
    assert table["stated"][0] < 0.5
    assert set(table) == {"stated", "agree", "answered", "p_answerable", "stated × agree", "stated × (0.5 + agree/2)"}


def test_rows_and_check_rows_are_reported_without_an_lm(bench, tmp_path, monkeypatch, capsys):
    rows = [row for row, _ in _pairs()]
    (tmp_path / "rows.json").write_text(json.dumps([{k: v for k, v in r.items() if k != "stated"} for r in rows]))
    (tmp_path / "check.json").write_text(json.dumps([{k: r[k] for k in ("answerable", "top_similarity", "stated")}
                                                     for r in rows]))
    monkeypatch.syspath_prepend(BENCH)
    monkeypatch.setattr(sys, "argv", ["bench_consistency.py", "--from-rows", str(tmp_path / "rows.json"),
                                      "--check-rows", str(tmp_path / "check.json")])
    bench.main()
    out = capsys.readouterr().out
    assert "60 questions, 30 answerable" in out
    assert "stated + agree + similarity (cv)" in out


def test_calibration_without_check_rows_is_a_one_line_error(bench, tmp_path, monkeypatch, capsys):
    (tmp_path / "rows.json").write_text(json.dumps([row for row, _ in _pairs()]))
    monkeypatch.syspath_prepend(BENCH)
    monkeypatch.setattr(sys, "argv", ["bench_consistency.py", "--from-rows", str(tmp_path / "rows.json"),
                                      "--calibration", str(tmp_path / "m.json")])
    with pytest.raises(SystemExit) as exc:
        bench.main()
    assert exc.value.code == 2
    assert "--calibration: needs --check-rows" in capsys.readouterr().err
