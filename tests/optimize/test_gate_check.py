"""The gate and the answer check fitted together, cross-validated, and refitted on rows earlier
calibrations recorded (optimize/gate_check.py)."""

import json
import random

import pytest

from optimize.calibration import fit_joint_thresholds
from optimize.errors import CompileError
from optimize.gate_check import _similarity_weight, answers, cross_validate_gate_and_check, fit_gate_and_check
from optimize.gate_check import RecordedRows


def test_the_weighted_score_separates_what_two_thresholds_cannot():
    rng = random.Random(5)
    pts = [(rng.random(), rng.random()) for _ in range(200)]
    rows = [{"p_stated": round(p, 4), "top_similarity": round(s, 4), "answerable": p + s > 1.0} for p, s in pts]
    joint = fit_gate_and_check(rows, ("max_false_abstention", 0.1))
    assert 0.35 < joint["stated_similarity_weight"] < 0.65  # the boundary p + s = 1 weighs both alike
    assert joint["abstention_unanswerable"] > 0.95 and joint["false_abstention"] <= 0.1
    both = fit_joint_thresholds([r["top_similarity"] for r in rows], [r["p_stated"] for r in rows],
                                [r["answerable"] for r in rows], ("max_false_abstention", 0.1))
    assert 1.0 - both.point.false_acceptance < joint["abstention_unanswerable"] - 0.1  # a corner off a diagonal
    # a signal that points the wrong way gets no weight: the check scores on P(stated) alone
    weight, _ = _similarity_weight([0.9, 0.8, 0.2, 0.1] * 5, [0.1, 0.2, 0.8, 0.9] * 5, [True, True, False, False] * 5)
    assert weight == 0.0


def test_the_weight_holds_for_a_similarity_on_a_narrow_scale():
    """An embedder's cosines spread over a few hundredths: the weight is read on the raw scales but fitted
    on standardised signals, so the narrow signal is not shrunk by the regression's penalty."""
    rng = random.Random(7)
    pts = [(rng.random(), rng.random()) for _ in range(300)]
    # answerable when p + s > 1, the similarity shown as 0.80 + 0.05·s: the boundary is p + 20·sim = 17,
    # so the similarity's raw coefficient is 20 times P(stated)'s and w = 20/21
    rows = [{"p_stated": round(p, 4), "top_similarity": round(0.8 + 0.05 * s, 5), "answerable": p + s > 1.0}
            for p, s in pts]
    weight, regression = _similarity_weight([r["p_stated"] for r in rows], [r["top_similarity"] for r in rows],
                                            [r["answerable"] for r in rows])
    assert 0.9 < weight < 0.99 and regression["standardised"] is True
    assert 12 < regression["coef_similarity"] / regression["coef_p_stated"] < 30
    # the intercept is on the raw scales too: at sim 0.825 (s = 0.5) the boundary sits near p = 0.5
    a, b, c = regression["coef_p_stated"], regression["coef_similarity"], regression["intercept"]
    assert abs((-c - b * 0.825) / a - 0.5) < 0.1
    joint = fit_gate_and_check(rows, ("max_false_abstention", 0.1))
    assert joint["abstention_unanswerable"] > 0.9 and joint["false_abstention"] <= 0.1


def test_a_constant_similarity_gets_no_weight_even_with_rounding_in_its_spread():
    """0.8 sixty times has a standard deviation of ~3e-16, not 0: standardised by that, the constant got a
    coefficient of ~1e8 and all the weight, and the check's own separation was lost."""
    ps = [0.5 + 0.002 * i if i % 2 == 0 else 0.05 + 0.001 * i for i in range(60)]
    rows = [{"p_stated": p, "top_similarity": 0.8, "answerable": i % 2 == 0} for i, p in enumerate(ps)]
    weight, _ = _similarity_weight(ps, [0.8] * 60, [r["answerable"] for r in rows])
    assert weight == 0.0
    joint = fit_gate_and_check(rows, ("max_false_abstention", 0.1))
    assert joint["abstention_unanswerable"] == 1.0 and joint["false_abstention"] == 0.0


def noisy_rows(n=200, seed=3, noise=0.25):
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        p, s = rng.random(), rng.random()
        rows.append({"p_stated": round(p, 4), "top_similarity": round(s, 4),
                     "answerable": p + s + rng.uniform(-noise, noise) > 1.0})
    return rows


