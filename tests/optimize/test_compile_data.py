"""`compile --data`: the judgements and the answer signature compiled on a derived folder, a teacher LM
that bootstraps the demos (and reflects for GEPA, with each judgement's textual feedback), both LMs and
the data recorded in the manifest. Scripted LMs play student and teacher."""

import json

import dspy
import pytest

from optimize.compile import check_request, compile_program
from optimize.derive import derive_records
from optimize.derive_labels import holds_answer
from optimize.derived_data import write_derived
from optimize.errors import DataError
from optimize.feedback import judgement_feedback
from optimize.metrics import answer_quality
from optimize.optimizers import feedback_metric
from optimize.qa_format import load_qa_file
from optimize.sources import RETRIEVE_FILE, read_retrieve_file
from programs.artifacts import load_state_into
from programs.selfrag import SelfRAG
from selfrag import paths
from selfrag.settings import Settings
from tests.fakes import ROLES, ListRetriever, _output_fields, _system_text
from tests.optimize.test_compile import AnyEngine
from tests.optimize.user_data import QA, catalog, hash_kb, write_qa

ANSWER_OF = {q["question"]: (q["answers"] or [""])[0] for q in QA}


@pytest.fixture(scope="module")
def derived_dir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("derived")
    kb = hash_kb(tmp)
    derived = derive_records(load_qa_file(write_qa(tmp / "qa.jsonl")), kb.retriever(), catalog(kb),
                             read_retrieve_file(paths.data_dir() / RETRIEVE_FILE))
    write_derived(derived, tmp / "data", {"collection": "toy", "qa_file": "qa.jsonl"})
    return tmp / "data"


class RecordingEngine(AnyEngine):
    """AnyEngine that also keeps the user message of the optimizers' own prompts (GEPA's reflection)."""

    def __init__(self, script):
        super().__init__(script)
        self.optimizer_prompts: list[str] = []

    def complete(self, request):
        if _output_fields(_system_text(request)) not in ROLES:
            self.optimizer_prompts.append(request.messages[-1].text or "")
        return super().complete(request)


def lm(engine, name):
    return dspy.LM(f"scripted/{name}", engine=engine, cache=False)


def teacher_script():
    def relevance(inp):
        held = holds_answer(inp["passage"], ANSWER_OF.get(inp["question"], "")) if ANSWER_OF.get(inp["question"]) \
            else (False, 0)
        return {"passage_topic": "teacher topic", "relevance": "relevant" if held[0] else "irrelevant"}

    def answer(inp):
        gold = ANSWER_OF.get(inp["question"], "")
        return {"answer": gold or "The passages do not say.", "citations": [1], "answerable": bool(gold)}

    return {"grade_relevance": relevance, "generate_answer": answer, "judge_support": {"support": "no"}}


STUDENT = {"grade_relevance": {"passage_topic": "student topic", "relevance": "irrelevant"},
           "generate_answer": {"answer": "student", "citations": [1], "answerable": True},
           "judge_support": {"support": "fully"}}


def test_all_includes_the_answer_stage_only_with_derived_data():
    assert check_request(judgements="all", with_answer=True)[0] == ["retrieve", "relevance", "support", "usefulness",
                                                                     "answer"]
    assert "answer" not in check_request(judgements="all")[0]
    with pytest.raises(Exception, match="needs a derived data folder"):
        check_request(judgements="answer")


def test_compile_on_derived_data_bootstraps_from_the_teacher(derived_dir, tmp_path):
    student, teacher = AnyEngine(STUDENT), AnyEngine(teacher_script())
    result = compile_program(Settings(), lms=(lm(student, "student"), None, dspy.JSONAdapter()),
                             splits_dir=paths.splits_dir(), data_dir=derived_dir, out_dir=tmp_path,
                             optimizer="bootstrap", judgements="relevance,answer", train=None, dev=None, budget=2,
                             name="mine", teacher_lm=lm(teacher, "teacher"))
    assert teacher.calls and student.calls
    assert {role for role, _ in teacher.calls} == {"grade_relevance", "generate_answer"}
    stages = {s.name: s for s in result.stages}
    assert set(stages) == {"relevance", "answer"} and stages["answer"].metric == "answer_quality"
    assert stages["answer"].task == "answer" and stages["answer"].train >= 3
    rag = load_state_into(SelfRAG(ListRetriever([])), result.artifact)
    augmented = [d for d in rag.grade_relevance.demos if d.get("augmented")]
    assert augmented and all(d["passage_topic"] == "teacher topic" for d in augmented)  # the teacher's traces
    answers = {d["answer"] for d in rag.generate_answer.demos}
    assert answers & {"1931", "Marta Kovac", "silver blue", "It spawns in October.", "in 1976",
                      "Jane Roe founded Acme in Leeds."}
    m = json.loads(result.manifest_path.read_text())
    assert m["lm"]["teacher"] == "scripted/teacher" and m["lm"]["generator"] == "scripted/student"
    assert m["optimizer"]["params"]["teacher_lm"] == "scripted/teacher"
    assert m["data"]["collection"] == "toy" and m["data"]["format_version"] == 1
    assert m["dataset_hash"] == json.loads((derived_dir / "manifest.json").read_text())["dataset_hash"]


