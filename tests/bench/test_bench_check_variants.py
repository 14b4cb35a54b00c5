"""bench/bench_check_variants.py: the verbatim quote test, the signal table, the variant signatures."""

import json
import sys

import pytest

from tests.bench.conftest import BENCH, import_bench

@pytest.fixture(scope="module")
def bench():
    return import_bench("bench_check_variants")


def test_a_quote_is_found_only_when_it_occurs_verbatim_after_normalising(bench):
    passages = ["The Heron uses a 630 Wh battery.", "A full charge takes 4.5 hours."]
    assert bench.quote_found("a full CHARGE  takes 4.5 hours", passages)  # case, spaces
    assert bench.quote_found("630 Wh battery", passages)
    assert not bench.quote_found("a 700 Wh battery", passages)  # a changed word
    assert not bench.quote_found("  ", passages)  # nothing quoted
    assert not bench.quote_found("Heron uses a 630 Wh battery. A full charge", passages)  # across passages


def _rows(n: int = 20) -> list[dict]:
    rows = []
    for i in range(n):
        answerable = i % 2 == 0
        rows.append({"answerable": answerable, "top_similarity": 0.3 + 0.02 * i,  # uninformative ramp
                     "stated": 0.9 if answerable else 0.1,  # separates perfectly
                     "quote": 0.5, "point": None if i == 3 else 0.6,  # no information; one failed call
                     "quote_found": True, "quote_text": "x"})
    return rows


def test_the_signal_table_scores_each_signal_and_the_combinations(bench):
    table = {name: (auc, abstain) for name, auc, abstain, _ in bench.signal_table(_rows(), 0.1)}
    assert table["stated"] == (1.0, 1.0)
    assert table["quote"] == (0.5, 0.0)  # a constant score: no threshold abstains without false abstention
    assert table["stated + similarity (cv)"][0] == 1.0  # the perfect signal survives the regression
    assert 0.4 < table["top similarity"][0] < 0.6
    assert {"point + similarity (cv)", "quote + similarity + found (cv)", "stated + quote + point + similarity (cv)",
            "quote × found", "quote found"} <= set(table)


def test_a_none_score_is_left_out_of_its_signal_not_counted_as_0(bench):
    rows = _rows()
    rows[0] = {**rows[0], "stated": None}  # an answerable question whose check failed
    table = {name: (auc, abstain, false) for name, auc, abstain, false in bench.signal_table(rows, 0.0)}
    assert table["stated"] == (1.0, 1.0, 0.0)  # counted as 0 it would rank below every unanswerable one
    assert table["stated + similarity (cv)"][0] == 1.0


def test_rows_of_different_variants_are_pooled_on_the_signals_they_share(bench, tmp_path, monkeypatch,
                                                                        capsys):
    each = [{**r, "each": r["stated"]} for r in _rows()]
    prior = [{**r, "prior": 0.5} for r in _rows()]
    for name, rows in (("each.json", each), ("prior.json", prior)):
        (tmp_path / name).write_text(json.dumps(rows))
    monkeypatch.syspath_prepend(BENCH)
    monkeypatch.setattr(sys, "argv", ["bench_check_variants.py", "--from-rows", str(tmp_path / "each.json"),
                                      "--from-rows", str(tmp_path / "prior.json")])
    bench.main()
    out = capsys.readouterr().out
    assert "40 questions, 20 answerable" in out and "left out (not in every row): each, prior" in out
    table = out.split("signal ")[1].split("variant")[0]
    assert "stated + similarity (cv)" in table and "each" not in table and "prior" not in table
    cal = [{"p_stated": r["stated"], "top_similarity": r["top_similarity"], "answerable": r["answerable"]}
           for r in each + prior]
    rules = bench.rule_table(bench.pair_with_calibration(each + prior, cal), 0.1, 0.8)
    assert [name for name, *_ in rules] == ["stated", "quote", "point"]  # not each, not prior


