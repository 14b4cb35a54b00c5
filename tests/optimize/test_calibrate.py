"""The calibrate stage: thresholds fitted on the program's own soft scores, set on the program, reported."""

import dspy
import pytest

from optimize.calibrate import calibrate
from optimize.errors import CompileError
from optimize.gate_check import RecordedRows
from optimize.manifest import summary_rows
from programs.selfrag import SelfRAG
from programs.settings import ProgramSettings
from programs.thresholds import Thresholds
from tests.fakes import ListRetriever, passage, scripted_lm

KB = [passage("p1", "The Zephyr bridge opened in 1931."), passage("p2", "Trout season runs from April.")]


def ex(**kw):
    return dspy.Example(**kw)


SPLITS = {
    ("retrieve", "train"): [ex(question=f"Who founded company {i}?", decision="yes") for i in range(6)]
    + [ex(question=f"Tell me a joke about cats number {i}", decision="no") for i in range(6)],
    ("relevance", "train"): [ex(id=f"r{i}{j}", question=f"question {i}", passage=f"{'good' if j == 0 else 'bad'} {i}",
                                relevance="relevant" if j == 0 else "irrelevant") for i in range(4) for j in range(2)],
    ("qa_en", "train"): [ex(question="When did the Zephyr bridge open?", answers=["1931"], answerable=True)] * 3
    + [ex(question="When did the Zephyr bridge close?", answers=[], answerable=False)] * 3,
}


def test_calibrate_fits_each_threshold_and_reports(tmp_path):
    script = {
        "retrieve_decision": lambda inp: {"decision": "no"},
        "grade_relevance": lambda inp: {"relevance": "relevant"},
        "generate_answer": lambda inp: {"answer": "1931", "citations": [1], "answerable": True},
        "judge_support": {"support": "fully"},
    }
    probs = {
        # the judge leans the right way, with a margin the default 0.5 misses: P(yes) 0.45 vs 0.2
        "retrieve_decision": lambda inp: {"decision": {"yes": 0.45, "no": 0.55, "continue": 0.0}}
        if "founded" in inp["question"] or "Zephyr" in inp["question"]
        else {"decision": {"yes": 0.2, "no": 0.8, "continue": 0.0}},
        "grade_relevance_batch": lambda inp: {"relevance": {"relevant": 0.4, "irrelevant": 0.6}},
        "judge_support": lambda inp: {"support": {"fully": 0.9, "partially": 0.05, "no": 0.05}}
        if "open" in inp["question"] else {"support": {"fully": 0.3, "partially": 0.1, "no": 0.6}},
    }
    lm, engine = scripted_lm(script, probs=probs)
    program = SelfRAG(ListRetriever(KB), config=ProgramSettings(max_rewrites=0, max_regenerations=0,
                                                                 relevance_threshold=0.1, retrieve_rules=False),
                      generator_lm=lm, adapter=dspy.JSONAdapter())
    report = calibrate(program, loader=lambda task, split: SPLITS[(task, split)], out_dir=tmp_path,
                       answer_objective="accuracy", stated=0)
    th = report["thresholds"]
    assert 0.2 < th["retrieve"] <= 0.45  # separates 0.45 (yes) from 0.2 (no)
    assert report["stages"]["retrieve"]["accuracy_with_rules_fitted"] == 1.0
    assert report["stages"]["retrieve"]["accuracy_with_rules_default"] == 0.5
    # confidence = E[support]: 0.925 when supported, 0.35 when not
    assert 0.35 < th["answer"] <= 0.925
    rows = report["stages"]["answer"]["rows"]  # one per answered question, with the drafter's P(answerable)
    assert len(rows) == 6 and {r["confidence"] for r in rows} == {0.925, 0.35}
    assert [r["right"] for r in rows] == [True] * 3 + [False] * 3
    assert program.compiled_thresholds == Thresholds(**th)
    assert (tmp_path / "reliability-retrieve.png").is_file() and (tmp_path / "coverage-answer.png").is_file()
    assert report["cost"]["lm_calls"] == len(engine.calls)


def test_a_stage_of_size_zero_keeps_its_default(tmp_path):
    lm, _ = scripted_lm({})
    program = SelfRAG(ListRetriever(KB), generator_lm=lm, adapter=dspy.JSONAdapter())
    report = calibrate(program, loader=lambda t, s: [], retrieve=0, relevance=0, stated=0, answer=0)
    assert report["thresholds"] == Thresholds().model_dump() and report["stages"] == {}


