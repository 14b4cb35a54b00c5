"""Calibration in an eval run: judgement ECEs from the traces, coverage–accuracy from the confidences."""

import pytest

from optimize.eval_calibration import calibration_markdown, calibration_summary, write_coverage_plot


def row(program, confidence, f1, answerable=True, abstained=False, rel=()):
    trace = [{"step": "grade_relevance", "inputs": {"passage_id": pid}, "probs": {"relevant": p, "irrelevant": 1 - p}}
             for pid, p in rel]
    trace.append({"step": "retrieve_decision", "probs": {"yes": 0.9, "no": 0.1, "continue": 0.0}})
    return {"task": "qa", "ok": True, "program": program, "answerable": answerable, "abstained": abstained,
            "gold_doc_ids": ["clapnq:1"], "scores": {"f1": f1, "precision": f1}, "result": {"confidence": confidence, "trace": trace}}


def test_curve_ranks_answers_by_confidence_and_ece_reads_the_trace(tmp_path):
    rows = [row("selfrag", 0.9, 1.0, rel=[("clapnq:1", 1.0), ("clapnq:2", 0.0)]),
            row("selfrag", 0.6, 0.0), row("selfrag", 0.2, 0.0, answerable=False),
            row("selfrag", None, 0.0, abstained=True),
            {"task": "qa", "ok": True, "program": "vanilla-rag", "answerable": True, "abstained": False,
             "gold_doc_ids": [], "scores": {"f1": 1.0}, "result": {"confidence": None, "trace": []}}]
    cal = calibration_summary(rows, ["selfrag", "vanilla-rag"])
    sr = cal["selfrag"]
    assert sr["relevance_ece"] == 0.0 and sr["relevance_n"] == 2  # perfectly calibrated on these two
    assert sr["retrieve_ece"] == 0.1 and sr["retrieve_n"] == 4
    curve = {round(p["coverage"], 2): p["accuracy"] for p in sr["coverage_accuracy"]}
    assert curve[0.25] == 1.0 and curve[1.0] == 0.25
    assert "coverage_accuracy" not in cal["vanilla-rag"]
    assert write_coverage_plot(cal, tmp_path).is_file()
    md = calibration_markdown(cal)
    assert "| selfrag | 0.000 (2) | 0.100 (4) | — | — |" in md and "| vanilla-rag | — | — | — | — |" in md


def test_check_and_evaluator_eces_read_their_steps():
    def r(answerable, p_stated, evaluated):
        trace = [{"step": "check_answer", "probs": {"yes": p_stated, "no": 1 - p_stated}}]
        trace += [{"step": "evaluate_retrieval", "inputs": {"passage_id": pid},
                   "probs": {str(k): v for k, v in dist.items()}} for pid, dist in evaluated]
        return {"task": "qa", "ok": True, "program": "p", "answerable": answerable, "abstained": False,
                "gold_doc_ids": ["clapnq:1"], "scores": {"precision": 1.0}, "result": {"confidence": 0.5, "trace": trace}}

    rows = [r(True, 0.8, [("clapnq:1", {10: 1.0}), ("clapnq:2", {0: 0.5, 4: 0.5})]), r(False, 0.4, [])]
    c = calibration_summary(rows, ["p"])["p"]
    # check: 0.8 for an answerable question (gap 0.2), 0.4 for an unanswerable one (gap 0.4)
    assert c["check_n"] == 2 and c["check_ece"] == pytest.approx(0.3)
    # evaluator: E[score]/10 = 1.0 for the gold passage, 0.2 for the other (gap 0.2 over two)
    assert c["evaluator_n"] == 2 and c["evaluator_ece"] == pytest.approx(0.1)
    assert "| p | — | — | 0.300 (2) | 0.100 (2) |" in calibration_markdown({"p": c})