def test_the_cv_abstention_picks_its_threshold_on_each_folds_training_part(bench):
    """Out of sample: on noise, the held-out false abstention exceeds the bound an in-sample threshold
    keeps."""
    import numpy as np

    rng = np.random.default_rng(0)
    labels = [bool(i % 2) for i in range(80)]
    noise, sim = list(rng.uniform(0, 1, 80)), list(rng.uniform(0, 1, 80))
    abstain, false = bench._cv_abstention([noise, sim], labels, 0.1)
    assert false > 0.1 and abstain < 0.2
    separated = [0.9 if y else 0.1 for y in labels]
    assert bench._cv_abstention([separated, sim], labels, 0.1)[0] == 1.0


def test_rows_written_by_a_run_are_reported_without_an_lm(bench, tmp_path, monkeypatch, capsys):
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(_rows()))
    monkeypatch.syspath_prepend(BENCH)  # main imports the benches' shared helpers, as when run as a script
    monkeypatch.setattr(sys, "argv", ["bench_check_variants.py", "--from-rows", str(path)])
    bench.main()
    out = capsys.readouterr().out
    assert "20 questions, 10 answerable" in out
    assert "stated " in out and "1.000" in out


def test_the_variants_are_label_judgements_the_soft_scores_can_read(bench):
    from programs.soft_labels import label_values

    assert label_values(bench.CheckAnswerQuoted.output_fields["stated"].annotation) == ("yes", "no")
    assert list(bench.CheckAnswerQuoted.output_fields) == ["quote", "stated"]  # the quote comes first
    assert label_values(bench.PointToAnswer.output_fields["passage"].annotation)[0] == "none"


def test_a_combination_weighs_a_narrow_scale_signal_as_much_as_a_wide_one(bench):
    """An embedder's cosines spread over a few hundredths: fitted on raw values, the penalty shrinks their
    coefficient and the combination ranks below the cosine alone; on standardised signals it does not."""
    import numpy as np

    rng = np.random.default_rng(0)
    labels = [bool(i % 2) for i in range(200)]
    cosine = [0.85 + (0.01 if y else -0.01) + 0.006 * rng.standard_normal() for y in labels]  # strong, narrow
    noise = list(rng.uniform(0.0, 1.0, size=200))  # wide, uninformative
    alone, combined = bench._auc(cosine, labels), bench._auc(bench._cv_combined([cosine, noise], labels), labels)
    assert alone > 0.9
    assert combined > alone - 0.03


def test_the_each_variant_asks_the_check_about_each_passage_alone(bench):
    """One critic call per passage, each shown only its own passage; a failed call scores None, and the row's
    score is the highest P(yes) of the calls that answered."""
    import dspy

    from programs.tracing import Tracer
    from signatures import CheckAnswerStated

    class Program:
        def __init__(self):
            self.calls = []

        def _evidence(self, passages, query=None):
            return "\n".join(f"[{i + 1}] {p}" for i, p in enumerate(passages))

        def _critic(self, tracer, name, predictor, field, **inputs):
            self.calls.append((name, inputs["passages"]))
            if "broken" in inputs["passages"]:
                return None, None  # the program's record of a failed call
            return dspy.Prediction(stated="yes" if "38 kg" in inputs["passages"] else "no"), None

    program = Program()
    predictor = dspy.Predict(CheckAnswerStated)
    passages = ["The Heron is a cargo bike.", "The Heron weighs 38 kg.", "broken"]
    scores = bench.per_passage_scores(program, Tracer(), predictor, "How heavy is the Heron?", passages)
    assert scores == [0.0, 1.0, None]  # no log-probabilities: the decoded label has probability 1
    assert [evidence for _, evidence in program.calls] == [f"[1] {p}" for p in passages]
    assert {name for name, _ in program.calls} == {"check_each"}
    assert "each" in bench.LM_SIGNALS


def test_bench_rows_pair_with_the_calibration_row_of_their_question(bench):
    """Same label and the same P(stated) within the tolerance, each calibration row once; others left out."""
    rows = [{"answerable": True, "stated": 0.81234, "each": 0.9},
            {"answerable": False, "stated": 0.81234, "each": 0.2},  # same P, other label: its own row
            {"answerable": True, "stated": 0.5, "each": 0.6},  # no calibration row this close
            {"answerable": True, "stated": None, "each": 0.7}]  # a failed check: never paired
    cal = [{"p_stated": 0.8124, "top_similarity": 0.9, "answerable": True},
           {"p_stated": 0.8123, "top_similarity": 0.7, "answerable": False},
           {"p_stated": 0.51, "top_similarity": 0.8, "answerable": True}]
    pairs = bench.pair_with_calibration(rows, cal)
    assert [(r["each"], c["top_similarity"]) for r, c in pairs] == [(0.9, 0.9), (0.2, 0.7)]