def test_a_skipped_stage_keeps_the_threshold_the_program_was_compiled_with():
    lm, _ = scripted_lm({})
    program = SelfRAG(ListRetriever(KB), generator_lm=lm, adapter=dspy.JSONAdapter())
    program.compiled_thresholds = Thresholds(retrieve=0.7, relevance=0.05, answer=0.5, stated=0.3,
                                             similarity=0.4, similarity_embedder="e")
    report = calibrate(program, loader=lambda t, s: [], retrieve=0, relevance=0, similarity=0, stated=0, answer=0)
    assert report["thresholds"] == {"retrieve": 0.7, "relevance": 0.05, "answer": 0.5, "stated": 0.3,
                                    "verified": 1.0, "similarity": 0.4, "similarity_embedder": "e",
                                    "stated_similarity_weight": 0.0, "check_prior": False, "by_embedder": {}}


ANSWER_SCRIPT = {
    "grade_relevance": lambda inp: {"relevance": "relevant"},
    "check_answer": {"stated": "yes"},
    "generate_answer": lambda inp: {"answer": "1931", "citations": [1], "answerable": True},
    "judge_support": {"support": "fully"},
}
# the check leans the right way with a margin the default 0.5 misses: P(stated) 0.4 (answerable) vs 0.1
STATED_PROBS = {"check_answer": lambda inp: {"stated": {"yes": 0.4, "no": 0.6}} if "open" in inp["question"]
                else {"stated": {"yes": 0.1, "no": 0.9}}}


def answer_program(**cfg):
    lm, engine = scripted_lm(ANSWER_SCRIPT, probs=STATED_PROBS)
    config = ProgramSettings(max_rewrites=0, max_regenerations=0, relevance_threshold=0.1, retrieve_rules=False,
                             **cfg)
    return SelfRAG(ListRetriever(KB), config=config, generator_lm=lm, adapter=dspy.JSONAdapter()), engine


def test_stated_stage_fits_the_answer_check_and_the_answer_stage_runs_behind_it(tmp_path):
    program, engine = answer_program()
    report = calibrate(program, loader=lambda task, split: SPLITS[(task, split)], out_dir=tmp_path,
                       retrieve=0, relevance=0, answer_objective=("max_false_abstention", 0.1))
    th = report["thresholds"]
    assert 0.1 < th["stated"] <= 0.4  # separates 0.4 (answerable) from 0.1 (unanswerable)
    stated = report["stages"]["stated"]
    assert stated["n"] == 6 and stated["positives"] == 3 and stated["accuracy_fitted"] == 1.0
    assert stated["accuracy_default"] == 0.5 and stated["not_checked"] == 0
    # the answer stage ran with the fitted stated threshold: the unanswerable questions never drafted
    assert report["stages"]["answer"]["reached_a_candidate"] == 3
    assert engine.count("generate_answer") == 3
    assert (tmp_path / "reliability-stated.png").is_file()
    # the same scores fit ``verified``: above 0.25 every question is answerable (3 of them, precision 1),
    # so the answer stage's drafts went without a support call, their confidence being P(stated)
    assert th["verified"] == pytest.approx(0.25) and stated["verified"]["threshold"] == pytest.approx(0.25)
    assert engine.count("judge_support") == 0
    assert report["stages"]["answer"]["rows"][0]["confidence"] == pytest.approx(0.4)


def test_without_a_verified_precision_the_support_judge_keeps_running():
    program, engine = answer_program()
    report = calibrate(program, loader=lambda task, split: SPLITS[(task, split)], retrieve=0, relevance=0,
                       verified_precision=None, answer_objective=("max_false_abstention", 0.1))
    assert report["thresholds"]["verified"] == 1.0 and "verified" not in report["stages"]["stated"]
    assert engine.count("judge_support") == 3


def test_a_verified_precision_of_zero_lets_the_check_stand_in_for_the_support_judge_on_every_draft():
    # for a model whose support judge does not separate the questions that pass the check (ClapNQ dev: ROC AUC
    # 0.44 against answerable, 0.51 against a right answer), the check alone decides: verified 0
    program, engine = answer_program()
    report = calibrate(program, loader=lambda task, split: SPLITS[(task, split)], retrieve=0, relevance=0,
                       verified_precision=0.0, answer_objective=("max_false_abstention", 0.1))
    assert report["thresholds"]["verified"] == 0.0
    assert report["stages"]["answer"]["reached_a_candidate"] == 3
    assert engine.count("generate_answer") == 3 and engine.count("judge_support") == 0