def test_cross_validation_applies_each_fold_s_rule_to_the_rows_left_out():
    rows = noisy_rows()
    objective = ("max_false_abstention", 0.1)
    fitted = fit_gate_and_check(rows, objective)
    cv = cross_validate_gate_and_check(rows, objective, folds=5, repeats=3)
    assert cv["folds"] == 5 and cv["repeats"] == 3 and cv["n"] == 200
    assert cv["answerable"] == sum(r["answerable"] for r in rows)
    lo, hi = cv["abstention_range"]
    assert 0.5 < lo <= cv["abstention_unanswerable"] <= hi < 1.0
    # out of sample the rule abstains on new answerable questions a little more than on its own sample
    assert fitted["false_abstention"] <= 0.1 < cv["false_abstention"] + 0.05
    assert cv["false_abstention"] > 0.0 and cv == cross_validate_gate_and_check(rows, objective, folds=5, repeats=3)


def test_cross_validation_needs_two_of_each_class():
    rows = [{"p_stated": 0.9, "top_similarity": 0.8, "answerable": True}] * 6 + [
        {"p_stated": 0.1, "top_similarity": 0.2, "answerable": False}]
    assert cross_validate_gate_and_check(rows, ("max_false_abstention", 0.1)) is None
    # with two of the smaller class the folds shrink to two
    rows.append({"p_stated": 0.2, "top_similarity": 0.3, "answerable": False})
    cv = cross_validate_gate_and_check(rows, ("max_false_abstention", 0.1), repeats=1)
    assert cv["folds"] == 2 and cv["abstention_unanswerable"] == 1.0 and cv["false_abstention"] == 0.0


def manifest(path, stages, embedder="emb-a", **calibration):
    path.write_text(json.dumps({"calibration": {"thresholds": {"similarity_embedder": embedder},
                                                "stages": stages, **calibration}}), encoding="utf-8")
    return path


def test_recorded_rows_pool_one_stage_over_several_runs(tmp_path):
    a = manifest(tmp_path / "train.manifest.json", {"stated": {"rows": noisy_rows(10, 1)}})
    b = manifest(tmp_path / "dev.manifest.json", {"stated": {"rows": noisy_rows(6, 2), "embedder": "emb-a"},
                                                  "stated@emb-b@zh": {"rows": noisy_rows(4, 3)}})
    rows_for = RecordedRows([a, b])
    assert rows_for("stated", "emb-a") == noisy_rows(10, 1) + noisy_rows(6, 2)
    assert rows_for.sources == [str(a), str(b)]
    with pytest.raises(CompileError, match=r"train.manifest.json: no 'stated@emb-b@zh' stage \(stated stages: stated\)"):
        rows_for("stated@emb-b@zh", "emb-b")
    assert RecordedRows([b])("stated@emb-b@zh", "emb-b") == noisy_rows(4, 3)  # the key names the embedder


def test_rows_on_another_embedder_or_malformed_are_refused_naming_the_file(tmp_path):
    other = manifest(tmp_path / "minilm.manifest.json", {"stated": {"rows": noisy_rows(4)}}, embedder="minilm")
    with pytest.raises(CompileError, match="minilm.manifest.json: its 'stated' similarities are on 'minilm', this "
                                           "retriever's are on 'e5-small'"):
        RecordedRows([other])("stated", "e5-small")
    bad = manifest(tmp_path / "bad.manifest.json", {"stated": {"rows": [
        {"p_stated": 0.5, "top_similarity": 0.7, "answerable": True},
        {"p_stated": 1.5, "top_similarity": 0.7, "answerable": False}]}})
    with pytest.raises(CompileError, match=r"bad.manifest.json 'stated': row 2 is not"):
        RecordedRows([bad])("stated", "emb-a")
    empty = manifest(tmp_path / "empty.manifest.json", {"stated": {"n": 0}})
    with pytest.raises(CompileError, match="empty.manifest.json 'stated': no rows recorded"):
        RecordedRows([empty])("stated", "emb-a")
    with pytest.raises(CompileError, match="missing.json: cannot read a compile manifest"):
        RecordedRows([tmp_path / "missing.json"])
    (tmp_path / "artifact.json").write_text('{"thresholds": {}}', encoding="utf-8")
    with pytest.raises(CompileError, match="artifact.json: not a compile manifest with calibration stages"):
        RecordedRows([tmp_path / "artifact.json"])


