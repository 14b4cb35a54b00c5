"""CRAG's calibrate stage (optimize/calibrate_crag.py): the evaluator's scores, the thresholds fitted to stated
error shares, and the stage on a scripted evaluator — the calls it makes, the report, the thresholds it sets."""

import dspy
import pytest

from optimize.calibrate_crag import calibrate_crag, fit_crag_thresholds, record_rows, routing, scores_of
from programs.crag import CorrectiveRAG
from programs.settings import ProgramSettings
from programs.thresholds import CragThresholds, Thresholds
from tests.fakes import ListRetriever, scripted_lm


def row(relevant, probs):
    return {"language": "en", "id": "x", "relevant": relevant, "probs": probs}


def test_scores_are_the_argmax_and_the_expectation():
    assert scores_of(row(True, {"10": 0.4, "2": 0.35, "0": 0.25})) == (10.0, pytest.approx(4.7))
    assert scores_of(row(True, {"3": 0.5, "8": 0.5})) == (3.0, 5.5)  # a tie goes to the lower score
    assert scores_of(row(True, None)) is None


def test_thresholds_are_fitted_to_stated_error_shares():
    # relevant 6, 7, 8, 9, 9 and irrelevant 2, 3, 4, 5, 8, each twice (point masses: argmax = expectation)
    rel = [row(True, {str(v): 1.0}) for v in (6, 7, 8, 9, 9)] * 2
    irr = [row(False, {str(v): 1.0}) for v in (2, 3, 4, 5, 8)] * 2
    assert fit_crag_thresholds(rel + irr, max_trusted=0.2, max_dropped=0.2) == (5.5, 5.5)  # lower capped at upper
    assert fit_crag_thresholds(rel + irr, max_trusted=0.0, max_dropped=0.0) == (8.5, 5.5)
    assert fit_crag_thresholds(rel + irr, max_trusted=0.0, max_dropped=0.0, score="argmax") == (8.5, 5.5)
    with pytest.raises(ValueError, match="relevant and irrelevant"):
        fit_crag_thresholds(rel)


def test_routing_shares():
    shares = routing([7, 5, 3, 8], [True, True, False, False], upper=6, lower=4)
    assert shares == {"relevant_correct": 0.5, "relevant_incorrect": 0.0, "irrelevant_incorrect": 0.5,
                      "irrelevant_correct": 0.5}


GOLD = "The Zephyr bridge opened in 1931."
OTHER = "Oda river trout season runs from April to June."


def examples(n=10):
    return [dspy.Example(id=f"r{i}", question=f"When did the Zephyr bridge {i} open?",
                         passage=GOLD if i % 2 == 0 else OTHER, title="",
                         relevance="relevant" if i % 2 == 0 else "irrelevant") for i in range(n)]


def crag(probs=None, **cfg):
    probs = probs or {"evaluate_retrieval": lambda inp: {"score": {7: 0.6, 6: 0.4} if "Zephyr" in inp["passage"]
                                                          else {5: 0.7, 2: 0.3}}}
    decoded = lambda inp: {"score": 7 if "Zephyr" in inp["passage"] else 5}  # noqa: E731  (each argmax)
    lm, engine = scripted_lm({"evaluate_retrieval": decoded}, probs=probs)
    program = CorrectiveRAG(ListRetriever([]), config=ProgramSettings(**cfg), generator_lm=lm,
                            adapter=dspy.JSONAdapter())
    return program, engine


def test_the_stage_asks_one_evaluator_call_per_passage_and_sets_the_fitted_thresholds(tmp_path):
    program, engine = crag()
    fitted, report, usage = calibrate_crag(program, examples(), tmp_path, language="en")
    assert [role for role, _ in engine.calls] == ["evaluate_retrieval"] * 10 and usage.lm_calls == 10
    # relevant E = 6.6, irrelevant E = 4.1: trust none above, drop none below
    assert fitted == CragThresholds(score="expected", upper=5.35, lower=5.35)
    assert program.compiled_thresholds.crag == fitted and program.crag_thresholds == fitted
    assert report["n"] == 10 and report["relevant"] == 5 and report["failed"] == 0
    assert report["auc_expected"] == 1.0 and report["routing_fitted"]["irrelevant_correct"] == 0.0
    assert report["routing_start"]["relevant_correct"] == 0.0  # 6.6 is below the default upper 6.64
    assert report["start"] == CragThresholds().model_dump()
    assert (tmp_path / "reliability-crag.png").is_file() and len(report["rows"]) == 10
    assert {r["id"] for r in report["rows"]} == {f"r{i}" for i in range(10)}