def test_the_default_objective_keeps_a_margin_that_three_answerable_questions_cannot_pay_for():
    # the default bounds false abstention by its upper confidence bound: with 3 answerable questions even
    # 0 of 3 leaves it above 0.1, so the check's threshold stays at 0 (abstain on nothing) and all draft
    program, engine = answer_program()
    report = calibrate(program, loader=lambda task, split: SPLITS[(task, split)], retrieve=0, relevance=0)
    assert report["stages"]["stated"]["objective"] == "max_false_abstention<=0.1@0.8"
    assert report["thresholds"]["stated"] == 0.0 and engine.count("generate_answer") == 6


def test_stated_stage_is_skipped_for_a_program_without_the_answer_check():
    program, engine = answer_program(answer_check=False)
    report = calibrate(program, loader=lambda task, split: SPLITS[(task, split)], retrieve=0, relevance=0,
                       answer=0)
    assert report["stages"] == {} and report["thresholds"]["stated"] == 0.5 and engine.calls == []


# The similarity gate: 5 answerable and 5 unanswerable questions whose passages have these best dense similarities.
SIMS = {f"answerable question {i}": s for i, s in enumerate((0.3, 0.6, 0.65, 0.7, 0.75))}
SIMS.update({f"unanswerable question {i}": s for i, s in enumerate((0.2, 0.25, 0.35, 0.4, 0.8))})
SIM_QA = [ex(question=q, answers=["x"] if q.startswith("answerable") else [], answerable=q.startswith("answerable"))
          for q in SIMS]


class SimilarityRetriever(ListRetriever):
    embedder_name = "emb-a"

    def retrieve(self, query, k=5, filters=None):
        return [p.model_copy(update={"similarity": SIMS.get(query, 0.9)}) for p in super().retrieve(query, k, filters)]


def test_similarity_stage_fits_the_gate_for_its_false_abstention_without_an_lm_call(tmp_path):
    lm, engine = scripted_lm({})
    program = SelfRAG(SimilarityRetriever(KB), config=ProgramSettings(retrieve_rules=False), generator_lm=lm,
                      adapter=dspy.JSONAdapter())
    report = calibrate(program, loader=lambda task, split: SIM_QA, retrieve=0, relevance=0, similarity=10, stated=0,
                       answer=0, similarity_false_abstention=0.2, out_dir=tmp_path)
    # below 0.6: 4 of 5 unanswerable and 1 of 5 answerable (the most a 0.2 false abstention allows)
    assert 0.4 < report["thresholds"]["similarity"] <= 0.6
    assert report["thresholds"]["similarity_embedder"] == "emb-a"
    stage = report["stages"]["similarity"]
    assert stage["abstention_unanswerable"] == 0.8 and stage["false_abstention"] == pytest.approx(0.2)
    assert stage["embedder"] == "emb-a" and stage["cost"]["lm_calls"] == 0 and engine.calls == []
    assert program.thresholds.similarity == report["thresholds"]["similarity"]