def test_a_set_s_rows_are_read_from_a_run_whose_main_set_was_on_that_embedder(tmp_path):
    e5 = manifest(tmp_path / "e5.manifest.json", {"stated": {"rows": noisy_rows(8, 5), "language": "en"}},
                  embedder="e5-small")
    assert RecordedRows([e5])("stated@e5-small@en", "e5-small") == noisy_rows(8, 5)
    with pytest.raises(CompileError, match="no 'stated@e5-small@zh' stage"):  # recorded in English
        RecordedRows([e5])("stated@e5-small@zh", "e5-small")
    run = tmp_path / "run.manifest.json"  # an older manifest: the run's language, not the stage's
    run.write_text(json.dumps({"language": "en", "calibration": {"thresholds": {"similarity_embedder": "e5-small"},
                                                                 "stages": {"stated": {"rows": noisy_rows(8, 5)}}}}))
    assert RecordedRows([run])("stated@e5-small@en", "e5-small") == noisy_rows(8, 5)
    with pytest.raises(CompileError, match="no 'stated@e5-small@zh' stage"):
        RecordedRows([run])("stated@e5-small@zh", "e5-small")
    minilm = manifest(tmp_path / "minilm.manifest.json", {"stated": {"rows": noisy_rows(8, 5)}}, embedder="minilm")
    with pytest.raises(CompileError, match="no 'stated@e5-small@en' stage"):  # another scale
        RecordedRows([minilm])("stated@e5-small@en", "e5-small")


def rows_with_failed_checks(n=100, seed=0):
    """Answerable questions near the top of the similarity scale, unanswerable ones below; every tenth
    answerable one's check call failed (``p_stated`` None)."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        answerable = i % 2 == 0
        sim = rng.uniform(0.75, 0.95) if answerable else rng.uniform(0.6, 0.85)
        p = None if answerable and i % 10 == 0 else rng.uniform(0.5, 1) if answerable else rng.uniform(0, 0.7)
        rows.append({"p_stated": p, "top_similarity": round(sim, 4), "answerable": answerable})
    return rows


def test_an_unchecked_row_the_gate_passes_is_answered_by_the_fit_and_its_cross_validation_alike():
    """The program drafts after a failed check (check value None, not "not stated"): the fit counted such a
    row as P(stated) 0 — answered or not by its similarity alone — while answers() abstained on it, so the
    fitted rule's own figures and its out-of-sample estimate disagreed (0.08 vs 0.22 false abstention)."""
    rows = rows_with_failed_checks()
    objective = ("max_false_abstention", 0.1)
    fit = fit_gate_and_check(rows, objective)
    gate, weight, threshold = fit["similarity"], fit["stated_similarity_weight"], fit["stated"]
    decided = [answers(r, gate, weight, threshold) for r in rows]
    pos = [d for d, r in zip(decided, rows) if r["answerable"]]
    neg = [d for d, r in zip(decided, rows) if not r["answerable"]]
    assert fit["false_abstention"] == round(pos.count(False) / len(pos), 4)
    assert fit["abstention_unanswerable"] == round(neg.count(False) / len(neg), 4)
    unchecked = [r for r in rows if r["p_stated"] is None]
    assert all(answers(r, gate, weight, 1.0) == (r["top_similarity"] >= gate) for r in unchecked)
    # the score's weight is fitted on the checked rows only
    checked = [r for r in rows if r["p_stated"] is not None]
    assert weight == _similarity_weight([r["p_stated"] for r in checked], [r["top_similarity"] for r in checked],
                                        [r["answerable"] for r in checked])[0]
    # each fold's fit counts them as its held-out decisions do: out of sample, the unchecked answerable
    # questions are no longer all abstained on (0.26 false abstention when they were)
    assert cross_validate_gate_and_check(rows, objective)["false_abstention"] <= 0.1


def recorded(path, rows, cal_split, **stage):
    return manifest(path, {"stated": {"rows": rows, **stage}}, split=cal_split)


def test_the_same_manifest_twice_is_refused_by_path_or_content(tmp_path):
    a = recorded(tmp_path / "a.manifest.json", noisy_rows(10, 1), "train")
    with pytest.raises(CompileError, match=r"--stated-rows .*a.manifest.json: the same manifest as .*a.manifest.json "
                                           r"\(its rows would count twice\)"):
        RecordedRows([a, tmp_path / "." / "a.manifest.json"])
    copy = tmp_path / "copy.manifest.json"
    copy.write_bytes(a.read_bytes())
    with pytest.raises(CompileError, match="copy.manifest.json: the same manifest as .*a.manifest.json"):
        RecordedRows([a, copy])