def test_the_stage_keeps_the_other_thresholds_and_fits_the_score_in_force():
    program, _ = crag(crag_score="argmax")
    program.compiled_thresholds = Thresholds(answer=0.7)
    fitted, report, _ = calibrate_crag(program, examples(), None)
    assert fitted.score == "argmax" and report["score"] == "argmax" and (fitted.upper, fitted.lower) == (6.0, 6.0)
    assert program.compiled_thresholds.answer == 0.7 and program.compiled_thresholds.crag == fitted


def test_too_few_or_one_class_keeps_the_thresholds_it_started_with():
    program, _ = crag()
    fitted, report, _ = calibrate_crag(program, [ex for ex in examples() if ex.relevance == "relevant"], None)
    assert fitted == CragThresholds() and "kept_default" in report
    assert program.compiled_thresholds is None  # nothing fitted: no set frozen into the artifact
    program.compiled_thresholds = Thresholds(answer=0.7)
    calibrate_crag(program, [ex for ex in examples() if ex.relevance == "relevant"], None, language="zh")
    assert program.compiled_thresholds == Thresholds(answer=0.7)


def test_failed_calls_are_rows_without_probabilities_not_crashes():
    lm, engine = scripted_lm({})  # no reply scripted: every evaluator call fails
    program = CorrectiveRAG(ListRetriever([]), generator_lm=lm, adapter=dspy.JSONAdapter())
    rows, usage = record_rows(program, examples(4))
    assert [r["probs"] for r in rows] == [None] * 4 and len(engine.calls) == 4
    fitted, report, _ = calibrate_crag(program, [], None, recorded=rows)
    assert report["failed"] == 4 and "kept_default" in report and fitted == CragThresholds()


def test_recorded_rows_refit_without_an_lm_call():
    program, engine = crag()
    rows = [row(True, {"9": 1.0}), row(True, {"8": 1.0}), row(False, {"2": 1.0}), row(False, {"3": 1.0})]
    fitted, report, usage = calibrate_crag(program, examples(), None, recorded=rows)
    assert engine.calls == [] and usage.lm_calls == 0 and (fitted.upper, fitted.lower) == (5.5, 5.5)


def test_a_fit_for_chinese_questions_goes_into_their_own_set_and_starts_from_it():
    program, _ = crag()
    program.compiled_thresholds = Thresholds(crag=CragThresholds(upper=6.2, lower=3.0), crag_by_language={
        "zh": CragThresholds(upper=6.9, lower=6.5)})
    chinese = [dspy.Example(**{**ex.toDict(), "question": f"Zephyr 大桥{i}是哪一年通车的？"}) for i, ex in enumerate(examples())]
    fitted, report, _ = calibrate_crag(program, chinese, None, language="zh")
    assert report["language"] == "zh" and report["start"] == CragThresholds(upper=6.9, lower=6.5).model_dump()
    assert program.compiled_thresholds.crag_by_language == {"zh": fitted}
    assert program.compiled_thresholds.crag == CragThresholds(upper=6.2, lower=3.0)  # the any-language set kept
    assert {r["language"] for r in report["rows"]} == {"zh"}  # each row in its question's language


def test_an_english_fit_is_the_set_for_any_language():
    program, _ = crag()
    fitted, report, _ = calibrate_crag(program, examples(), None, language="en")
    assert report["language"] is None and program.compiled_thresholds.crag == fitted
    assert program.compiled_thresholds.crag_by_language == {}
    assert {r["language"] for r in report["rows"]} == {"en"}