def test_calibrating_over_another_embedder_keeps_the_gate_and_stores_a_set_for_it(tmp_path):
    lm, engine = scripted_lm({})
    program = SelfRAG(SimilarityRetriever(KB), config=ProgramSettings(retrieve_rules=False), generator_lm=lm,
                      adapter=dspy.JSONAdapter())
    start = Thresholds(similarity=0.3, similarity_embedder="emb-other", stated=0.45, stated_similarity_weight=0.5,
                       answer=0.4)
    program.compiled_thresholds = start
    report = calibrate(program, loader=lambda task, split: SIM_QA, retrieve=0, relevance=0, similarity=10, stated=0,
                       answer=0, similarity_false_abstention=0.2, out_dir=tmp_path)
    th = report["thresholds"]
    # the other embedder's gate, weight and stated threshold are untouched; emb-a's fit is stored for emb-a
    assert (th["similarity"], th["similarity_embedder"], th["stated"], th["stated_similarity_weight"]) == (
        0.3, "emb-other", 0.45, 0.5)
    own = th["by_embedder"]["emb-a"]
    assert 0.4 < own["similarity"] <= 0.6 and own["stated_similarity_weight"] == 0.0 and own["stated"] == 0.45
    assert program.compiled_thresholds == Thresholds(**th) and program.gate_threshold == own["similarity"]
    assert list(report["stages"]) == ["similarity@emb-a"]  # the set's report, beside the main set's in a manifest
    # and its plot beside the main set's, in the set's own folder (the main set's plot is not overwritten)
    assert report["stages"]["similarity@emb-a"]["reliability_png"] == str(tmp_path / "emb-a" / "reliability-similarity.png")
    assert (tmp_path / "emb-a" / "reliability-similarity.png").is_file()
    assert not (tmp_path / "reliability-similarity.png").exists()
    assert engine.calls == []
    # a second run over emb-a starts from its own set and replaces it
    report = calibrate(program, loader=lambda task, split: SIM_QA, retrieve=0, relevance=0, similarity=10, stated=0,
                       answer=0, similarity_false_abstention=0.0, out_dir=tmp_path)
    assert report["thresholds"]["similarity"] == 0.3
    assert report["thresholds"]["by_embedder"]["emb-a"]["similarity"] < own["similarity"]
    # with a language, the set is stored for the embedder in that language only
    program.compiled_thresholds = start
    report = calibrate(program, loader=lambda task, split: SIM_QA, retrieve=0, relevance=0, similarity=10, stated=0,
                       answer=0, similarity_false_abstention=0.2, out_dir=tmp_path, language="zh")
    assert list(report["thresholds"]["by_embedder"]) == ["emb-a@zh"]
    assert report["thresholds"]["by_embedder"]["emb-a@zh"]["similarity"] == own["similarity"]


def test_similarity_stage_keeps_the_gate_off_for_a_retriever_that_names_no_embedder():
    lm, _ = scripted_lm({})
    program = SelfRAG(ListRetriever(KB), generator_lm=lm, adapter=dspy.JSONAdapter())
    report = calibrate(program, loader=lambda task, split: SIM_QA, retrieve=0, relevance=0, similarity=10, stated=0,
                       answer=0)
    assert report["thresholds"]["similarity"] == 0.0 and "kept_default" in report["stages"]["similarity"]


def test_stated_stage_fits_the_gate_and_the_check_together():
    # the check is sure of every question but the unanswerable one the gate cannot stop (similarity 0.8)
    probs = {"check_answer": lambda inp: {"stated": {"yes": 0.1, "no": 0.9}} if inp["question"].endswith("question 4")
             and inp["question"].startswith("un") else {"stated": {"yes": 0.9, "no": 0.1}}}
    lm, engine = scripted_lm(ANSWER_SCRIPT, probs=probs)
    program = SelfRAG(SimilarityRetriever(KB), config=ProgramSettings(retrieve_rules=False, relevance_threshold=0.1),
                      generator_lm=lm, adapter=dspy.JSONAdapter())
    program.compiled_thresholds = Thresholds(similarity=0.3, similarity_embedder="emb-a")
    report = calibrate(program, loader=lambda task, split: SIM_QA, retrieve=0, relevance=0, stated=10, answer=0,
                       answer_objective=("max_false_abstention", 0.2))
    stated = report["stages"]["stated"]
    # every question is checked, even below the gate, so the rows hold both signals
    assert engine.count("check_answer") == 10 and stated["n"] == 10
    assert len(program.retriever.queries) == 10  # one retrieval per question gives both signals
    assert sorted(r["top_similarity"] for r in stated["rows"]) == sorted(SIMS.values())
    assert [r["answerable"] for r in stated["rows"]] == [e.answerable for e in SIM_QA]
    # jointly: gate at 0.5 (stops 4 unanswerable and the answerable 0.3: false abstention 0.2), the check
    # stops the fifth; neither alone abstains on all five within that false abstention
    joint = stated["joint"]
    assert joint["similarity"] == pytest.approx(0.5) and 0.1 < joint["stated"] <= 0.9
    assert joint["abstention_unanswerable"] == 1.0 and joint["false_abstention"] == 0.2
    assert report["thresholds"]["similarity"] == pytest.approx(0.5) and report["thresholds"]["stated"] == joint["stated"]
    assert report["thresholds"]["similarity_embedder"] == "emb-a"
    assert stated["similarity_gated"] == 5 and stated["threshold"] == joint["stated"]  # gated questions fit as P = 0
    assert program.gate_threshold == pytest.approx(0.5)
    # the check's score mixes in the similarity, weighed by a logistic regression on both signals
    weight = joint["stated_similarity_weight"]
    assert 0.0 < weight < 1.0 and report["thresholds"]["stated_similarity_weight"] == weight == program.stated_weight
    assert joint["logistic_regression"]["coef_similarity"] > 0 and joint["logistic_regression"]["coef_p_stated"] > 0
    # the compile table shows the stated row for the joint threshold and a row for the pair
    table = {row[0]: row for row in summary_rows({"calibration": report})}
    assert f"threshold {joint['stated']:.3f}" in table["calibrate stated"][1]
    assert stated["accuracy_fitted"] == 0.9 and table["calibrate stated"][4] == "0.900"  # the answerable 0.3 is gated
    assert "abstention 1.00 at false abstention 0.20 (similarity 0.500" in table["calibrate gate + check"][1]
    cv = joint["cross_validated"]  # 5 of each class: 5 folds of one answerable and one unanswerable question
    assert cv["folds"] == 5 and cv["n"] == 10
    assert table["  out of sample"][1] == (f"abstention {cv['abstention_unanswerable']:.2f} at false abstention "
                                           f"{cv['false_abstention']:.2f} (5-fold, 5 shuffles)")