def test_gepa_reflects_with_the_teacher_on_each_examples_feedback(derived_dir, tmp_path):
    student, teacher = AnyEngine(STUDENT), RecordingEngine(teacher_script())
    result = compile_program(Settings(), lms=(lm(student, "student"), None, dspy.JSONAdapter()),
                             splits_dir=paths.splits_dir(), data_dir=derived_dir, out_dir=tmp_path, optimizer="gepa",
                             judgements="support", train=None, dev=4, budget=24, name="gepa",
                             teacher_lm=lm(teacher, "teacher"))
    assert result.manifest["lm"]["reflection"] == "scripted/teacher"
    assert teacher.optimizer_prompts and not any(r.startswith("optimizer:") for r, _ in student.calls)
    reflected = "\n".join(teacher.optimizer_prompts)
    assert "Wrong: support should be" in reflected and "The claim not backed by the passages: «" in reflected


def test_a_data_folder_of_another_version_is_refused_before_any_lm_call(derived_dir, tmp_path):
    other = tmp_path / "old"
    other.mkdir()
    manifest = json.loads((derived_dir / "manifest.json").read_text())
    (other / "manifest.json").write_text(json.dumps({**manifest, "format_version": 0}))
    student = AnyEngine(STUDENT)
    with pytest.raises(DataError, match="format version 0"):
        compile_program(Settings(), lms=(lm(student, "s"), None, dspy.JSONAdapter()), splits_dir=paths.splits_dir(),
                        data_dir=other, out_dir=tmp_path, judgements="relevance")
    assert student.calls == [] and not (tmp_path / "compiled-bootstrap.json").exists()


def test_feedback_says_the_expected_label_what_decides_it_and_the_claim_not_backed():
    derived = dspy.Example(support="partially", answer="1931. Trams use the tunnel.", unsupported_claim="Trams use "
                           "the tunnel.", decides="The answer's first part is in the passage; the claim «Trams use "
                           "the tunnel.» is not")
    text = judgement_feedback("support", derived, dspy.Prediction(support="fully"), 0.0)
    assert text.startswith("Wrong: support should be 'partially', the judge said 'fully'.")
    assert "Why: The answer's first part" in text and "The claim not backed by the passages: «Trams use the tunnel.»" in text
    handmade = dspy.Example(support="no", answer="In Montana.")  # the hand-made splits: the definition, the answer
    text = judgement_feedback("support", handmade, dspy.Prediction(support="no"), 1.0)
    assert text.startswith("Correct") and "do not state the answer" in text and "«In Montana.»" in text
    rel = judgement_feedback("relevance", dspy.Example(relevance="irrelevant", decides="From another document"),
                             dspy.Prediction(relevance="relevant"), 0.0)
    assert "should be 'irrelevant'" in rel and "Why: From another document." in rel
    use = judgement_feedback("usefulness", dspy.Example(usefulness=1), dspy.Prediction(usefulness=4), 0.0)
    assert "expected side: not_useful" in use and "dodges the question" in use
    rd = judgement_feedback("decision", dspy.Example(decision="no"), dspy.Prediction(decision="yes"), 0.0)
    assert "without any document" in rd
    fb = feedback_metric(answer_quality, "answerable")
    unanswerable = fb(dspy.Example(answerable=False, answers=[]), dspy.Prediction(answer="x", answerable=True))
    assert unanswerable.score == 0.0 and "set answerable to false" in unanswerable.feedback
    partial = fb(dspy.Example(answerable=True, answers=["Jane Roe"], decides="Passage [2] states the answer"),
                 dspy.Prediction(answer="Roe", answerable=True))
    assert partial.score == pytest.approx(2 / 3) and "Expected answer: «Jane Roe»" in partial.feedback
    assert "Passage [2] states the answer" in partial.feedback


def test_answer_quality_scores_the_answer_signature():
    gold = dspy.Example(answerable=True, answers=["in 1976"])
    assert answer_quality(gold, dspy.Prediction(answer="in 1976", answerable=True)) == 1.0
    assert answer_quality(gold, dspy.Prediction(answer="in 1976", answerable=False)) == 0.0
    assert answer_quality(gold, dspy.Prediction(answer="1976", answerable=True), trace=[]) is True
    none = dspy.Example(answerable=False, answers=[])
    assert answer_quality(none, dspy.Prediction(answer="", answerable=False)) == 1.0
    assert answer_quality(none, dspy.Prediction(answer="x", answerable="true")) == 0.0


def test_the_end_to_end_stage_runs_on_the_derived_questions_over_the_collection(derived_dir, tmp_path):
    kb = hash_kb(derived_dir.parent)  # the collection the folder was derived from
    script = {**teacher_script(), "retrieve_decision": {"decision": "yes"}, "judge_support": {"support": "fully"},
              "judge_usefulness": {"usefulness": 5}, "grade_relevance": {"relevance": "relevant"}}
    engine = AnyEngine(script)
    result = compile_program(Settings(), lms=(lm(engine, "student"), None, dspy.JSONAdapter()),
                             splits_dir=paths.splits_dir(), data_dir=derived_dir, out_dir=tmp_path,
                             judgements="none", e2e=True, e2e_train=3, e2e_dev=2, budget=1, name="e2e",
                             retriever=kb.retriever())
    stage = result.stages[0]
    assert stage.name == "e2e" and stage.train == 3 and stage.dev >= 1 and stage.after is not None
    asked = {inputs.get("question") for role, inputs in engine.calls if role == "generate_answer"}
    assert asked and asked <= {q["question"] for q in QA}  # the user's questions, answered from the collection