def test_a_pooled_manifest_with_one_of_its_sources_is_refused(tmp_path):
    train = recorded(tmp_path / "train.manifest.json", noisy_rows(10, 1), "train")
    dev = recorded(tmp_path / "dev.manifest.json", noisy_rows(6, 2), "dev")
    both = RecordedRows([train, dev])
    origin = both.origin("stated", "emb-a")
    assert origin["row_splits"] == {"train": 10, "dev": 6}
    assert [(s["path"], s["rows"], s["row_splits"]) for s in origin["rows_from"]] == [
        (str(train), 10, {"train": 10}), (str(dev), 6, {"dev": 6})]
    # a manifest whose stage was fitted on them records where its rows came from, as calibrate writes it
    pooled = recorded(tmp_path / "pooled.manifest.json", both("stated", "emb-a"), "train",
                      rows_recorded=16, split="train+dev", **origin)
    with pytest.raises(CompileError, match=r"pooled.manifest.json: its 'stated' stage was fitted on rows pooled from "
                                           r".*dev.manifest.json, also given"):
        RecordedRows([pooled, dev])
    assert RecordedRows([pooled])("stated", "emb-a") == both("stated", "emb-a")
    # and pooled again, its rows' splits go along; a source of a source is a source
    assert RecordedRows([pooled]).origin("stated", "emb-a")["row_splits"] == {"train": 10, "dev": 6}
    again = recorded(tmp_path / "again.manifest.json", noisy_rows(16, 7), "train", rows_recorded=16,
                     **RecordedRows([pooled]).origin("stated", "emb-a"))
    with pytest.raises(CompileError, match=r"again.manifest.json: its 'stated' stage was fitted on rows pooled from "
                                           r".*train.manifest.json"):
        RecordedRows([train, again])
    # an older manifest names its sources only by the paths given to its run
    older = manifest(tmp_path / "older.manifest.json", {"stated": {"rows": noisy_rows(16, 8), "rows_recorded": 16}},
                     split="train", stated_rows_from=[str(train), str(dev)])
    with pytest.raises(CompileError, match="older.manifest.json: its 'stated' stage was fitted on rows pooled from"):
        RecordedRows([older, train])
    assert RecordedRows([older]).origin("stated", "emb-a")["row_splits"] == {"unknown": 16}  # not its run's split


def test_a_stage_kept_from_another_manifest_is_not_pooled_twice(tmp_path):
    rows = noisy_rows(10, 1)
    start = recorded(tmp_path / "start.manifest.json", rows, "train")
    kept = manifest(tmp_path / "kept.manifest.json", {"stated": {"rows": rows}, "answer": {"n": 4}}, split="dev")
    with pytest.raises(CompileError, match=r"kept.manifest.json: its 'stated' rows are the same as "
                                           r".*start.manifest.json's"):
        RecordedRows([start, kept])("stated", "emb-a")


@pytest.mark.parametrize("calibration, problem", [
    ({"stages": {"stated": None}}, "'stated': not a stage report (an object), got None"),
    ({"stages": {"stated@e5@zh": []}}, "'stated@e5@zh': not a stage report (an object), got []"),
    ({"stages": {"stated": {"rows": {"p_stated": 0.5}}}}, "'stated': its rows are not a list"),
    ({"stages": {"stated": {"rows": [{"p_stated": 0.5, "answerable": True}]}}}, "'stated': row 1 is not"),
    ({"stages": {"stated": {"rows": [], "embedder": 3}}}, "'stated': its embedder is not text: 3"),
    ({"stages": {"stated": {"rows": [], "check_prior": "yes"}}}, "'stated': its check_prior is not true or false"),
    ({"thresholds": [], "stages": {"stated": {"rows": []}}}, "its calibration thresholds are not an object"),
])
def test_a_malformed_manifest_is_refused_when_read_naming_the_file(tmp_path, calibration, problem):
    path = tmp_path / "bad.manifest.json"
    path.write_text(json.dumps({"calibration": calibration}), encoding="utf-8")
    with pytest.raises(CompileError) as caught:
        RecordedRows([path])  # read, not yet asked for a stage: before any LM is built
    assert str(caught.value).startswith(f"--stated-rows {path}") and problem in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_stage_without_its_split_does_not_take_a_joined_calibration_split():
    from optimize.gate_check import stage_split

    assert stage_split({"split": "train"}, {}) == "train"
    assert stage_split({"split": "train+dev"}, {}) == "unknown"  # a summary of its stages, not this one's
    assert stage_split({"split": "train+dev"}, {"split": "train"}) == "train"
    assert stage_split({"split": "train+dev"}, {"row_splits": {"train": 3, "dev": 1}}) == "train+dev"