def test_stated_stage_fits_the_check_alone_when_the_gate_is_off():
    lm, _ = scripted_lm(ANSWER_SCRIPT, probs={"check_answer": {"stated": {"yes": 0.9, "no": 0.1}}})
    program = SelfRAG(SimilarityRetriever(KB), config=ProgramSettings(retrieve_rules=False, relevance_threshold=0.1),
                      generator_lm=lm, adapter=dspy.JSONAdapter())
    report = calibrate(program, loader=lambda task, split: SIM_QA, retrieve=0, relevance=0, stated=10, answer=0)
    stated = report["stages"]["stated"]
    assert "joint" not in stated and stated["similarity_gated"] == 0 and report["thresholds"]["similarity"] == 0.0


def test_stated_stage_refits_on_recorded_rows_without_an_lm_call(tmp_path):
    from optimize.gate_check import fit_gate_and_check
    from tests.optimize.test_gate_check import manifest, noisy_rows

    lm, engine = scripted_lm({})
    program = SelfRAG(SimilarityRetriever(KB), config=ProgramSettings(retrieve_rules=False), generator_lm=lm,
                      adapter=dspy.JSONAdapter())
    program.compiled_thresholds = Thresholds(similarity=0.3, similarity_embedder="emb-a")
    train = manifest(tmp_path / "train.manifest.json", {"stated": {"rows": noisy_rows(60, 1)}})
    dev = manifest(tmp_path / "dev.manifest.json", {"stated": {"rows": noisy_rows(40, 2)}})
    asked = []

    def rows_for(stage, embedder, check_prior):
        asked.append((stage, embedder))
        return RecordedRows([train, dev])(stage, embedder, check_prior)

    report = calibrate(program, loader=lambda task, split: SIM_QA, retrieve=0, relevance=0, stated=0, answer=0,
                       answer_objective=("max_false_abstention", 0.1), stated_rows=rows_for)
    stated = report["stages"]["stated"]
    assert engine.calls == [] and program.retriever.queries == [] and stated["cost"]["lm_calls"] == 0
    assert asked == [("stated", "emb-a")] and stated["rows_recorded"] == stated["questions"] == 100
    expected = fit_gate_and_check(noisy_rows(60, 1) + noisy_rows(40, 2), ("max_false_abstention", 0.1))
    joint = stated["joint"]
    assert (joint["similarity"], joint["stated"], joint["stated_similarity_weight"]) == (
        expected["similarity"], expected["stated"], expected["stated_similarity_weight"])
    assert report["thresholds"]["similarity"] == expected["similarity"] and stated["embedder"] == "emb-a"
    assert joint["cross_validated"]["n"] == 100 and 0.0 < joint["cross_validated"]["abstention_unanswerable"] < 1.0
    # over another embedder's gate, the set's own stage is asked for
    asked.clear()
    program.compiled_thresholds = Thresholds(similarity=0.3, similarity_embedder="emb-other",
                                             by_embedder={"emb-a@zh": {"similarity": 0.4, "stated": 0.5}})
    train = manifest(tmp_path / "train.manifest.json", {"stated": {"rows": noisy_rows(60, 1), "language": "en"}})
    with pytest.raises(CompileError, match="no 'stated@emb-a@zh' stage"):
        calibrate(program, loader=lambda task, split: SIM_QA, retrieve=0, relevance=0, answer=0, language="zh",
                  stated_rows=rows_for)
    assert asked == [("stated@emb-a@zh", "emb-a")] and engine.calls == []
    assert program.compiled_thresholds.similarity_embedder == "emb-other"  # a failed calibration changes nothing
    # with the set's rows recorded, the set's own gate is in force: the gate and the check are refitted together
    # (no question is asked, so no question's language picks the set) and stored back under its key
    zh = manifest(tmp_path / "zh.manifest.json", {"stated@emb-a@zh": {"rows": noisy_rows(80, 4)}})
    report = calibrate(program, loader=lambda task, split: SIM_QA, retrieve=0, relevance=0, answer=0, language="zh",
                       stated_rows=RecordedRows([zh]), answer_objective=("max_false_abstention", 0.1))
    expected = fit_gate_and_check(noisy_rows(80, 4), ("max_false_abstention", 0.1))
    own = report["thresholds"]["by_embedder"]["emb-a@zh"]
    assert "joint" in report["stages"]["stated@emb-a@zh"] and engine.calls == []
    assert (own["similarity"], own["stated"], own["stated_similarity_weight"]) == (
        expected["similarity"], expected["stated"], expected["stated_similarity_weight"])
    assert report["thresholds"]["similarity"] == 0.3 and report["thresholds"]["similarity_embedder"] == "emb-other"


