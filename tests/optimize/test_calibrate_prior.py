"""Calibrating the answer check less its prior (``check_prior``): the stated stage records the prior beside
P(stated), fits the contrast, and says so in its report and in the fitted set; rows recorded one way are never
pooled into a fit of the other."""

import dspy
import pytest

from optimize.calibrate import calibrate
from optimize.errors import CompileError
from optimize.gate_check import RecordedRows, answers, fit_gate_and_check, row_value
from programs.selfrag import SelfRAG
from programs.settings import ProgramSettings
from programs.thresholds import NO_PASSAGE, Thresholds
from tests.fakes import scripted_lm
from tests.optimize.test_calibrate import ANSWER_SCRIPT, KB, SIM_QA, SimilarityRetriever
from tests.optimize.test_gate_check import manifest, noisy_rows

# The check says "yes" to every question over its passages; shown no passage it still says "yes" to the
# unanswerable ones (the question draws it on its own) and not to the answerable ones: only the contrast separates.
def _yes(p):
    return {"stated": {"yes": p, "no": round(1.0 - p, 4)}}


PROBS = {"check_answer": lambda inp: _yes((0.95 if inp["question"].startswith("un") else 0.1)
                                          if NO_PASSAGE in inp["passages"] else 0.9)}


def program_over(th):
    lm, engine = scripted_lm(ANSWER_SCRIPT, probs=PROBS)
    program = SelfRAG(SimilarityRetriever(KB), config=ProgramSettings(retrieve_rules=False, relevance_threshold=0.1),
                      generator_lm=lm, adapter=dspy.JSONAdapter())
    program.compiled_thresholds = th
    return program, engine


def test_the_stated_stage_fits_the_check_less_its_prior_when_asked():
    program, engine = program_over(Thresholds(similarity=0.3, similarity_embedder="emb-a"))
    report = calibrate(program, loader=lambda task, split: SIM_QA, retrieve=0, relevance=0, stated=10, answer=0,
                       answer_objective=("max_false_abstention", 0.0), check_prior=True)
    stated = report["stages"]["stated"]
    assert engine.count("check_answer") == 20  # the check and its prior per question
    assert stated["check_prior"] is True and report["thresholds"]["check_prior"] is True
    assert all(set(r) == {"p_stated", "p_prior", "top_similarity", "answerable"} for r in stated["rows"])
    assert {r["p_prior"] for r in stated["rows"] if r["answerable"]} == {0.1}
    # the contrast separates every question the gate lets through: all unanswerable stopped, none answerable
    joint = stated["joint"]
    assert joint["abstention_unanswerable"] == 1.0 and joint["false_abstention"] == 0.0
    assert program.thresholds.check_prior  # the program now routes on the contrast it was fitted on


def test_the_bare_check_cannot_separate_them_and_records_no_prior():
    program, engine = program_over(Thresholds(similarity=0.3, similarity_embedder="emb-a", check_prior=True))
    report = calibrate(program, loader=lambda task, split: SIM_QA, retrieve=0, relevance=0, stated=10, answer=0,
                       answer_objective=("max_false_abstention", 0.0), check_prior=False)
    stated = report["stages"]["stated"]
    assert engine.count("check_answer") == 10 and stated["check_prior"] is False
    assert report["thresholds"]["check_prior"] is False and all("p_prior" not in r for r in stated["rows"])
    assert stated["joint"]["abstention_unanswerable"] < 1.0


def test_without_the_flag_the_set_being_fitted_says_which():
    program, engine = program_over(Thresholds(similarity=0.3, similarity_embedder="emb-a", check_prior=True))
    report = calibrate(program, loader=lambda task, split: SIM_QA, retrieve=0, relevance=0, stated=10, answer=0)
    assert report["stages"]["stated"]["check_prior"] is True and engine.count("check_answer") == 20


def with_prior(rows, prior=0.2):
    return [{**r, "p_prior": prior} for r in rows]


def test_rows_with_a_prior_are_fitted_on_the_contrast():
    rows = with_prior(noisy_rows(80, 1), prior=0.6)
    assert row_value(rows[0]) == pytest.approx((rows[0]["p_stated"] - 0.6 + 1) / 2)
    assert row_value({**rows[0], "p_prior": None}) is None  # the prior call failed: the check decides nothing
    # the program drafts after a failed (prior) call: the rule lets the question through unless the gate stops it
    assert answers({**rows[0], "p_prior": None}, 0.0, 0.0, 0.99)
    assert not answers({**rows[0], "p_prior": None}, 0.9, 0.0, 0.0)
    fit = fit_gate_and_check(rows, ("max_false_abstention", 0.1))
    bare = fit_gate_and_check(noisy_rows(80, 1), ("max_false_abstention", 0.1))
    # a constant prior shifts the value: the same decisions at a threshold moved onto the contrast's scale
    assert fit["stated"] != bare["stated"] and fit["abstention_unanswerable"] == bare["abstention_unanswerable"]


def test_recorded_rows_of_the_other_kind_are_refused_naming_the_file(tmp_path):
    bare = manifest(tmp_path / "bare.manifest.json", {"stated": {"rows": noisy_rows(10, 1)}})
    prior = manifest(tmp_path / "prior.manifest.json",
                     {"stated": {"rows": with_prior(noisy_rows(10, 2)), "check_prior": True}})
    assert len(RecordedRows([prior])("stated", "emb-a", True)) == 10
    assert all("p_prior" in r for r in RecordedRows([prior])("stated", "emb-a", True))
    assert all("p_prior" not in r for r in RecordedRows([bare])("stated", "emb-a", False))
    with pytest.raises(CompileError, match=r"bare.manifest.json: its 'stated' rows were recorded without the check's prior"):
        RecordedRows([prior, bare])("stated", "emb-a", True)
    with pytest.raises(CompileError, match=r"prior.manifest.json: its 'stated' rows were recorded with the check's prior"):
        RecordedRows([prior])("stated", "emb-a", False)
    lost = manifest(tmp_path / "lost.manifest.json",
                    {"stated": {"rows": noisy_rows(3, 1), "check_prior": True}})
    with pytest.raises(CompileError, match=r"lost.manifest.json 'stated': row 1 is not \{p_stated, p_prior"):
        RecordedRows([lost])("stated", "emb-a", True)
