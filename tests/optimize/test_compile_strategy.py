"""Compiling a strategy program end to end (``selfrag compile --program iterative --e2e``) with the scripted
engine: its own LM steps (``next_query``, a retrieval strategy's predictor) take bootstrapped demos, and the
artifact loads back as the same class."""

import dspy
import pytest

from optimize.compile import check_request
from optimize.compile_strategy import compile_strategy_program
from optimize.errors import CompileError
from optimize.evaluate import build_program
from programs.artifacts import artifact_program, read_artifact
from programs.iterative import IterativeRAG
from programs.registry import parse_program
from selfrag import paths
from selfrag.settings import Settings
from tests.fakes import ListRetriever, passage
from tests.optimize.test_compile import fake_lms

HERON = passage("heron", "The Heron is a cargo bike model made by Kestrel.")
ECO = passage("eco", "On the Eco setting the Heron range is 80 km.")


class QueryRetriever:
    """The Eco passage for a query that names it, else the Heron one: only a re-query finds the answer."""

    def retrieve(self, query, k=5, filters=None):
        return [ECO] if "eco" in query.lower() else [HERON]


class FakeKB:
    def __init__(self, retriever):
        self._retriever = retriever

    def is_empty(self):
        return False

    def retriever(self, mode=None):
        return self._retriever


def qa_loader(task, split):
    assert task == "qa_en"
    return [dspy.Example(question=f"What is the range of the Heron model {i}?", answer="80 km", answers=["80 km"],
                         answerable=True, gold_doc_ids=["eco"], id=f"{split}{i}").with_inputs("question")
            for i in range(4)]


SCRIPT = {
    "generate_answer": {"answer": "80 km", "citations": [1], "answerable": True},
    "judge_support": lambda inp: {"support": "fully" if "Eco setting" in inp["passages"] else "no"},
    "next_query": {"next_query": "Heron range on the Eco setting"},
    "paraphrase_query": {"paraphrases": ["How far does the Heron go?"]},
}


def compile_iterative(tmp_path, settings=None, retriever=None):
    lms, engine = fake_lms(SCRIPT)
    with dspy.context(lm=None, adapter=None, callbacks=[]):
        result = compile_strategy_program(
            settings or Settings(), "iterative", lms=lms, splits_dir=paths.splits_dir(), out_dir=tmp_path,
            knowledge_base=lambda name: FakeKB(retriever or QueryRetriever()), datasets_dir=tmp_path,
            optimizer="bootstrap", e2e_train=3, e2e_dev=2, budget=2, name="iter", loader=qa_loader)
    return result, engine


def test_iterative_compiles_end_to_end_and_loads_back_as_itself(tmp_path):
    result, engine = compile_iterative(tmp_path)
    assert [s.name for s in result.stages] == ["e2e"]
    assert result.stages[0].before == 1.0 and result.stages[0].after == 1.0
    payload = read_artifact(result.artifact)
    assert payload["program"] == "IterativeRAG" and artifact_program(result.artifact) == "iterative"
    assert payload["manifest"]["program_name"] == "iterative"
    assert payload["manifest"]["program_settings"]["max_iterations"] == 3
    assert len(payload["state"]["next_query"]["demos"]) == 2
    assert payload["state"]["next_query"]["demos"][0]["next_query"] == "Heron range on the Eco setting"
    assert (tmp_path / "iter.manifest.json").is_file()
    assert result.manifest["cost"]["lm_calls"] == len(engine.calls)

    loaded = build_program(parse_program(f"compiled:{result.artifact}"), ListRetriever([]))
    assert type(loaded) is IterativeRAG
    assert [d["next_query"] for d in loaded.next_query.demos] == [d["next_query"]
                                                                  for d in result.program.next_query.demos]
    assert len(loaded.generate_answer.demos) == 2 and len(loaded.judge_support.demos) == 2


def test_a_retrieval_strategys_predictor_is_compiled_too(tmp_path):
    settings = Settings(program={"strategy": "iterative", "transforms": ["multi_query"]})
    result, engine = compile_iterative(tmp_path, settings)
    state = read_artifact(result.artifact)["state"]
    strategy = [n for n in state if n.startswith("retrieval.")]
    assert strategy and all(len(state[n]["demos"]) == 2 for n in strategy)
    assert any(role == "paraphrase_query" for role, _ in engine.calls)
    with pytest.raises(Exception, match="recompile"):  # the artifact needs the settings it was compiled with
        build_program(parse_program(f"compiled:{result.artifact}"), ListRetriever([]))


@pytest.mark.parametrize("request_, allowed", [
    (dict(judgements="support", e2e=True), "--e2e --judgement none"),
    (dict(judgements="none", e2e=False), "--e2e --judgement none"),
    (dict(judgements="none", e2e=True, calibrate=True), "--calibrate"),
])
def test_a_strategy_program_compiles_end_to_end_only(request_, allowed):
    with pytest.raises(CompileError, match="compiles end to end only") as err:
        check_request(program="iterative", **request_)
    assert allowed in str(err.value)


def test_unknown_program_is_refused():
    with pytest.raises(CompileError, match="unknown program 'bogus'"):
        check_request(program="bogus", judgements="none", e2e=True)