def test_a_stage_fitted_on_recorded_rows_records_their_splits_and_the_calibration_says_which(tmp_path):
    """A manifest's calibration split was the run's --cal-split even when the stated stage pooled rows
    recorded on dev: it now joins the splits its stages read, and the stage records its rows' splits."""
    from tests.optimize.test_gate_check import manifest, noisy_rows

    lm, engine = scripted_lm({"retrieve_decision": {"decision": "yes"}})
    program = SelfRAG(SimilarityRetriever(KB), config=ProgramSettings(retrieve_rules=False), generator_lm=lm,
                      adapter=dspy.JSONAdapter())
    program.compiled_thresholds = Thresholds(similarity=0.3, similarity_embedder="emb-a")
    dev = manifest(tmp_path / "dev.manifest.json", {"stated": {"rows": noisy_rows(100, 2)}}, split="dev")
    report = calibrate(program, loader=lambda task, split: SIM_QA, retrieve=0, relevance=0, answer=0,
                       answer_objective=("max_false_abstention", 0.1), stated_rows=RecordedRows([dev]))
    stated = report["stages"]["stated"]
    assert report["split"] == "dev" and stated["split"] == "dev" and stated["row_splits"] == {"dev": 100}
    assert [(s["path"], s["rows"]) for s in stated["rows_from"]] == [(str(dev), 100)]
    train = manifest(tmp_path / "train.manifest.json", {"stated": {"rows": noisy_rows(300, 1)}}, split="train")
    report = calibrate(program, loader=lambda task, split: SPLITS[("retrieve", "train")] if task == "retrieve"
                       else SIM_QA, relevance=0, answer=0, answer_objective=("max_false_abstention", 0.1),
                       stated_rows=RecordedRows([train, dev]))
    assert report["split"] == "train+dev" and report["stages"]["retrieve"]["split"] == "train"
    assert report["stages"]["stated"]["row_splits"] == {"train": 300, "dev": 100}


def test_recorded_rows_are_read_before_the_first_stage_spends_an_lm_call(tmp_path):
    from tests.optimize.test_gate_check import manifest, noisy_rows

    lm, engine = scripted_lm({"retrieve_decision": {"decision": "yes"}})
    program = SelfRAG(SimilarityRetriever(KB), config=ProgramSettings(retrieve_rules=False), generator_lm=lm,
                      adapter=dspy.JSONAdapter())
    other = manifest(tmp_path / "minilm.manifest.json", {"stated": {"rows": noisy_rows(10)}}, embedder="minilm")
    with pytest.raises(CompileError, match="minilm.manifest.json: its 'stated' similarities are on 'minilm'"):
        calibrate(program, loader=lambda task, split: SPLITS[(task, split)], relevance=0, answer=0,
                  stated_rows=RecordedRows([other]))
    assert engine.calls == []  # the retrieve stage did not run