def test_the_rule_table_scores_each_signal_as_the_calibrated_rule_would(bench):
    """A signal that separates perfectly abstains on every unanswerable question without a false abstention out of
    sample; an uninformative one cannot abstain much under the bound."""
    pairs = []
    for i in range(60):
        answerable = i % 2 == 0
        pairs.append(({"answerable": answerable, "stated": 0.9 if answerable else 0.1, "each": 0.5 + 0.001 * i},
                      {"p_stated": 0.0, "top_similarity": 0.8, "answerable": answerable}))  # similarity: no information
    table = {name: (abstain, false) for name, abstain, false in bench.rule_table(pairs, 0.1, 0.8)}
    assert table["stated"] == (1.0, 0.0)
    assert table["each"][0] < 0.5 and table["each"][1] <= 0.2


def test_a_one_call_variant_scores_its_label_and_quote(bench):
    """point scores 1 − P(none), the others P(yes); quote adds its text and the verbatim test; a failed call
    scores None."""
    import dspy

    from programs.tracing import Tracer

    class Program:
        def __init__(self, pred):
            self.pred = pred

        def _critic(self, tracer, name, predictor, field, **inputs):
            return self.pred, None

    passages = ["The Heron weighs 38 kg."]

    class P:  # only .text is read
        def __init__(self, text):
            self.text = text

    first = [P(t) for t in passages]
    point = bench.one_call_scores(Program(dspy.Prediction(passage="none")), Tracer(), "point",
                                  dspy.Predict(bench.PointToAnswer), "passage", "q", "[1] x", first)
    assert point == {"point": 0.0}
    quote = bench.one_call_scores(Program(dspy.Prediction(quote="weighs 38 KG", stated="yes")), Tracer(), "quote",
                                  dspy.Predict(bench.CheckAnswerQuoted), "stated", "q", "[1] x", first)
    assert quote == {"quote": 1.0, "quote_text": "weighs 38 KG", "quote_found": True}
    failed = bench.one_call_scores(Program(None), Tracer(), "quote", dspy.Predict(bench.CheckAnswerQuoted), "stated",
                                   "q", "[1] x", first)
    assert failed == {"quote": None, "quote_text": "", "quote_found": False}


def test_the_contrast_is_the_check_less_its_prior_on_the_unit_interval(bench):
    """stated − prior: P(yes) over the passages less P(yes) shown no passage, mapped onto [0, 1]; a row without
    either is left as it is; the contrast is scored like any signal but is not a variant one can run."""
    assert bench.with_contrast({"stated": 0.9, "prior": 0.3})["stated − prior"] == pytest.approx(0.8)
    assert bench.with_contrast({"stated": 0.2, "prior": 1.0})["stated − prior"] == pytest.approx(0.1)
    assert "stated − prior" not in bench.with_contrast({"stated": 0.9, "prior": None})
    assert "prior" in bench.VARIANTS and "stated − prior" not in bench.VARIANTS
    rows = [bench.with_contrast({"answerable": i % 2 == 0, "top_similarity": 0.5 + 0.01 * i, "stated": 0.6,
                                 "prior": 0.2 if i % 2 == 0 else 0.7}) for i in range(20)]
    table = {name: auc for name, auc, *_ in bench.signal_table(rows, 0.1)}
    assert table["stated − prior"] == 1.0 and table["stated"] == 0.5  # the prior carries what the check cannot
    assert "stated + prior + stated − prior + similarity (cv)" in table


def test_a_variant_name_that_is_only_a_derived_signal_is_refused(bench, monkeypatch, capsys):
    monkeypatch.syspath_prepend(BENCH)
    monkeypatch.setattr(sys, "argv", ["bench_check_variants.py", "--variants", "stated − prior"])
    with pytest.raises(SystemExit) as exc:
        bench.main()
    assert exc.value.code == 2 and "--variants: use some of" in capsys.readouterr().err