def relevance_loader(task, split):
    assert task == "relevance"
    return [dspy.Example(id=f"{split}{i}", question=f"What is the range of the Heron model {i}?",
                         passage=ECO.text if i % 2 == 0 else "Glass recycling is collected on Tuesdays.", title="",
                         relevance="relevant" if i % 2 == 0 else "irrelevant") for i in range(8)]


CRAG_PROBS = {"evaluate_retrieval": lambda inp: {"score": {8: 0.7, 6: 0.3} if "Eco" in inp["passage"]
                                                 else {3: 0.8, 6: 0.2}}}


def compile_crag(tmp_path, **kwargs):
    from tests.fakes import scripted_lm

    decoded = {"evaluate_retrieval": lambda inp: {"score": 8 if "Eco" in inp["passage"] else 3}}
    lm, engine = scripted_lm(decoded, probs=CRAG_PROBS)
    with dspy.context(lm=None, adapter=None, callbacks=[]):
        result = compile_strategy_program(
            Settings(), "crag", lms=(lm, None, dspy.JSONAdapter()), splits_dir=paths.splits_dir(), out_dir=tmp_path,
            knowledge_base=lambda name: pytest.fail("calibrating alone fills no collection"), name="crag",
            loader=relevance_loader, e2e=False, calibrate_sizes={"crag": 6}, calibrate_split="dev", **kwargs)
    return result, engine


def test_crag_calibrates_its_evaluator_alone_and_the_artifact_carries_the_thresholds(tmp_path):
    from programs.crag import CorrectiveRAG
    from programs.thresholds import CragThresholds

    result, engine = compile_crag(tmp_path)
    assert [role for role, _ in engine.calls] == ["evaluate_retrieval"] * 6 and result.stages == []
    payload = read_artifact(result.artifact)
    assert payload["program"] == "CorrectiveRAG"
    stage = payload["manifest"]["calibration"]["stages"]["crag"]
    assert stage["split"] == "dev" and stage["n"] == 6 and stage["auc_expected"] == 1.0
    assert stage["reliability_png"] == "crag.calibration/reliability-crag.png"  # relative to the out folder
    fitted = CragThresholds(**payload["thresholds"]["crag"])
    assert fitted.score == "expected" and 3.6 < fitted.lower <= fitted.upper < 7.4  # between E = 3.6 and 7.4
    assert payload["manifest"]["thresholds"]["crag"] == fitted.model_dump()
    assert payload["manifest"]["cost"]["lm_calls"] == 6 and payload["manifest"]["collection"] is None
    loaded = build_program(parse_program(f"compiled:{result.artifact}"), ListRetriever([]))
    assert type(loaded) is CorrectiveRAG and loaded.crag_thresholds == fitted


def test_crag_calibration_targets_are_passed_through(tmp_path):
    loose, _ = compile_crag(tmp_path / "a", crag_max_trusted=1.0, crag_max_dropped=1.0)
    stage = read_artifact(loose.artifact)["manifest"]["calibration"]["stages"]["crag"]
    assert (stage["max_trusted"], stage["max_dropped"]) == (1.0, 1.0)
    assert stage["upper"] == 0.0  # everything may be trusted: the lowest cut


@pytest.mark.parametrize("request_, message", [
    (dict(judgements="none", e2e=False), "--program crag compiles end to end and / or calibrates"),
    (dict(judgements="relevance", calibrate=True), "the judgement stages are SelfRAG's"),
])
def test_crag_requests_that_are_refused(request_, message):
    with pytest.raises(CompileError, match=message):
        check_request(program="crag", **request_)
    check_request(program="crag", judgements="none", calibrate=True)  # calibrate alone is a request


def test_a_fit_for_chinese_questions_on_english_ones_is_refused_before_any_call():
    from optimize.compile_strategy import check_fit_language

    english = relevance_loader("relevance", "dev")
    with pytest.raises(CompileError, match=r"--language zh: 8 of the 8 sampled passages' questions are not in zh"):
        check_fit_language(english, "zh")
    check_fit_language(english, "en")  # English fits the set for any language: any questions
    check_fit_language([ex.copy(question=f"Heron {i} 型的续航是多少？") for i, ex in enumerate(english)], "zh")


def test_a_setting_against_the_started_from_artifacts_chinese_set_is_a_compile_error(tmp_path):
    from programs.artifacts import save_artifact
    from programs.crag import CorrectiveRAG
    from programs.settings import ProgramSettings
    from programs.thresholds import CragThresholds, Thresholds

    program = CorrectiveRAG(ListRetriever([]), config=ProgramSettings())
    program.compiled_thresholds = Thresholds(crag_by_language={"zh": CragThresholds(upper=5.0, lower=4.0)})
    artifact = save_artifact(program, tmp_path / "start.json")
    settings = Settings().model_copy(update={"program": ProgramSettings(crag_lower=5.5)})
    with pytest.raises(CompileError, match=r"--from .*start.json: program settings: .*crag_lower \(5.5\).*zh questions"):
        compile_strategy_program(
            settings, "crag", lms=(None, None, dspy.JSONAdapter()), splits_dir=paths.splits_dir(), out_dir=tmp_path,
            knowledge_base=lambda name: pytest.fail("no collection"), name="c", loader=relevance_loader, e2e=False,
            calibrate_sizes={"crag": 6}, start_from=artifact)
